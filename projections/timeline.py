"""Per-key claim timelines: the arrival-order-independent heart of the fold.

Every claim lives in the timeline of its key (an allergy id, a prescription id, a preference
key...). The resolution of a key is a left fold of its effective members in valid-time order,
so the same set of events always resolves the same way whatever order they arrived in.

Cost stays flat as history grows: the timeline keeps the fold result after each of its most
recent members (the "tail"), so an event that arrives in order extends the fold in O(1), and a
late event that lands inside the tail re-folds only the tail. Only an event older than the whole
tail, a correction (`supersedes`) or a retraction re-folds the key from its first member.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable
from datetime import datetime
from operator import itemgetter
from typing import Any, Final, Generic, NamedTuple, TypeVar

from immutables import Map

from schemas.events import Event, EventType

SortKey = tuple[datetime, int, datetime, str]
"""Valid time first, then the causal rank of the event's type, then transaction time, then the
event id: a total order over events."""

R = TypeVar("R")
Step = Callable[[R | None, Event], R | None]
"""`step(resolution_so_far, next_event_in_valid_time_order) -> resolution`; pure."""

TAIL = 32
"""Fold results kept per key; a late event within the last TAIL..2*TAIL members is cheap."""

NO_EVENTS: Map[str, Event] = Map()
NO_IDS: frozenset[str] = frozenset()


Keyed = tuple[SortKey, Event]
"""An event with its sort key, computed once."""


CAUSAL_RANK: Final = {
    EventType.CONSENT_CHANGED: 0,
    EventType.ALLERGY_RECORDED: 1,
    EventType.MEDICATION_PRESCRIBED: 1,
    EventType.TRAVEL_RECORDED: 1,
    EventType.PREFERENCE_STATED: 1,
    EventType.FACT_ASSERTED: 1,
    EventType.ALLERGY_STATUS_CHANGED: 2,
    EventType.MEDICATION_STOPPED: 2,
    EventType.CLAIM_RETRACTED: 2,
    EventType.ALERT_ACKNOWLEDGED: 3,
    EventType.CLOCK_ADVANCED: 4,
    EventType.ERASURE_REQUESTED: 5,
}
"""Among events of the same valid time, what can only follow comes after what it follows,
whenever each was recorded: a consent before the claims it allows, a claim before its stop,
status change or retraction, an acknowledgement after them, an erasure last. Otherwise a stop
dated at the instant of its prescription, but learned first (it arrived first, or its producer
recorded it first), would come first, follow nothing and be lost."""


def sort_key(event: Event) -> SortKey:
    """An event's place in the total order."""
    return (event.occurred_at, CAUSAL_RANK[event.type], event.recorded_at, event.event_id)


_BY_KEY = itemgetter(0)
new_tuple = tuple.__new__
"""Builds a named tuple from its fields without the Python-level `__new__`: the fold builds a
timeline, a folded entry and a view for nearly every event, and this is a third of their cost."""


class Folded(NamedTuple, Generic[R]):
    """One effective member and the resolution of the key after it."""

    key: SortKey
    event: Event
    resolution: R | None


class Timeline(NamedTuple, Generic[R]):
    members: Map[str, Event]
    superseded: frozenset[str]
    retracted: frozenset[str]
    base: R | None
    """Resolution of the effective members before the tail."""
    tail: tuple[Folded[R], ...]

    @property
    def resolution(self) -> R | None:
        return self.tail[-1].resolution if self.tail else self.base

    def effective(self) -> list[Event]:
        """Members that still count (not retracted, not corrected away), in valid-time order."""
        return _counting(self.members, self.retracted | self.superseded)


EMPTY_TIMELINE: Timeline[Any] = Timeline(NO_EVENTS, NO_IDS, NO_IDS, None, ())


def _counting(members: Map[str, Event], hidden: frozenset[str]) -> list[Event]:
    """The members not hidden, in valid-time order."""
    return sorted(
        (event for event in members.values() if event.event_id not in hidden), key=sort_key
    )


def fold(events: Iterable[Event], step: Step[R]) -> R | None:
    resolution: R | None = None
    for event in events:
        resolution = step(resolution, event)
    return resolution


