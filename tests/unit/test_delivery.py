"""Inline delivery of fetched messages (`streams.delivery`): a delivery that does not wait is
done without a race; one that waits is raced as Faust races it, so a rebalance still cancels
it; the copy of Faust's fetch loop is flagged when Faust's own loop changes; and a topic taken
in batches gets them from the fetch loop, full or after the window, the next filling while one
is handled, acknowledged only once handled, dropped on a rebalance or a suspended flow."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, cast

import pytest
from faust.transport.consumer import Consumer
from faust.types import Message

from streams.app import create_app
from streams.delivery import Delivery, InlineDeliveryConsumer, TopicBatches, deliver_inline
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


def message(offset: int, topic: str = "uac.events") -> Message:
    return Message(topic, 0, offset, 0.0, 0, None, b"tenant:subject", b"event", None, None)


def offsets(batch: list[Any]) -> list[int]:
    return [message.offset for message in batch]


def test_given_more_messages_than_a_batch_holds_then_a_full_batch_is_taken_at_once() -> None:
    async def scenario() -> tuple[list[bool], list[int], list[int]]:
        batches, acknowledged = TopicBatches(size=3, within=3600.0), []
        room = [batches.add(message(offset)) for offset in range(3)]
        taking = batches.batches(lambda done: acknowledged.append(done.offset))
        first = await asyncio.wait_for(anext(taking), 5.0)  # long before the hour's window
        await taking.aclose()
        return room, offsets(first), acknowledged

    room, first, acknowledged = run(scenario())
    assert room == [True, True, False]
    assert first == [0, 1, 2]
    assert acknowledged == []


def test_given_fewer_messages_than_a_batch_holds_then_they_are_taken_after_the_window() -> None:
    async def scenario() -> list[int]:
        batches = TopicBatches(size=100, within=0.05)
        for offset in range(4):
            assert batches.add(message(offset))
        taking = batches.batches(lambda _done: None)
        batch = await anext(taking)
        await taking.aclose()
        return offsets(batch)

    assert run(scenario()) == [0, 1, 2, 3]


def test_given_a_batch_being_handled_then_the_next_fills_and_acks_wait_for_the_handling() -> None:
    async def scenario() -> tuple[list[int], list[int], list[int], list[int]]:
        batches, acknowledged = TopicBatches(size=2, within=0.05), []
        batches.add(message(0))
        batches.add(message(1))
        taking = batches.batches(lambda done: acknowledged.append(done.offset))
        first = await anext(taking)
        batches.add(message(2))
        while_handled = list(acknowledged)
        second = await anext(taking)
        await taking.aclose()
        return offsets(first), while_handled, offsets(second), acknowledged

    first, while_handled, second, acknowledged = run(scenario())
    assert (first, second) == ([0, 1], [2])
    assert while_handled == []
    assert acknowledged == [0, 1]


def test_given_a_full_batch_then_the_fetch_loop_waits_until_it_is_taken() -> None:
    async def scenario() -> tuple[bool, bool]:
        batches = TopicBatches(size=1, within=0.05)
        batches.add(message(0))
        waiting = asyncio.ensure_future(batches.room())
        await asyncio.sleep(0.01)
        before = waiting.done()
        taking = batches.batches(lambda _done: None)
        await anext(taking)
        await asyncio.wait_for(waiting, 1.0)
        await taking.aclose()
        return before, waiting.done()

    assert run(scenario()) == (False, True)


def test_given_a_rebalance_then_the_batch_filling_is_dropped_unacknowledged(
    tmp_path: Path,
) -> None:
    keys = FileKeyStore(tmp_path / "keys")
    pipeline = create_app(Settings(home=tmp_path), "127.0.0.1:9092", keys, ErasureLedger(keys))
    batches = pipeline.app.batches_of(pipeline.topics.events, size=10, within=0.05)

    async def scenario() -> tuple[list[int], list[int]]:
        acknowledged: list[int] = []
        batches.add(message(0))
        batches.add(message(1))
        pipeline.app.flow_control.clear()
        batches.add(message(2))
        taking = batches.batches(lambda done: acknowledged.append(done.offset))
        batch = await anext(taking)
        await taking.aclose()
        return offsets(batch), acknowledged

    assert run(scenario()) == ([2], [])


def test_given_the_worker_app_then_its_events_reach_the_batches_unless_the_flow_is_suspended(
    tmp_path: Path,
) -> None:
    keys = FileKeyStore(tmp_path / "keys")

    async def scenario() -> list[int]:
        settings = Settings(home=tmp_path)
        pipeline = create_app(settings, "127.0.0.1:9092", keys, ErasureLedger(keys))
        events = pipeline.topics.events
        batches = pipeline.app.batches_of(events, size=10, within=0.05)
        consumer = cast(InlineDeliveryConsumer, pipeline.app.consumer)
        try:
            await consumer._deliver(message(0, events))
            consumer.suspend_flow.set()
            await consumer._deliver(message(1, events))
            consumer.suspend_flow.clear()
            await consumer._deliver(message(2, events))
        finally:
            consumer._thread.thread_loop.close()  # made for the fetch thread, never started here
        taking = batches.batches(lambda _done: None)
        batch = await anext(taking)
        await taking.aclose()
        return offsets(batch)

    assert run(scenario()) == [0, 2]
