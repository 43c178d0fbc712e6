"""Bitemporal questions: what was true at a valid time, as it was known at a transaction time."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from projections.state import UserState, initial_state, replay
from projections.views import DEFAULT_POLICY, FoldPolicy
from schemas.events import Event


def state_as_of(
    events: Sequence[Event],
    valid_time: datetime,
    known_at: datetime | None = None,
    policy: FoldPolicy = DEFAULT_POLICY,
) -> UserState:
    """The state of one subject as it stood at `valid_time`, counting only events that had
    occurred by then and, if `known_at` is given, that had been recorded by then."""
    if not events:
        raise ValueError("state_as_of needs the subject's events")
    first = events[0]
    return replay(
        (
            event
            for event in events
            if event.occurred_at <= valid_time
            and (known_at is None or event.recorded_at <= known_at)
        ),
        initial_state(first.tenant_id, first.subject_id),
        policy,
    )