def _folded_from(resolution: R | None, keyed: Iterable[Keyed], step: Step[R]) -> list[Folded[R]]:
    folded = []
    for key, event in keyed:
        resolution = step(resolution, event)
        folded.append(new_tuple(Folded, (key, event, resolution)))
    return folded


def refolded(members: Map[str, Event], retracted: frozenset[str], step: Step[R]) -> Timeline[R]:
    """The timeline rebuilt from all its members: the slow path for rare corrections.

    A retracted correction no longer hides what it corrected."""
    return _built(
        members, [(sort_key(event), event) for event in members.values()], retracted, step
    )


def timeline_of(keyed: list[Keyed], retracted: frozenset[str], step: Step[R]) -> Timeline[R]:
    """The timeline of distinct events, each with its sort key, in any order: how a bulk
    replay builds every key at once (the same timeline as adding them one by one)."""
    if len(keyed) > 1:
        return _built(Map({event.event_id: event for _, event in keyed}), keyed, retracted, step)
    key, event = keyed[0]
    members = NO_EVENTS.set(event.event_id, event)
    if retracted or event.supersedes:
        return _built(members, keyed, retracted, step)
    only = new_tuple(Folded, (key, event, step(None, event)))
    return new_tuple(Timeline, (members, NO_IDS, NO_IDS, None, (only,)))


def _built(
    members: Map[str, Event], keyed: list[Keyed], retracted: frozenset[str], step: Step[R]
) -> Timeline[R]:
    """The timeline of `members` (each also in `keyed` with its sort key): every counting
    member folded in valid-time order, the last TAIL of them kept with their results."""
    corrected = [
        event.supersedes
        for _, event in keyed
        if event.supersedes and event.event_id not in retracted
    ]
    superseded = frozenset(corrected) if corrected else NO_IDS
    hidden = retracted | superseded
    counting = [pair for pair in keyed if pair[1].event_id not in hidden] if hidden else keyed
    effective = sorted(counting, key=_BY_KEY)
    cut = max(0, len(effective) - TAIL)
    base = fold((event for _, event in effective[:cut]), step) if cut else None
    tail = tuple(_folded_from(base, effective[cut:], step))
    return new_tuple(Timeline, (members, superseded, retracted, base, tail))


def _inserted(
    timeline: Timeline[R], members: Map[str, Event], event: Event, step: Step[R]
) -> Timeline[R] | None:
    """Fold `event` into the tail, or None if it is older than the whole tail."""
    key, tail, base = sort_key(event), timeline.tail, timeline.base
    if not tail or key > tail[-1].key:
        resolution = step(tail[-1].resolution if tail else base, event)
        tail = (*tail, Folded(key, event, resolution))
    elif key < tail[0].key:
        return None
    else:
        position = bisect_left([entry.key for entry in tail], key)
        before = tail[position - 1].resolution if position else base
        later = [(entry.key, entry.event) for entry in tail[position:]]
        tail = (*tail[:position], *_folded_from(before, [(key, event), *later], step))
    if len(tail) > 2 * TAIL:
        base, tail = tail[-TAIL - 1].resolution, tail[-TAIL:]
    return Timeline(members, timeline.superseded, timeline.retracted, base, tail)


def with_member(
    timeline: Timeline[R] | None, event: Event, step: Step[R], *, retracted: bool = False
) -> Timeline[R]:
    """The timeline after adding `event` (already retracted if a retraction arrived first)."""
    if timeline is None:
        timeline = EMPTY_TIMELINE
    members = timeline.members.set(event.id, event)
    retracted_ids = timeline.retracted | {event.id} if retracted else timeline.retracted
    if retracted or event.supersedes or event.id in timeline.superseded:
        return refolded(members, retracted_ids, step)
    return _inserted(timeline, members, event, step) or refolded(members, retracted_ids, step)


def with_retraction(timeline: Timeline[R], claim_id: str, step: Step[R]) -> Timeline[R]:
    return refolded(timeline.members, timeline.retracted | {claim_id}, step)
