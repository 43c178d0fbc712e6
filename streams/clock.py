"""The worker's clock: a `ClockAdvanced` event for each subject whose next validity bound
wall-clock time has passed (`projections.clock`).

`Deadlines` holds each subject's next bound, taken from the state the worker stored last (and,
after a restart or rebalance, from every recovered state), in a heap. A timer takes the subjects
whose bound has passed, on the events partitions this worker owns, and publishes one
`ClockAdvanced` per bound passed on the events topic, sealed and keyed by subject as a producer's
event is. There it is gated, folded and judged in order with the subject's other events, so
the alert records it causes are in the log and a replay gives them again.

A tick is written once per bound: while it is on its way its subject is not ticked again
(`in_flight`), and its id derives from the subject and the moment, so a tick written twice
after a crash is refused by the gate as a duplicate. A tick Kafka refused is tried again on the
next round.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from projections.clock import clock_event, due_bounds, next_bound
from projections.state import UserState
from schemas.codec import AvroCodec
from schemas.events import Event
from streams.keys import SubjectErased
from streams.publisher import wire_bytes
from streams.record_batches import RecordBatches
from streams.sealing import Sealer

log = logging.getLogger(__name__)


@dataclass
class Deadlines:
    """Subjects' next validity bounds, soonest first."""

    heap: list[tuple[datetime, str]] = field(default_factory=list)
    bound_of: dict[str, datetime] = field(default_factory=dict)
    """The live entry per subject (heap entries with another bound are stale)."""
    unknown: dict[str, None] = field(default_factory=dict)
    """Subjects whose bound is to be read from their state (recovered or newly assigned)."""
    in_flight: dict[str, datetime] = field(default_factory=dict)
    """Subjects ticked to a moment their stored state has not reached yet."""

    def update(self, key: str, state: UserState) -> None:
        """Schedule the subject's next bound after `state` (its latest stored state)."""
        self.unknown.pop(key, None)
        sent = self.in_flight.get(key)
        if sent is not None and state.as_of is not None and state.as_of >= sent:
            del self.in_flight[key]
            sent = None
        bound = next_bound(state)
        if bound is None or (sent is not None and bound <= sent):
            self.bound_of.pop(key, None)
            return
        if self.bound_of.get(key) != bound:
            self.bound_of[key] = bound
            heapq.heappush(self.heap, (bound, key))

    def forget(self, key: str) -> None:
        for held in (self.bound_of, self.unknown, self.in_flight):
            held.pop(key, None)

    def reread(self, keys: Iterable[str]) -> None:
        """After a rebalance: every subject's bound is read again from its recovered state."""
        self.heap.clear()
        self.bound_of.clear()
        self.in_flight.clear()
        self.unknown = dict.fromkeys(keys)

    def due(self, now: datetime) -> list[str]:
        """Take the subjects whose bound is not after `now`."""
        keys = []
        while self.heap and self.heap[0][0] <= now:
            bound, key = heapq.heappop(self.heap)
            if self.bound_of.get(key) == bound:
                del self.bound_of[key]
                keys.append(key)
        return keys

    def sent(self, key: str, moment: datetime) -> None:
        self.in_flight[key] = moment

    def refused(self, key: str) -> None:
        """Kafka did not take the subject's tick: it is due again on the next round."""
        moment = self.in_flight.pop(key, None)
        if moment is not None:
            self.bound_of[key] = moment
            heapq.heappush(self.heap, (moment, key))


@dataclass(frozen=True)
class Tick:
    key: str
    event: Event
    wire: bytes


def ticks(
    keys: Iterable[str],
    state_of: Callable[[str], UserState | None],
    now: datetime,
    codec: AvroCodec[Event],
    sealer: Sealer,
) -> list[Tick]:
    """The `ClockAdvanced` events of each subject whose state has bounds `now` passed, one per
    bound in order, ready to send (subjects erased meanwhile, or whose state moved past the
    bounds, get none)."""
    found = []
    for key in keys:
        state = state_of(key)
        if state is None:
            continue
        try:
            found.extend(_subject_ticks(key, state, now, codec, sealer))
        except SubjectErased:
            continue
    return found


def _subject_ticks(
    key: str, state: UserState, now: datetime, codec: AvroCodec[Event], sealer: Sealer
) -> list[Tick]:
    events = (clock_event(state, moment, now) for moment in due_bounds(state, now))
    return [Tick(key, event, wire_bytes(codec, sealer, event)) for event in events]


async def send_ticks(
    found: list[Tick], batches: RecordBatches, topic: str, partition_of: Callable[[str], int]
) -> None:
    for tick in found:
        batches.add(topic, partition_of(tick.key), tick.key.encode(), tick.wire)
    await batches.deliver()
