"""Bitemporal questions: what was true at a valid time, as it was known at a transaction time."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from projections.clock import clock_event
from projections.state import UserState, evolve, initial_state, replay
from projections.views import DEFAULT_POLICY, FoldPolicy
from schemas.events import Event


def state_as_of(
    events: Sequence[Event],
    valid_time: datetime,
    known_at: datetime | None = None,
    policy: FoldPolicy = DEFAULT_POLICY,
) -> UserState:
    """The state of one subject as it stood at `valid_time`, counting only events that had
    occurred by then and, if `known_at` is given, that had been recorded by then.

    The subject's time (`as_of`) is `valid_time` itself, not the time of the last event before
    it: a prescription whose `valid_until` passed in between is no longer active, a claim whose
    `valid_from` came in between is in force. The state is moved there as the worker's clock
    moves a live subject, by a `ClockAdvanced` event, so rules and reads judge it at
    `valid_time` without being told."""
    if not events:
        raise ValueError("state_as_of needs the subject's events")
    first = events[0]
    folded = replay(
        (
            event
            for event in events
            if event.occurred_at <= valid_time
            and (known_at is None or event.recorded_at <= known_at)
        ),
        initial_state(first.tenant_id, first.subject_id),
        policy,
    )
    if folded.erased or folded.as_of is None or folded.as_of >= valid_time:
        return folded
    return evolve(folded, clock_event(folded, valid_time, known_at or valid_time), policy)
