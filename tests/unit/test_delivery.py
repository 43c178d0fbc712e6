"""Inline delivery of fetched messages (`streams.delivery`): a delivery that does not wait is
done without a race; one that waits is raced as Faust races it, so a rebalance still cancels
it; and the copy of Faust's fetch loop is flagged when Faust's own loop changes."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
from faust.transport.consumer import Consumer

from streams.app import create_app
from streams.delivery import Delivery, InlineDeliveryConsumer, deliver_inline
from streams.keys import FileKeyStore
from streams.ledger import ErasureLedger
from streams.settings import Settings

FAUST_FETCH_LOOP_SHA256 = "44a2500309e83c630493f6828af50166ec8d96a0b3e4fb2bab735f704ae93417"
"""Of `faust.transport.consumer.Consumer._drain_messages` in faust-streaming 0.15.3, the loop
`InlineDeliveryConsumer` copies."""


class Race:
    """What Faust's `wait_first` does with a delivery: run it as a task beside the flow's
    suspension, and cancel it if the flow is suspended first."""

    def __init__(self) -> None:
        self.suspended = asyncio.Event()
        self.raced = 0

    async def __call__(self, rest: Delivery) -> None:
        self.raced += 1
        delivery = asyncio.ensure_future(rest)
        suspension = asyncio.ensure_future(self.suspended.wait())
        try:
            await asyncio.wait([delivery, suspension], return_when=asyncio.FIRST_COMPLETED)
            if delivery.done():
                delivery.result()
        finally:
            for future in (delivery, suspension):
                future.cancel()


def run(coroutine: Awaitable[Any]) -> Any:
    async def main() -> Any:
        return await coroutine

    return asyncio.run(main())


def test_given_a_delivery_that_does_not_wait_then_it_is_done_inline_without_a_race() -> None:
    delivered: list[str] = []

    async def delivery() -> None:
        delivered.append("message")

    async def scenario() -> int:
        race = Race()
        tasks_before = len(asyncio.all_tasks())
        await deliver_inline(delivery(), race)
        assert len(asyncio.all_tasks()) == tasks_before
        return race.raced

    assert run(scenario()) == 0
    assert delivered == ["message"]


def test_given_a_delivery_that_waits_then_it_finishes_when_what_it_waits_for_is_done() -> None:
    steps: list[object] = []

    async def scenario() -> tuple[list[object], int]:
        room = asyncio.get_running_loop().create_future()

        async def delivery() -> None:
            steps.append("started")
            steps.append(await room)
            await asyncio.sleep(0)
            steps.append("delivered")

        race = Race()
        waiting = asyncio.ensure_future(deliver_inline(delivery(), race))
        await asyncio.sleep(0.01)
        assert steps == ["started"]
        room.set_result("room in the buffer")
        await waiting
        return steps, race.raced

    assert run(scenario()) == (["started", "room in the buffer", "delivered"], 1)


def test_given_a_rebalance_while_a_delivery_waits_then_the_delivery_is_cancelled() -> None:
    outcome: list[str] = []

    async def scenario() -> None:
        never = asyncio.get_running_loop().create_future()

        async def delivery() -> None:
            try:
                await never
                outcome.append("delivered")
            except asyncio.CancelledError:
                outcome.append("cancelled")
                raise

        race = Race()
        waiting = asyncio.ensure_future(deliver_inline(delivery(), race))
        await asyncio.sleep(0.01)
        race.suspended.set()
        await waiting

    run(scenario())
    assert outcome == ["cancelled"]


def test_given_a_delivery_that_fails_after_waiting_then_its_error_reaches_the_fetch_loop() -> None:
    async def scenario() -> None:
        broken = asyncio.get_running_loop().create_future()

        async def delivery() -> None:
            await broken

        waiting = asyncio.ensure_future(deliver_inline(delivery(), Race()))
        await asyncio.sleep(0.01)
        broken.set_exception(LookupError("no channel"))
        await waiting

    with pytest.raises(LookupError, match="no channel"):
        run(scenario())


def test_given_a_delivery_that_fails_at_once_then_its_error_reaches_the_fetch_loop() -> None:
    async def delivery() -> None:
        raise ValueError("undecodable")

    with pytest.raises(ValueError, match="undecodable"):
        run(deliver_inline(delivery(), Race()))


def test_given_a_delivery_that_waits_several_times_then_each_wait_is_honoured() -> None:
    async def scenario() -> list[int]:
        loop = asyncio.get_running_loop()
        waits = [loop.create_future() for _ in range(3)]
        seen: list[int] = []

        async def delivery() -> None:
            for future in waits:
                seen.append(await future)

        waiting = asyncio.ensure_future(deliver_inline(delivery(), Race()))
        for number, future in enumerate(waits):
            await asyncio.sleep(0.01)
            assert seen == list(range(number))
            future.set_result(number)
        await waiting
        return seen

    assert run(scenario()) == [0, 1, 2]


def test_given_the_pinned_faust_then_its_fetch_loop_is_the_one_the_inline_consumer_copies() -> None:
    source = inspect.getsource(Consumer._drain_messages)
    assert hashlib.sha256(source.encode()).hexdigest() == FAUST_FETCH_LOOP_SHA256, (
        "faust's fetch loop changed: review streams/delivery.py against the new loop"
    )
    assert issubclass(InlineDeliveryConsumer, Consumer)


def test_given_the_worker_app_then_its_consumer_delivers_inline(tmp_path: Path) -> None:
    keys = FileKeyStore(tmp_path / "keys")
    pipeline = create_app(Settings(home=tmp_path), "127.0.0.1:9092", keys, ErasureLedger(keys))
    assert pipeline.app.transport.Consumer is InlineDeliveryConsumer
