"""Reading whole topics (to their current end) or following them, without a consumer group:
for the CLI's alerts/state/replay commands, which must never move the pipeline's offsets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from streams.topics import STATE_REQUEST_BYTES


async def topic_partitions(bootstrap: str, topic: str) -> list[int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="uac-reader")
    await admin.start()
    try:
        (described,) = await admin.describe_topics([topic])
    finally:
        await admin.close()
    if described["error_code"] != 0 or not described["partitions"]:
        raise LookupError(f"topic {topic} does not exist (is the pipeline set up?)")
    return sorted(partition["partition"] for partition in described["partitions"])


async def _assigned_consumer(
    bootstrap: str, topic: str, partitions: list[int] | None
) -> AIOKafkaConsumer:
    chosen = await topic_partitions(bootstrap, topic) if partitions is None else partitions
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        client_id="uac-reader",
        max_partition_fetch_bytes=STATE_REQUEST_BYTES,
    )
    await consumer.start()
    try:
        assignment = [TopicPartition(topic, p) for p in chosen]
        consumer.assign(assignment)
        await consumer.seek_to_beginning(*assignment)
    except BaseException:
        await consumer.stop()
        raise
    return consumer


async def _behind(consumer: AIOKafkaConsumer, ends: dict[TopicPartition, int]) -> bool:
    positions = [await consumer.position(tp) for tp in ends]
    return any(position < end for position, end in zip(positions, ends.values(), strict=True))


async def read_topic(bootstrap: str, topic: str, partitions: list[int] | None = None) -> list[Any]:
    """Every record currently in `topic` (the end is fixed when reading starts), in
    (partition, offset) order."""
    consumer = await _assigned_consumer(bootstrap, topic, partitions)
    try:
        ends = await consumer.end_offsets(list(consumer.assignment()))
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
    consumer = await _assigned_consumer(bootstrap, topic, None)
    try:
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=500)
            for batch in batches.values():
                for record in batch:
                    yield record
    finally:
        await consumer.stop()
