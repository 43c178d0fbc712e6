"""`uac check-log`: has every event the workers moved past been decided?

Every record of the events topic below the worker group's committed offset must have a gate
decision: an accepted copy on the accepted topic (its `uac-source` header names the record) or
a quarantine record (its `source_*` fields do). A record without either was acknowledged
without being processed, the loss `streams.continuity` guards against. Records at or above the
committed offset are still pending and are not counted.

The check reads the events, accepted and quarantine topics in full (a fresh consumer without a
group, which moves no offsets), so it costs a pass over the log.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aiokafka import TopicPartition

from schemas.codec import decision_codec
from streams.liveness import group_committed_offsets
from streams.topic_reader import read_topic, topic_partitions
from streams.topics import Topics

Position = tuple[int, int]
"""(partition, offset) of a record of the events topic."""


@dataclass(frozen=True)
class LogCheck:
    committed: dict[int, int]
    events_below: dict[int, int]
    """Records below the committed offset, per partition (offsets without a record, such as
    transaction markers, are not records)."""
    undecided: list[Position]


def undecided(
    events: Iterable[Position], decided: set[Position], committed: Mapping[int, int]
) -> list[Position]:
    """The records below their partition's committed offset without a decision, in order."""
    return sorted((p, o) for p, o in events if o < committed.get(p, 0) and (p, o) not in decided)


def source_of_accepted(record: object, events_topic: str) -> Position | None:
    for name, value in getattr(record, "headers", None) or ():
        if name == "uac-source":
            topic, partition, offset = value.decode().rsplit("/", 2)
            return (int(partition), int(offset)) if topic == events_topic else None
    return None


async def check_log(bootstrap: str, topics: Topics, group: str) -> LogCheck:
    events = [(r.partition, r.offset) for r in await read_topic(bootstrap, topics.events)]
    decided = {
        source
        for record in await read_topic(bootstrap, topics.accepted)
        if (source := source_of_accepted(record, topics.events)) is not None
    }
    codec = decision_codec()
    for record in await read_topic(bootstrap, topics.quarantine):
        decision = codec.decode(record.value)
        if decision.source_topic == topics.events:
            decided.add((decision.source_partition, decision.source_offset))
    partitions = await topic_partitions(bootstrap, topics.events)
    committed = await group_committed_offsets(
        bootstrap, group, [TopicPartition(topics.events, p) for p in partitions]
    )
    below = Counter(p for p, o in events if o < committed[p])
    return LogCheck(
        committed, {p: below[p] for p in partitions}, undecided(events, decided, committed)
    )
