"""What the agent and the worker's timers reach in the running pipeline: the app's Kafka
producer, the partition of a subject's records, and a subject's stored head read from the
state table's store (folded from its history segments when recovery left it unfolded)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from faust.exceptions import NotReady

from streams.app import Pipeline
from streams.record_batches import default_partition
from streams.table_codecs import StoredSegment, StoredState, segment_key


def kafka_producer(pipeline: Pipeline) -> Any:
    """The app's aiokafka producer (Faust flushes it before every offset commit). Raises
    `NotReady` before it started and after it stopped."""
    faust_producer: Any = pipeline.app.producer
    return faust_producer._ensure_producer()  # Faust exposes it no other way


def producer_running(pipeline: Pipeline) -> bool:
    """Whether the app's producer can send: Faust stops it before the app's timers while the
    worker shuts down, so a timer may still fire after it stopped."""
    try:
        kafka_producer(pipeline)
    except NotReady:
        return False
    return True


def events_assignment(pipeline: Pipeline) -> list[Any]:
    """The events topic's partitions this worker's consumer is assigned now, in order, its
    subjects' state with them (a table's standby copies of other partitions are not among
    them)."""
    events = pipeline.topics.events
    return sorted(tp for tp in pipeline.app.consumer.assignment() if tp.topic == events)


def owned_partitions(pipeline: Pipeline) -> frozenset[int]:
    return frozenset(tp.partition for tp in events_assignment(pipeline))


def owned_subjects(pipeline: Pipeline, keys: Iterable[str]) -> list[str]:
    """The subjects of `keys` whose partition this worker owns now."""
    owned = owned_partitions(pipeline)
    return [key for key in keys if partition_of(pipeline, key) in owned]


def settled(pipeline: Pipeline) -> bool:
    """Whether the worker neither rebalances nor recovers its tables: only then is every state
    it holds for its partitions the latest (a recovering copy may still be replaying old
    changelog records)."""
    return not (pipeline.app.rebalancing or pipeline.app.in_recovery)


def partition_of(pipeline: Pipeline, key: str) -> int:
    """The partition of a subject's records in every partitioned topic and the state table:
    the events topic's, by Kafka's default partitioner."""
    return default_partition(key.encode(), pipeline.topics.partitions)


def loaded(pipeline: Pipeline, key: str) -> StoredState | None:
    """A subject's head, its state folded from its segments if recovery left it unfolded (kept
    in the table's store as it is: nothing is written to the changelog). Read from the store
    directly, as `store` writes it, without the table's per-read sensor hook."""
    stored = pipeline.states.data.get(key)
    if not isinstance(stored, StoredState):
        return None
    if stored.needs_fold:
        segments = [pipeline.states.data.get(segment_key(key, n)) for n in range(stored.segments)]
        whole = [segment for segment in segments if isinstance(segment, StoredSegment)]
        if len(whole) != stored.segments:
            raise LookupError(f"history segments of a subject are missing from the table ({key})")
        stored = stored.folded(whole)
        pipeline.states.data[key] = stored
    return stored
