"""Noticing a worker that has stopped consuming while its partitions still have work.

After a rebalance the Faust consumer can, rarely, stop handing a partition's records to the
agent: the records were fetched, never processed, so their offsets are never committed and the
partition stands still (seen after a worker was hard-killed and another took over). Nothing is
lost (uncommitted records are read again by the next consumer), but nothing moves either.

`StallWatch` decides, from what an operator would look at (committed offsets against end
offsets, and when the agent last finished a batch), whether the worker is stalled: some
assigned events partition is behind, its committed offsets have not moved and no batch was
processed for `stall_seconds`. The worker then restarts itself in place (same process id, same
arguments; see `streams.runtime.restart_in_place`) and resumes from the committed offsets:
replayed events are refused by the gate as duplicates and alerts keep their ids.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from streams.kafka_security import kafka_options

MEMBERS = 5
"""Index of the member list in a DescribeGroups response's group entry."""


@dataclass
class StallWatch:
    stall_seconds: float
    last_progress: float = 0.0
    committed: dict[int, int] | None = None
    """The committed offsets first read since the last progress (None until then)."""
    behind_since: dict[int, float] = field(default_factory=dict)
    """When each partition was first seen with unprocessed events since the last progress."""

    def progressed(self, now: float) -> None:
        """A batch was processed, or the consumer is (re)joining: the clock starts again."""
        self.last_progress = now
        self.committed = None
        self.behind_since.clear()

    def may_stall(self, now: float) -> bool:
        """Whether nothing has moved for the whole period (only then are offsets worth asking)."""
        return now - self.last_progress >= self.stall_seconds

    def stalled(
        self, committed: Mapping[int, int], ends: Mapping[int, int], now: float
    ) -> list[int]:
        """The partitions whose unprocessed events have waited `stall_seconds` while nothing
        moved (none when the worker is making progress anywhere, and none for events that just
        arrived at an idle worker). The first committed offsets read since the last progress
        are the baseline; a later change to them is progress."""
        if self.committed is not None and dict(committed) != self.committed:
            self.progressed(now)
        self.committed = dict(committed)
        behind = sorted(p for p, end in ends.items() if committed.get(p, 0) < end)
        self.seen_behind(behind, now)
        if not self.may_stall(now):
            return []
        return [p for p in behind if now - self.behind_since[p] >= self.stall_seconds]

    def seen_behind(self, partitions: Iterable[int], now: float) -> None:
        """The partitions that have events still to process at `now` (read every round, so
        that a stall is told after `stall_seconds`, not after twice that); those no longer
        behind are forgotten."""
        behind = set(partitions)
        for partition in list(self.behind_since):
            if partition not in behind:
                del self.behind_since[partition]
        for partition in behind:
            self.behind_since.setdefault(partition, now)


async def group_committed_offsets(
    bootstrap: str, group: str, partitions: list[TopicPartition]
) -> dict[int, int]:
    """The group's committed offset of each partition of one topic (0 where nothing was
    committed yet)."""
    found = await committed_offsets(bootstrap, group, partitions)
    return {tp.partition: found.get(tp, 0) for tp in partitions}


async def committed_offsets(
    bootstrap: str, group: str, partitions: list[TopicPartition]
) -> dict[TopicPartition, int]:
    """The group's committed offsets of `partitions` (those it never committed are left out),
    through an admin client of its own, opened and closed here."""
    async with _admin(bootstrap) as admin:
        offsets = await admin.list_consumer_group_offsets(group, partitions=partitions)
    return {tp: meta.offset for tp, meta in offsets.items() if meta.offset >= 0}


async def group_member_count(bootstrap: str, group: str) -> int:
    """How many consumers are members of `group` now (0 for an empty or unknown group)."""
    async with _admin(bootstrap) as admin:
        responses = await admin.describe_consumer_groups([group])
    return sum(len(described[MEMBERS]) for response in responses for described in response.groups)


@asynccontextmanager
async def _admin(bootstrap: str) -> AsyncIterator[AIOKafkaAdminClient]:
    """An admin client of its own, opened here and closed on the way out."""
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap, client_id="uac-watch", **kafka_options()
    )
    await admin.start()
    try:
        yield admin
    finally:
        await admin.close()
