"""Faust's consumer, with each fetched message handed to the app's topics inline.

Faust's fetch loop (`faust.transport.consumer.Consumer._drain_messages`) delivers every message
by racing its delivery against the consumer's flow being suspended (a rebalance), stopped or
crashed: `Service.wait_first` makes four tasks per message and cancels three of them. On the
benchmark machine that is about 35 µs of CPU per event, the worker's largest cost outside its
pure step (docs/operator.md, Capacity). Yet a delivery nearly always completes at once (it puts
the message in its agent's buffer), and then there is nothing to race.

`InlineDeliveryConsumer` runs the first step of a delivery inline, in the fetch loop. When it
completes, the message is delivered and no task was made. When it waits (its agent's buffer is
full, the producer's buffer is over its limit), the rest of the delivery is raced exactly as
Faust races it, so a rebalance still cancels a delivery that waits. While the flow is
suspended, a delivery is raced from its start, as Faust does. Everything else is Faust's loop
as it is in the pinned faust-streaming (a test fails when that loop changes, so that this copy
is reviewed against the new one).

A topic whose messages an agent takes in batches can skip the rest of Faust's per-message path
too: the conductor's channel queue, the stream that reads it, an event object per message and
its acknowledgement one by one (on the benchmark machine the worker alone went from 5,537-6,148
events/s to 6,496-8,877 with this; docs/operator.md, Capacity).
`InlineDeliveryApp.batches_of(topic, ...)` makes the fetch loop add that topic's messages to a
`TopicBatches`, from which the agent takes them; its Faust agent still subscribes the topic
(Faust subscribes the topics its agents' streams are made from) and Faust still commits only
offsets that were acknowledged, which a batch's messages are once the agent has handled it.
While the flow is suspended (a rebalance), a message is not added: it is dropped, as Faust drops
a delivery the suspension wins, and fetched again from the committed offset; on a rebalance the
batch still filling is dropped, as Faust clears its channel queues.
"""

from __future__ import annotations

import asyncio
import contextlib
import types
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Generator
from typing import Any, cast

import faust
from faust.transport.consumer import CONSUMER_FETCHING
from faust.transport.drivers import aiokafka as aiokafka_driver

from streams.topic_reader import READ_COMMITTED

Delivery = Coroutine[Any, Any, Any]
YIELD_EVERY = 100
"""Messages delivered between two yields to the event loop (Faust's figure)."""


async def deliver_inline(delivery: Delivery, race: Callable[[Delivery], Awaitable[Any]]) -> None:
    """Run `delivery` up to its first wait; if it has to wait, let `race` run the rest."""
    try:
        waiting_for = delivery.send(None)
    except StopIteration:
        return
    await race(_resumed(delivery, waiting_for))


async def _resumed(delivery: Delivery, waiting_for: Any) -> Any:
    return await _continued(delivery, waiting_for)


@types.coroutine
def _continued(delivery: Delivery, waiting_for: Any) -> Generator[Any, Any, Any]:
    """Drive `delivery` on from the future it first waited for, as its own task would have: the
    enclosing task waits for each future it is handed, and a cancellation is passed in."""
    while True:
        try:
            sent = yield waiting_for
        except GeneratorExit:
            delivery.close()
            raise
        except BaseException as error:  # noqa: BLE001 (cancellation included: passed on as a task does)
            try:
                waiting_for = delivery.throw(error)
            except StopIteration as done:
                return done.value
            continue
        try:
            waiting_for = delivery.send(sent)
        except StopIteration as done:
            return done.value


