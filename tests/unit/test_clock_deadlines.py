"""The worker clock's schedule: each subject is ticked once per passed bound, again only when
Kafka refused the tick, and never for a bound its state has already reached."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from projections.clock import clock_event
from projections.state import evolve, replay
from streams.clock import Deadlines
from tests.factories import T0, make_event

DAY = timedelta(days=1)
KEY = "clinic-a:patient-1"


def state_with_window(**window: Any) -> Any:
    return replay([make_event("MedicationPrescribed", "rx", at=DAY, **window)])


def test_given_a_bound_ahead_then_the_subject_is_due_once_wall_clock_time_passes_it() -> None:
    deadlines = Deadlines()
    deadlines.update(KEY, state_with_window(valid_until=T0 + 3 * DAY))
    assert deadlines.due(T0 + 2 * DAY) == []
    assert deadlines.due(T0 + 3 * DAY) == [KEY]
    assert deadlines.due(T0 + 4 * DAY) == [], "taken once"


def test_given_a_tick_on_its_way_then_a_state_short_of_it_does_not_schedule_it_again() -> None:
    deadlines, state = Deadlines(), state_with_window(valid_until=T0 + 3 * DAY)
    deadlines.update(KEY, state)
    (due,) = deadlines.due(T0 + 4 * DAY)
    deadlines.sent(due, T0 + 3 * DAY)
    later_claim = make_event("PreferenceStated", "p", at=2 * DAY)
    deadlines.update(KEY, evolve(state, later_claim))
    assert deadlines.due(T0 + 5 * DAY) == []
    ticked = evolve(state, clock_event(state, T0 + 3 * DAY, T0 + 4 * DAY))
    deadlines.update(KEY, ticked)
    assert deadlines.in_flight == {} and deadlines.due(T0 + 9 * DAY) == []


def test_given_a_tick_kafka_refused_then_it_is_due_again() -> None:
    deadlines = Deadlines()
    deadlines.update(KEY, state_with_window(valid_until=T0 + 3 * DAY))
    (due,) = deadlines.due(T0 + 4 * DAY)
    deadlines.sent(due, T0 + 3 * DAY)
    deadlines.refused(due)
    assert deadlines.due(T0 + 4 * DAY) == [KEY]


def test_given_a_changed_bound_then_only_the_new_one_counts() -> None:
    deadlines = Deadlines()
    deadlines.update(KEY, state_with_window(valid_until=T0 + 3 * DAY))
    deadlines.update(KEY, state_with_window(valid_until=T0 + 6 * DAY))
    assert deadlines.due(T0 + 4 * DAY) == []
    assert deadlines.due(T0 + 6 * DAY) == [KEY]


def test_given_a_rebalance_then_every_bound_is_read_again_and_an_erased_subject_is_dropped() -> (
    None
):
    deadlines = Deadlines()
    deadlines.update(KEY, state_with_window(valid_until=T0 + 3 * DAY))
    deadlines.reread(["clinic-a:other", KEY])
    assert list(deadlines.unknown) == ["clinic-a:other", KEY]
    assert deadlines.due(T0 + 9 * DAY) == []
    deadlines.forget("clinic-a:other")
    assert list(deadlines.unknown) == [KEY]
