"""The subject's clock: a prescription that expires, or one that comes into force, changes the
alerts when wall-clock time passes the bound, through a logged `ClockAdvanced` event."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from projections.clock import clock_event, due_bounds, next_bound
from projections.document import state_document, state_hash
from projections.gate import Admitted, GateContext, GatePolicy, Rejected, TenantPolicy, admit
from projections.queries import active_medications
from projections.reads import readable_document
from projections.state import evolve, replay
from rules.engine import default_rules, process
from schemas.alerts import AlertStatus
from schemas.reasons import ReasonCode
from tests.factories import T0, make_event
from tests.fakes import TableKnowledge

DAY = timedelta(days=1)
RULES = default_rules(TableKnowledge())
POLICY = GatePolicy(tenants={"clinic-a": TenantPolicy(frozenset({"ehr-adapter"}))})
ALLERGY = make_event("AllergyRecorded", "penicillin")


def prescription(name: str, **window: Any) -> Any:
    return make_event(
        "MedicationPrescribed",
        name,
        at=DAY,
        payload={"prescription_id": name, "drug": "amoxicillin"},
        **window,
    )


def test_given_no_window_ahead_then_no_bound() -> None:
    assert next_bound(replay([ALLERGY, prescription("rx")])) is None
    assert next_bound(replay([prescription("rx", valid_until=T0 + DAY / 2)])) is None


def test_given_windows_then_the_first_bound_after_the_subjects_time_is_next() -> None:
    state = replay(
        [
            ALLERGY,
            prescription("rx-1", valid_until=T0 + 5 * DAY),
            prescription("rx-2", valid_from=T0 + 3 * DAY, valid_until=T0 + 9 * DAY),
        ]
    )
    assert state.as_of == T0 + DAY
    assert next_bound(state) == T0 + 3 * DAY
    assert due_bounds(state, T0 + 2 * DAY) == ()
    assert due_bounds(state, T0 + 3 * DAY) == (T0 + 3 * DAY,)
    assert due_bounds(state, T0 + 6 * DAY) == (T0 + 3 * DAY, T0 + 5 * DAY), "one tick per bound"


def test_given_an_erased_subject_then_its_clock_is_stopped() -> None:
    erased = replay(
        [
            prescription("rx", valid_until=T0 + 5 * DAY),
            make_event("ErasureRequested", "forget", at=2 * DAY),
        ]
    )
    assert next_bound(erased) is None


def _through_the_gate(state: Any, event: Any, now: Any) -> Any:
    return process(state, event, GateContext(now=now, policy=POLICY, encoded_size=100), RULES)


def test_given_an_expired_prescription_when_the_clock_ticks_then_the_alert_is_resolved() -> None:
    state = replay([ALLERGY])
    raised = _through_the_gate(state, prescription("rx", valid_until=T0 + 3 * DAY), T0 + DAY)
    (alert,) = raised.alerts
    now = T0 + 3 * DAY + timedelta(seconds=20)
    (bound,) = due_bounds(raised.after, now)
    tick = clock_event(raised.after, bound, now)
    outcome = _through_the_gate(raised.after, tick, now)
    assert isinstance(outcome.decision, Admitted)
    (resolved,) = outcome.alerts
    assert (resolved.alert_id, resolved.status) == (alert.alert_id, AlertStatus.RESOLVED)
    assert resolved.trigger_event_id == tick.id
    assert (
        resolved.reason
        == f"time reaching {(T0 + 3 * DAY).isoformat()} (ClockAdvanced {tick.id}) removed the cause"
    )
    assert active_medications(outcome.after) == []
    assert next_bound(outcome.after) is None, "once past the bound, the clock has nothing to do"


def test_given_a_prescription_in_force_from_a_later_day_when_the_clock_ticks_then_raised() -> None:
    state = replay([ALLERGY, prescription("rx", valid_from=T0 + 4 * DAY)])
    assert active_medications(state) == []
    now = T0 + 4 * DAY
    (bound,) = due_bounds(state, now)
    outcome = _through_the_gate(state, clock_event(state, bound, now), now)
    (raised,) = outcome.alerts
    assert raised.status is AlertStatus.RAISED
    assert [m.prescription_id for m in active_medications(outcome.after)] == ["rx"]


def test_given_a_clock_late_past_several_bounds_then_each_change_is_dated_at_its_own_bound() -> (
    None
):
    """A worker down for months, or `uac replay --as-of` far ahead: the prescription that
    expired first is resolved at its expiry, not at the latest bound the clock passed, so the
    alert history does not depend on when the clock ran."""
    state = replay([ALLERGY])
    first = _through_the_gate(state, prescription("rx-1", valid_until=T0 + 3 * DAY), T0 + DAY)
    second = _through_the_gate(
        first.after, prescription("rx-2", valid_until=T0 + 9 * DAY), T0 + DAY
    )
    (rx1_alert,) = first.alerts
    (rx2_alert,) = [alert for alert in second.alerts if alert.drug_allergy is not None]
    (duplicate,) = [alert for alert in second.alerts if alert.duplicate_therapy is not None]
    now = T0 + 30 * DAY
    state, resolved = second.after, []
    for bound in due_bounds(state, now):
        outcome = _through_the_gate(state, clock_event(state, bound, now), now)
        state = outcome.after
        resolved.extend(outcome.alerts)
    assert {alert.status for alert in resolved} == {AlertStatus.RESOLVED}
    assert {alert.alert_id: alert.occurred_at for alert in resolved} == {
        rx1_alert.alert_id: T0 + 3 * DAY,
        duplicate.alert_id: T0 + 3 * DAY,
        rx2_alert.alert_id: T0 + 9 * DAY,
    }
    assert due_bounds(state, now) == ()


def test_given_the_same_tick_twice_then_one_event_and_the_copy_is_refused_as_a_duplicate() -> None:
    state = replay([ALLERGY, prescription("rx", valid_until=T0 + 3 * DAY)])
    now = T0 + 4 * DAY
    first = clock_event(state, T0 + 3 * DAY, now)
    again = clock_event(state, T0 + 3 * DAY, now + timedelta(minutes=1))
    assert first.id == again.id
    after = evolve(state, first)
    decision = admit(first, after, GateContext(now=now, policy=POLICY, encoded_size=100))
    assert isinstance(decision, Rejected)
    assert decision.reasons == (ReasonCode.DUPLICATE_EVENT_ID,)


def test_given_a_tick_then_it_is_history_not_a_claim() -> None:
    state = replay([ALLERGY, prescription("rx", valid_until=T0 + 3 * DAY)])
    now = T0 + 4 * DAY
    ticked = evolve(state, clock_event(state, T0 + 3 * DAY, now))
    before, after = state_document(state), state_document(ticked)
    assert after["allergies"] == before["allergies"]
    assert after["medications"]["expired"] == before["medications"]["active"] != []
    assert after["medications"]["active"] == []
    tenant = POLICY.tenants["clinic-a"]
    assert readable_document(state, tenant=tenant)["medications"]["active"] != []
    assert readable_document(ticked, tenant=tenant)["medications"]["active"] == []
    assert state_hash(replay(list(ticked.events.values()))) == state_hash(ticked)


def test_given_a_window_that_opened_and_closed_between_two_events_then_its_alert_is_not_skipped() -> (
    None
):
    """A three-day prescription between two visits, folded from a file or learned after the
    worker's clock could tick: the next event moves the subject's time past both bounds, and
    the alert is raised and resolved at them, with the records a clock on time would have
    written (same ids), not skipped because the window lay between two events."""
    window = {"valid_from": T0 + 2 * DAY, "valid_until": T0 + 5 * DAY}
    state = _through_the_gate(replay([ALLERGY]), prescription("rx", **window), T0 + DAY).after
    later = make_event("PreferenceStated", "diet", at=9 * DAY, payload={"value": "vegan"})
    skipped_over = _through_the_gate(state, later, T0 + 9 * DAY)
    assert [(a.status, a.occurred_at) for a in skipped_over.alerts] == [
        (AlertStatus.RAISED, T0 + 2 * DAY),
        (AlertStatus.RESOLVED, T0 + 5 * DAY),
    ]
    on_time = []
    for bound in (T0 + 2 * DAY, T0 + 5 * DAY):
        outcome = _through_the_gate(state, clock_event(state, bound, bound), bound)
        state = outcome.after
        on_time.extend(outcome.alerts)
    assert [a.lifecycle_id for a in skipped_over.alerts] == [a.lifecycle_id for a in on_time]
    assert _through_the_gate(state, later, T0 + 9 * DAY).alerts == ()
    assert state_hash(skipped_over.after) == state_hash(
        replay([ALLERGY, prescription("rx", **window), later])
    )
