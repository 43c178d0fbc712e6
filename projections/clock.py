"""The subject's clock: which claims a move of the subject's time brings into or out of force,
and when a subject must be judged again although no producer wrote.

Rules and reads judge a subject at its own time (`as_of`, the latest valid time folded), never
at a wall clock, so a replay judges every state exactly as it was judged live. A validity window
that opens or closes after `as_of` (a prescription's `valid_until`, a claim's `valid_from`) is
therefore seen only once an event moves the subject's time past it. When wall-clock time has
passed such a bound, the worker's clock writes that event: a `ClockAdvanced` on the events
topic, gated and folded like any other, so the alert records it causes (`resolved` for a
prescription that expired, `raised` for one that came into force) are in the log and a replay
gives them again.
"""

from __future__ import annotations

from bisect import bisect_left
from datetime import datetime
from operator import itemgetter
from uuid import NAMESPACE_URL, uuid5

from projections.state import Kind, UserState, first_bound_after
from schemas.events import CLOCK_ACTOR, ClockAdvanced, Event, EventType, Origin

CLOCK_NAMESPACE = uuid5(NAMESPACE_URL, "https://uac.example/clock")
_MOMENT = itemgetter(0)


def validity_changes(before: UserState, after: UserState) -> frozenset[tuple[Kind, str]]:
    """The claims whose validity window opened or closed while the subject's time (`as_of`)
    moved from `before`'s to `after`'s: a bound in (before.as_of, after.as_of]. An event that
    touches none of them can still start or end their use by rules and reads. The bounds are
    those known before the move (`after` holds only those still ahead of it); the event's own
    claim is the one it touches."""
    bounds, start, end = before.bounds, before.as_of, after.as_of
    if not bounds or start is None or end is None or end <= start:
        return frozenset()
    return frozenset(
        (kind, key)
        for _, kind, key in bounds[
            first_bound_after(bounds, start) : first_bound_after(bounds, end)
        ]
    )


def next_bound(state: UserState) -> datetime | None:
    """The first moment after the subject's time at which a claim's validity window opens or
    closes (None when none is still to come)."""
    if state.as_of is None or state.erased:
        return None
    following = first_bound_after(state.bounds, state.as_of)
    return state.bounds[following][0] if following < len(state.bounds) else None


def due_bounds(state: UserState, now: datetime) -> tuple[datetime, ...]:
    """Every validity bound after the subject's time and not after `now`, each once, soonest
    first: the moments the clock moves the subject to, one `ClockAdvanced` each, so a claim that
    left or came into force is judged at its own bound (an alert is resolved when its
    prescription expired, however late the clock ran and however many bounds it passed)."""
    if state.as_of is None or state.erased:
        return ()
    passed = state.bounds[
        first_bound_after(state.bounds, state.as_of) : first_bound_after(state.bounds, now)
    ]
    return tuple(dict.fromkeys(moment for moment, _, _ in passed))


def bounds_passed_on_the_way(before: UserState, after: UserState) -> tuple[datetime, ...]:
    """Every validity bound the subject's time passed strictly between `before`'s and `after`'s,
    each once, soonest first: an event dated after a window that opened and closed since the
    subject's last event (a three-day prescription between two visits) moves the time past
    both of its bounds, and each is judged at its own moment, as the worker's clock would have
    judged it had it run then, so the window's alert is raised and resolved, not skipped. The
    bounds are those known before the event (its own are judged with it)."""
    bounds, start, end = before.bounds, before.as_of, after.as_of
    if not bounds or start is None or end is None or end <= start or after.erased:
        return ()
    passed = bounds[first_bound_after(bounds, start) : bisect_left(bounds, end, key=_MOMENT)]
    return tuple(dict.fromkeys(moment for moment, _, _ in passed))


def clock_event(state: UserState, moment: datetime, recorded_at: datetime) -> Event:
    """The `ClockAdvanced` that moves the subject of `state` to `moment`. Its id derives from
    the subject and the moment, so a clock that writes it twice writes one event (the gate
    refuses the copy)."""
    identity = f"{state.tenant_id}/{state.subject_id}/{moment.isoformat()}"
    return Event(
        event_id=str(uuid5(CLOCK_NAMESPACE, identity)),
        tenant_id=state.tenant_id,
        subject_id=state.subject_id,
        actor=CLOCK_ACTOR,
        type=EventType.CLOCK_ADVANCED,
        occurred_at=moment,
        recorded_at=recorded_at,
        origin=Origin.INFERRED,
        confidence=1.0,
        payload=ClockAdvanced(),
    )
