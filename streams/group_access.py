"""Fails fast when the Kafka account may not use the worker's consumer group. Without the
group's ACLs the Faust consumer waits for partitions that never come, without a word (aiokafka
keeps the authorization error for a fetch that is never made), so the worker would run and
consume nothing."""

from __future__ import annotations

from aiokafka import TopicPartition
from aiokafka.errors import GroupAuthorizationFailedError

from streams.liveness import committed_offsets


class GroupNotAuthorized(PermissionError):
    """The Kafka account may not use a consumer group (an authorizer without its ACLs)."""


async def ensure_group_access(bootstrap: str, group: str, partitions: list[TopicPartition]) -> None:
    """Read the group's committed offsets (the Describe the group's ACLs allow), or say which
    group the account may not use."""
    try:
        await committed_offsets(bootstrap, group, partitions)
    except GroupAuthorizationFailedError:
        raise not_authorized(group) from None


def not_authorized(group: str | None) -> GroupNotAuthorized:
    """The refusal, naming the group where Kafka's error does."""
    named = f"consumer group {group!r}" if group else "the consumer group of this command"
    return GroupNotAuthorized(
        f"this Kafka account may not use {named}: grant it Read and Describe on the group "
        "(docs/operator.md, Secured Kafka)"
    )
