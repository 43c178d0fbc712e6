"""Stand-ins for the worker's Kafka plumbing in tests that run its batch code without a broker:
the state table and the producer the worker sends record batches with."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any


class Table(dict[Any, Any]):
    """A Faust table's store and changelog name, as the worker uses them."""

    changelog_topic = SimpleNamespace(get_topic_name=lambda: "changelog")

    @property
    def data(self) -> dict[Any, Any]:
        return self


class Batch(list[tuple[bytes, bytes]]):
    def append(self, *, key: bytes, value: bytes, **_: Any) -> bool:  # type: ignore[override]
        super().append((key, value))
        return True

    def close(self) -> None:
        """aiokafka's builder refuses further records once closed; here nothing follows."""


class BatchProducer:
    """aiokafka's producer as the worker sends with it: keeps (topic, key, value) of every
    record in the order sent; with `fail`, every send raises as a lost broker does; with
    `refuse`, every delivery fails with it, as a broker refusing a record does."""

    def __init__(
        self, partitions: int = 4, fail: bool = False, refuse: Exception | None = None
    ) -> None:
        self.partitions, self.fail, self.refuse = partitions, fail, refuse
        self.sent: list[tuple[str, bytes, bytes]] = []

    def create_batch(self) -> Batch:
        return Batch()

    async def send_batch(self, batch: Batch, topic: str, *, partition: int) -> asyncio.Future[None]:
        if self.fail:
            raise ConnectionError("the broker is gone")
        assert partition in range(self.partitions)
        self.sent.extend((topic, key, value) for key, value in batch)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.refuse is None:
            done.set_result(None)
        else:
            done.set_exception(self.refuse)
        return done


def faust_app(producer: BatchProducer) -> Any:
    """The Faust app as far as the worker's batch code reaches into it."""
    return SimpleNamespace(producer=SimpleNamespace(_ensure_producer=lambda: producer))
