"""Fails fast when the Kafka account may not use the worker's consumer group. Without the
group's ACLs the Faust consumer waits for partitions that never come, without a word (aiokafka
keeps the authorization error for a fetch that is never made), so the worker would run and
consume nothing."""

from __future__ import annotations

import asyncio
import logging

from aiokafka import TopicPartition
from aiokafka.errors import GroupAuthorizationFailedError, KafkaError

from streams.liveness import committed_offsets

log = logging.getLogger(__name__)
PATIENCE_SECONDS = 30.0
"""How long a retriable answer (a new cluster still electing the group's coordinator) is
asked again before the check gives way to the consumer's own retries."""
COORDINATOR_LOOKUP = "Unable to get coordinator id for "
"""How aiokafka's admin client words a refused coordinator lookup, before the group id."""


class GroupNotAuthorized(PermissionError):
    """The Kafka account may not use a consumer group (an authorizer without its ACLs)."""


async def ensure_group_access(
    bootstrap: str,
    group: str,
    partitions: list[TopicPartition],
    patience: float = PATIENCE_SECONDS,
) -> None:
    """Read the group's committed offsets (the Describe the group's ACLs allow), or say which
    group the account may not use. Any other failure is logged and left to the consumer."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    while True:
        try:
            await committed_offsets(bootstrap, group, partitions)
            return
        except GroupAuthorizationFailedError:
            raise not_authorized(group) from None
        except KafkaError as error:
            if not error.retriable or loop.time() > deadline:
                log.warning("consumer group %s not checked: %r", group, error)
                return
            await asyncio.sleep(0.5)


def not_authorized(group: str | None) -> GroupNotAuthorized:
    """The refusal, naming the group where Kafka's error does."""
    group = group.removeprefix(COORDINATOR_LOOKUP) if group else None
    named = f"consumer group {group!r}" if group else "the consumer group of this command"
    return GroupNotAuthorized(
        f"this Kafka account may not use {named}: grant it Read and Describe on the group "
        "(docs/operator.md, Secured Kafka)"
    )
