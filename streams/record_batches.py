"""A processed batch's records, sent to Kafka as one record batch per topic partition.

Producing record by record costs aiokafka a future, a partition lookup and a queue entry per
record (about 47 µs of CPU for a 500-byte record on the benchmark machine; Faust's buffered
table writes add their own machinery on top); appending the same records to one batch per
partition costs about 8 µs each, in batches of up to 256 KiB (`streams.app`). Partitions are
Kafka's default partitioner's (murmur2 of the key), so records land where record-by-record
sends put them, co-partitioned with the events topic. The order of a partition's records is
the order they were added.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from aiokafka.partitioner import murmur2

Header = tuple[str, bytes]
Record = tuple[bytes, bytes | None, list[Header]]


@lru_cache(maxsize=65_536)
def default_partition(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner gives `key` among `partitions` (remembered
    for the most recent keys: murmur2 is pure Python, and a batch names its subjects several
    times)."""
    return int(murmur2(key) & 0x7FFFFFFF) % partitions


@dataclass
class RecordBatches:
    """Records collected per (topic, partition), sent together by `send`."""

    producer: Any
    """The (aiokafka) producer whose `create_batch` and `send_batch` carry the batches."""
    pending: dict[tuple[str, int], list[Record]] = field(default_factory=dict)

    def add(
        self,
        topic: str,
        partition: int,
        key: bytes,
        value: bytes | None,
        headers: Sequence[Header] = (),
    ) -> None:
        self.pending.setdefault((topic, partition), []).append((key, value, list(headers)))

    async def send(self) -> list[asyncio.Future[Any]]:
        """Hand every pending record to the producer; the futures resolve once Kafka has them
        (and raise if it refused them)."""
        deliveries = []
        for (topic, partition), records in self.pending.items():
            batch = self.producer.create_batch()
            for key, value, headers in records:
                if batch.append(key=key, value=value, timestamp=None, headers=headers) is None:
                    deliveries.append(await self._send_closed(batch, topic, partition))
                    batch = self.producer.create_batch()
                    if batch.append(key=key, value=value, timestamp=None, headers=headers) is None:
                        raise RuntimeError("aiokafka refused a record in an empty batch")
            deliveries.append(await self._send_closed(batch, topic, partition))
        self.pending = {}
        return deliveries

    async def _send_closed(self, batch: Any, topic: str, partition: int) -> asyncio.Future[Any]:
        """Send a batch closed to further records: aiokafka sends a closed batch at once, where
        an open one would wait out the producer's linger (5 ms in the worker) for records that
        will never come; on the benchmark machine a 20-record round trip with acks=all took 7 ms
        open and under 1 ms closed."""
        batch.close()
        delivery: asyncio.Future[Any] = await self.producer.send_batch(
            batch, topic, partition=partition
        )
        return delivery

    async def deliver(self) -> None:
        """`send`, then wait until Kafka has every record (raises if it refused any)."""
        await asyncio.gather(*await self.send())
