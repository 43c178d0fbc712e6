"""The worker's outputs sent as record batches: the partitions Kafka's own partitioner gives
(co-partitioned with the events producers send), every record sent once and in order, a full
batch continued in the next."""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import TopicPartition
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.producer.message_accumulator import BatchBuilder, MessageBatch
from aiokafka.record.default_records import DefaultRecordBatch

from streams.record_batches import RecordBatches, default_partition


def test_default_partition_is_the_partition_kafkas_default_partitioner_gives() -> None:
    partitioner = DefaultPartitioner()
    for partitions in (1, 4, 7):
        every = list(range(partitions))
        for number in range(300):
            key = f"clinic-{number % 3}:subject-{number}".encode()
            assert default_partition(key, partitions) == partitioner(key, every, every)


class SmallBatches:
    """aiokafka's batch builder with room for a few records; keeps what each batch carried."""

    def __init__(self, batch_bytes: int) -> None:
        self.batch_bytes = batch_bytes
        self.sent: list[tuple[str, int, list[tuple[bytes, bytes, list[Any]]]]] = []

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(self.batch_bytes, 0)

    async def send_batch(self, batch: BatchBuilder, topic: str, *, partition: int) -> Any:
        records = DefaultRecordBatch(bytearray(batch._build()))
        carried = [(r.key, r.value, list(r.headers)) for r in records]
        self.sent.append((topic, partition, carried))
        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


def test_every_record_is_sent_once_in_order_per_partition_and_full_batches_continue() -> None:
    producer = SmallBatches(batch_bytes=300)
    batches = RecordBatches(producer)
    added = [(f"k{n}".encode(), bytes([n]) * 100, [("h", str(n).encode())]) for n in range(10)]
    for key, value, headers in added:
        batches.add("accepted", int(key[1:]) % 2, key, value, headers)
    batches.add("alerts", 0, b"k0", b"alert")

    async def send() -> None:
        await asyncio.gather(*await batches.send())

    asyncio.run(send())
    assert all(len(records) <= 2 for _, _, records in producer.sent[:-1])
    for topic, partition in (("accepted", 0), ("accepted", 1)):
        carried = [
            r for t, p, records in producer.sent if (t, p) == (topic, partition) for r in records
        ]
        assert carried == [record for record in added if int(record[0][1:]) % 2 == partition]
    assert producer.sent[-1] == ("alerts", 0, [(b"k0", b"alert", [])])
    assert batches.pending == {}


def test_a_sent_batch_goes_out_at_once_instead_of_waiting_out_the_producers_linger() -> None:
    """aiokafka holds an open batch for the producer's linger in case more records come; the
    worker's batches are complete when sent, and its alerts must not wait."""
    lingering: list[float | None] = []

    class Lingering(SmallBatches):
        async def send_batch(self, batch: BatchBuilder, topic: str, *, partition: int) -> Any:
            held = MessageBatch(TopicPartition(topic, partition), batch, ttl=30, linger_time=5.0)
            lingering.append(held.remaining_linger())
            return await super().send_batch(batch, topic, partition=partition)

    batches = RecordBatches(Lingering(batch_bytes=300))
    for number in range(5):
        batches.add("alerts", 0, f"k{number}".encode(), bytes(100))

    async def send() -> None:
        await asyncio.gather(*await batches.send())

    asyncio.run(send())
    assert len(lingering) > 1
    assert lingering == [None] * len(lingering)
