"""`uac lag`: how far each consumer group of the pipeline is behind the end of its topics.

The workers' group (`UAC_APP_ID`) consumes the events topic; the sink's (`UAC_APP_ID-sink`)
consumes the accepted, quarantine, alerts, state, audit and erasure topics. A partition's lag
is the records between the group's committed offset and the partition's end; where the group
has committed nothing yet it starts at the first offset retention kept, so records already
deleted are not counted as work still to do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aiokafka import TopicPartition

from streams.liveness import committed_offsets, group_member_count
from streams.settings import Settings
from streams.topic_reader import groupless_consumer, topic_partitions
from streams.topics import Topics


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None
    """The group's committed offset (None when it committed none for this partition)."""
    start: int
    end: int

    @property
    def lag(self) -> int:
        position = self.start if self.committed is None else max(self.committed, self.start)
        return max(0, self.end - position)


@dataclass(frozen=True)
class GroupLag:
    group: str
    members: int
    partitions: tuple[PartitionLag, ...]

    @property
    def lag(self) -> int:
        return sum(partition.lag for partition in self.partitions)

    def as_json(self) -> dict[str, object]:
        return {
            "group": self.group,
            "members": self.members,
            "lag": self.lag,
            "partitions": [
                {
                    "topic": p.topic,
                    "partition": p.partition,
                    "committed": p.committed,
                    "start": p.start,
                    "end": p.end,
                    "lag": p.lag,
                }
                for p in self.partitions
            ],
        }


def pipeline_groups(settings: Settings, topics: Topics) -> dict[str, tuple[str, ...]]:
    """Each consumer group of the pipeline with the topics it consumes."""
    return {settings.app_id: (topics.events,), settings.sink_group: topics.sink_inputs}


async def group_lag(bootstrap: str, group: str, topics: Sequence[str]) -> GroupLag:
    """The group's lag on every partition of `topics` (LookupError when a topic is missing)."""
    assignment = [
        TopicPartition(topic, partition)
        for topic in topics
        for partition in await topic_partitions(bootstrap, topic)
    ]
    committed = await committed_offsets(bootstrap, group, assignment)
    consumer = groupless_consumer(bootstrap, "uac-lag")
    await consumer.start()
    try:
        starts = await consumer.beginning_offsets(assignment)
        ends = await consumer.end_offsets(assignment)
    finally:
        await consumer.stop()
    partitions = tuple(
        PartitionLag(tp.topic, tp.partition, committed.get(tp), starts[tp], ends[tp])
        for tp in assignment
    )
    return GroupLag(group, await group_member_count(bootstrap, group), partitions)


async def pipeline_lag(bootstrap: str, groups: Mapping[str, Sequence[str]]) -> list[GroupLag]:
    return [await group_lag(bootstrap, group, topics) for group, topics in groups.items()]
