"""Reading whole topics (to their current end), following them, or reading offset ranges,
without a consumer group: for the CLI's alerts/state/replay commands and for the worker's
reading of offsets its consumer passed over (`streams.continuity`), which must never move the
pipeline's offsets."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import TopicAuthorizationFailedError

from streams.kafka_security import kafka_options
from streams.topics import STATE_REQUEST_BYTES

READ_COMMITTED = "read_committed"
"""The isolation level of every UaC consumer of the events topic: the records of a producer's
aborted transaction are never read."""


class TopicMissing(LookupError):
    """A topic of the pipeline does not exist yet (the worker creates them on its first start)."""


class TopicNotAuthorized(LookupError):
    """The Kafka account may not describe, or may not read, a topic (an authorizer without the
    ACL)."""


READ_CHECK_MS = 1000
"""How long `ensure_readable` waits on its fetch at the end of the log: a refusal comes back
at once, an allowed fetch of nothing after the broker's fetch wait."""


async def topic_partitions(bootstrap: str, topic: str) -> list[int]:
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap, client_id="uac-reader", **kafka_options()
    )
    await admin.start()
    try:
        (described,) = await admin.describe_topics([topic])
    finally:
        await admin.close()
    if described["error_code"] == TopicAuthorizationFailedError.errno:
        raise TopicNotAuthorized(
            f"the Kafka account may not describe topic {topic} (TOPIC_AUTHORIZATION_FAILED): "
            "see docs/operator.md, Secured Kafka, for the ACLs each UaC process needs"
        )
    if described["error_code"] != 0 or not described["partitions"]:
        raise TopicMissing(
            f"topic {topic} does not exist: the pipeline is not set up (`uac worker` creates "
            "its topics when it first starts)"
        )
    return sorted(partition["partition"] for partition in described["partitions"])


async def ensure_readable(bootstrap: str, topics: list[str]) -> None:
    """Fetch at the end of partition 0 of each topic, without a group (nothing is read or
    committed), or say which topic the account may not read: a consumer without Read on a
    topic gets its refusal only when it fetches, inside the running process."""
    consumer = groupless_consumer(bootstrap, "uac-read-check")
    await consumer.start()
    try:
        assignment = [TopicPartition(topic, 0) for topic in topics]
        consumer.assign(assignment)
        await consumer.seek_to_end(*assignment)
        await consumer.getmany(timeout_ms=READ_CHECK_MS)
    except TopicAuthorizationFailedError as error:
        refused = ", ".join(str(topic) for topic in error.args) or ", ".join(topics)
        raise TopicNotAuthorized(
            f"the Kafka account may not read topic {refused} (TOPIC_AUTHORIZATION_FAILED): "
            "grant it Read on the topic (docs/operator.md, Secured Kafka)"
        ) from None
    finally:
        await consumer.stop()


def groupless_consumer(bootstrap: str, client_id: str) -> AIOKafkaConsumer:
    """A consumer outside any group: it reads where it is told and commits nothing, committed
    records only (as the worker does). An offset that retention already deleted resets to the
    start of the log."""
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=READ_COMMITTED,
        client_id=client_id,
        max_partition_fetch_bytes=STATE_REQUEST_BYTES,
        **kafka_options(),
    )


async def _assigned_consumer(
    bootstrap: str, topic: str, partitions: list[int] | None
) -> tuple[AIOKafkaConsumer, dict[TopicPartition, int]]:
    """A consumer at the beginning of the partitions, and their end offsets, asked before it
    fetches: a fetch of an empty partition waits on the broker (up to `fetch_max_wait_ms`,
    500 ms), and a request for the end offsets sent behind it on the same connection waited
    as long, half a second of every command that reads a topic."""
    chosen = await topic_partitions(bootstrap, topic) if partitions is None else partitions
    consumer = groupless_consumer(bootstrap, "uac-reader")
    await consumer.start()
    try:
        assignment = [TopicPartition(topic, p) for p in chosen]
        ends = await consumer.end_offsets(assignment)
        consumer.assign(assignment)
        await consumer.seek_to_beginning(*assignment)
    except BaseException:
        await consumer.stop()
        raise
    return consumer, ends


async def _behind(consumer: AIOKafkaConsumer, ends: dict[TopicPartition, int]) -> bool:
    positions = [await consumer.position(tp) for tp in ends]
    return any(position < end for position, end in zip(positions, ends.values(), strict=True))


async def read_topic(bootstrap: str, topic: str, partitions: list[int] | None = None) -> list[Any]:
    """Every record currently in `topic` (the end is fixed when reading starts), in
    (partition, offset) order."""
    consumer, ends = await _assigned_consumer(bootstrap, topic, partitions)
    try:
        records: list[Any] = []
        while await _behind(consumer, ends):
            batches = await consumer.getmany(timeout_ms=500)
            for tp, batch in batches.items():
                records.extend(record for record in batch if record.offset < ends[tp])
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        await consumer.stop()


async def follow_topic(bootstrap: str, topic: str, stop: asyncio.Event) -> AsyncIterator[Any]:
    """Every record of `topic` from the beginning, then new ones as they arrive, until `stop`."""
    consumer, _ = await _assigned_consumer(bootstrap, topic, None)
    try:
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=500)
            for batch in batches.values():
                for record in batch:
                    yield record
    finally:
        await consumer.stop()


class OffsetRanges(Protocol):
    """What reading passed-over offsets needs of a partition's log: where it starts now, and
    the records of an offset range, in chunks."""

    async def log_start(self, partition: int) -> int: ...

    def read(self, partition: int, start: int, end: int, chunk: int) -> AsyncIterator[Any]: ...


class RangeReader:
    """Reads given offset ranges of a topic's partitions, without a consumer group (so it never
    moves anyone's offsets). Its consumer is started on first use and kept until `close`."""

    STALLED_SECONDS = 60.0

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._bootstrap, self._topic = bootstrap, topic
        self._consumer: AIOKafkaConsumer | None = None

    async def _started(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            consumer = groupless_consumer(self._bootstrap, "uac-range-reader")
            await consumer.start()
            self._consumer = consumer
        return self._consumer

    async def log_start(self, partition: int) -> int:
        """The first offset the partition still holds (what retention has not deleted)."""
        tp = TopicPartition(self._topic, partition)
        consumer = await self._started()
        return int((await consumer.beginning_offsets([tp]))[tp])

    async def read(self, partition: int, start: int, end: int, chunk: int) -> AsyncIterator[Any]:
        """The records at offsets `start` to `end` (exclusive) still in the log, in order, in
        lists of at most `chunk`. Raises TimeoutError when the broker gives nothing for
        `STALLED_SECONDS` while offsets remain."""
        tp = TopicPartition(self._topic, partition)
        consumer = await self._started()
        consumer.assign([tp])
        consumer.seek(tp, start)
        deadline, reached = time.monotonic() + self.STALLED_SECONDS, start
        while (position := await consumer.position(tp)) < end:
            if position > reached:
                deadline, reached = time.monotonic() + self.STALLED_SECONDS, position
            elif time.monotonic() > deadline:
                raise TimeoutError(f"offsets {position}-{end} of {tp} could not be read")
            batches = await consumer.getmany(tp, timeout_ms=500, max_records=chunk)
            records = [record for record in batches.get(tp, []) if record.offset < end]
            if records:
                yield records

    async def close(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None
