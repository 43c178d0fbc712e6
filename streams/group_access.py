"""Fails fast when the Kafka account may not use the worker's consumer group. Without the
group's Read ACL the Faust consumer waits for partitions that never come, without a word
(aiokafka keeps the authorization error for a fetch that is never made), so the worker would
run and consume nothing.

The check asks the group's coordinator to join the group with a session timeout no broker
accepts: Kafka authorizes a JoinGroup (Read on the group; finding the coordinator needs
Describe) before it reads the request, so an account without Read is refused, and any other
account gets `INVALID_SESSION_TIMEOUT` without becoming a member or touching the group."""

from __future__ import annotations

import asyncio
import logging
from typing import cast

from aiokafka.client import AIOKafkaClient, CoordinationType
from aiokafka.errors import (
    GroupAuthorizationFailedError,
    InvalidSessionTimeoutError,
    KafkaError,
    for_code,
)
from aiokafka.protocol.group import JoinGroupRequest

from streams.kafka_security import kafka_options

log = logging.getLogger(__name__)
PATIENCE_SECONDS = 30.0
"""How long a retriable answer (a new cluster still electing the group's coordinator) is
asked again before the check gives way to the consumer's own retries."""
COORDINATOR_LOOKUP = "Unable to get coordinator id for "
"""How aiokafka's admin client words a refused coordinator lookup, before the group id."""
REFUSED_SESSION_TIMEOUT_MS = 0
"""Below every broker's `group.min.session.timeout.ms`: the join is refused once authorized."""


class GroupNotAuthorized(PermissionError):
    """The Kafka account may not use a consumer group (an authorizer without its ACLs)."""


async def ensure_group_access(
    bootstrap: str, group: str, patience: float = PATIENCE_SECONDS
) -> None:
    """Ask to join the group (see the module docstring), or say which group the account may
    not use. Any other failure is logged and left to the consumer."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    while True:
        try:
            answer = await join_answer(bootstrap, group)
        except GroupAuthorizationFailedError:
            raise not_authorized(group) from None
        except KafkaError as error:
            answer = type(error)
        if answer is GroupAuthorizationFailedError:
            raise not_authorized(group)
        if answer is InvalidSessionTimeoutError:
            return
        if not answer.retriable or loop.time() > deadline:
            log.warning("consumer group %s not checked: %s", group, answer.__name__)
            return
        await asyncio.sleep(0.5)


async def join_answer(bootstrap: str, group: str) -> type[KafkaError]:
    """The error the group's coordinator answers a join that asks for no session at all
    with, through a client of its own, opened and closed here."""
    client = AIOKafkaClient(
        bootstrap_servers=bootstrap, client_id="uac-group-check", **kafka_options()
    )
    try:
        await client.bootstrap()
        coordinator = await client.coordinator_lookup(CoordinationType.GROUP, group)
        request = JoinGroupRequest(
            group=group,
            session_timeout=REFUSED_SESSION_TIMEOUT_MS,
            rebalance_timeout=REFUSED_SESSION_TIMEOUT_MS,
            member_id=JoinGroupRequest.UNKNOWN_MEMBER_ID,
            group_instance_id=cast(str, None),
            protocol_type="consumer",
            group_protocols=[("range", b"")],
        )
        response = await client.send(coordinator, request)
    finally:
        await client.close()
    return cast(type[KafkaError], for_code(response.error_code))


def not_authorized(group: str | None) -> GroupNotAuthorized:
    """The refusal, naming the group where Kafka's error does."""
    group = group.removeprefix(COORDINATOR_LOOKUP) if group else None
    named = f"consumer group {group!r}" if group else "the consumer group of this command"
    return GroupNotAuthorized(
        f"this Kafka account may not use {named}: grant it Read and Describe on the group "
        "(docs/operator.md, Secured Kafka)"
    )