class InlineDeliveryConsumer(aiokafka_driver.Consumer):
    """Faust's aiokafka consumer whose fetch loop delivers messages inline (module docstring)."""

    def _new_consumer_thread(self) -> ReadCommittedConsumerThread:
        return ReadCommittedConsumerThread(self, loop=self.loop, beacon=self.beacon)

    async def _deliver(self, message: Any) -> None:
        batches = cast("InlineDeliveryApp", self.app).topic_batches.get(message.topic)
        if batches is not None:
            await self._gather(batches, message)
            return
        delivery = self.callback(message)
        if self.suspend_flow.is_set() or not isinstance(delivery, Coroutine):
            await self.wait_first(delivery, self.suspend_flow.wait())
            return
        await deliver_inline(delivery, lambda rest: self.wait_first(rest, self.suspend_flow.wait()))

    async def _gather(self, batches: TopicBatches, message: Any) -> None:
        """Add `message` to the batch filling, waiting while it is full; not while the flow is
        suspended (module docstring)."""
        if self.suspend_flow.is_set():
            return
        if not batches.add(message):
            await self.wait_first(batches.room(), self.suspend_flow.wait())

    async def _drain_messages(self, fetcher: Any) -> None:
        """Faust's loop (faust-streaming 0.15), split in two, with `_deliver` for its
        `wait_first`."""
        consumer_should_stop = self._stopped.is_set
        fetcher_should_stop = fetcher._stopped.is_set
        try:
            while not (consumer_should_stop() or fetcher_should_stop()):
                self.diag.set_flag(CONSUMER_FETCHING)
                messages = self.getmany(timeout=1.0)
                await self.sleep(0)
                if not self.should_stop:
                    await self._drain_fetched(messages)
                    self.diag.unset_flag(CONSUMER_FETCHING)
        except self.consumer_stopped_errors:
            if self.transport.app.should_stop:
                self.log.info("Broker stopped consumer, shutting down...")
                return
            raise
        except asyncio.CancelledError:
            if self.transport.app.should_stop:
                self.log.info("Consumer shutting down for user cancel.")
                return
            raise
        except Exception as exc:
            self.log.exception("Drain messages raised: %r", exc)
            raise
        finally:
            self.diag.unset_flag(CONSUMER_FETCHING)

    async def _drain_fetched(self, messages: Any) -> None:
        get_read_offset = self._read_offset.__getitem__
        set_read_offset = self._read_offset.__setitem__
        commit_every = self._commit_every
        acks_enabled_for = self.app.topics.acks_enabled_for
        num_since_yield = 0
        async for tp, message in messages:
            num_since_yield += 1
            if num_since_yield > YIELD_EVERY:
                await asyncio.sleep(0)
                num_since_yield = 0
            offset = message.offset
            r_offset = get_read_offset(tp)
            if r_offset is None or offset >= r_offset:
                gap = offset - (r_offset or 0)
                if gap > 1 and r_offset and acks_enabled_for(message.topic):
                    await self._add_gap(tp, r_offset + 1, offset)
                if commit_every is not None and self._n_acked >= commit_every:
                    self._n_acked = 0
                    await self.commit()
                await self._deliver(message)
                set_read_offset(tp, offset)
            else:
                self.log.dev(
                    "DROPPED MESSAGE ROFF %r: k=%r v=%r", offset, message.key, message.value
                )


class TopicBatches:
    """One topic's messages in batches of at most `size`, filled by the fetch loop and taken by
    one agent (`batches`). The next batch fills while the agent handles one; it is taken as soon
    as it is full, or `within` seconds after the previous one was taken (the time the agent
    spent on that one counts) with whatever it holds then. `clear` drops the batch filling
    (Faust's flow control calls it on a rebalance, as it clears its channel queues)."""

    def __init__(self, size: int, within: float) -> None:
        self.size = size
        self.within = within
        self._filling: list[Any] = []
        self._full = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()

    def add(self, message: Any) -> bool:
        """Add `message`; whether there is room for another."""
        self._filling.append(message)
        if len(self._filling) < self.size:
            return True
        self._full.set()
        self._room.clear()
        return False

    async def room(self) -> None:
        """Until the batch filling was taken."""
        await self._room.wait()

    def clear(self) -> None:
        self._filling = []
        self._full.clear()
        self._room.set()

    async def batches(self, acknowledge: Callable[[Any], None]) -> AsyncGenerator[list[Any], None]:
        """Each batch, its messages acknowledged once the agent asks for the next one (after it
        handled this one; a batch it did not finish, cancelled as the worker stops, is not)."""
        loop = asyncio.get_running_loop()
        taken_at = loop.time()
        while True:
            remaining = self.within - (loop.time() - taken_at)
            if remaining > 0 and not self._full.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._full.wait(), remaining)
            taken_at = loop.time()
            if not self._filling:
                continue
            batch = self._filling
            self.clear()
            yield batch
            for message in batch:
                acknowledge(message)


class ReadCommittedConsumerThread(aiokafka_driver.AIOKafkaConsumerThread):
    """Faust's consumer thread, whose Kafka consumer reads committed records only: Faust reads
    uncommitted ones unless it runs in its exactly-once mode (which UaC does not use), so the
    records of a producer's aborted transaction would be judged and folded as any other."""

    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        # aiokafka passes the level to its fetcher at start(); Faust names no setting for it.
        consumer._isolation_level = READ_COMMITTED
        return consumer


class InlineDeliveryTransport(aiokafka_driver.Transport):
    Consumer = InlineDeliveryConsumer


class InlineDeliveryApp(faust.App):
    """A Faust app whose consumer is `InlineDeliveryConsumer`, and whose topics named in
    `topic_batches` reach their agent as `TopicBatches` (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.topic_batches: dict[str, TopicBatches] = {}
        super().__init__(*args, **kwargs)

    def batches_of(self, topic: str, size: int, within: float) -> TopicBatches:
        """The batches of `topic`'s messages, for the one agent that subscribes it."""
        batches = self.topic_batches[topic] = TopicBatches(size, within)
        self.flow_control.manage_queue(batches)  # type: ignore[arg-type]  # it needs clear() only
        return batches

    def acknowledge(self, message: Any) -> None:
        """What a Faust stream does once a message is handled: the consumer's acknowledgement
        (its offset may then be committed) and the sensors' `on_message_out`."""
        self.consumer.ack(message)
        self.sensors.on_message_out(message.tp, message.offset, message)

    def _new_transport(self) -> InlineDeliveryTransport:
        return InlineDeliveryTransport(self.conf.broker_consumer, self)
