"""Ten or more different medicines in use at once ask for a medication review: one alert per
episode, whatever the arrival order, quiet while the list changes above the threshold."""

from __future__ import annotations

from datetime import timedelta
from random import Random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from projections.state import initial_state, replay
from rules.base import alert_id
from rules.engine import default_rules
from rules.knowledge.bundled import load_bundled_knowledge
from rules.polypharmacy import RULE, THRESHOLD, PolypharmacyRule
from schemas.alerts import Alert, AlertStatus
from schemas.events import Event
from schemas.fhir.detected_issue import detected_issue
from schemas.severity import Severity
from tests.factories import T0, make_event
from tests.unit.test_rules import run as run_rules

KNOWLEDGE = load_bundled_knowledge()
RULES = default_rules(KNOWLEDGE)
DAY = timedelta(days=1)
DRUGS = (
    "Lisinopril 10 MG Oral Tablet",
    "Metformin 500 MG Oral Tablet",
    "Atorvastatin 20 MG Oral Tablet",
    "Amlodipine 5 MG Oral Tablet",
    "Metoprolol succinate 50 MG Extended Release Oral Tablet",
    "Omeprazole 20 MG Delayed Release Oral Capsule",
    "Levothyroxine 0.05 MG Oral Tablet",
    "Sertraline 50 MG Oral Tablet",
    "Furosemide 40 MG Oral Tablet",
    "Gabapentin 300 MG Oral Capsule",
    "Warfarin 5 MG Oral Tablet",
    "Tamsulosin 0.4 MG Oral Capsule",
)


def rx(name: str, drug: str, day: float, **envelope: Any) -> Event:
    return make_event(
        "MedicationPrescribed",
        name,
        at=day * DAY,
        payload={"prescription_id": name, "drug": drug},
        **envelope,
    )


def stop(prescription: str, day: float) -> Event:
    return make_event(
        "MedicationStopped",
        f"stop-{prescription}",
        at=day * DAY,
        payload={"prescription_id": prescription},
    )


def reviews(events: list[Event]) -> list[Alert]:
    return [alert for alert in run_rules(events, RULES) if alert.rule_id == RULE.id]


def daily(count: int, first_day: int = 1) -> list[Event]:
    """`count` prescriptions of different medicines, one a day from `first_day`."""
    return [rx(f"rx-{n}", DRUGS[n], first_day + n) for n in range(count)]


def episode(day: float) -> str:
    return f"episode:care:{(T0 + day * DAY).isoformat()}"


def test_given_nine_different_medicines_then_no_review_and_the_tenth_raises_one() -> None:
    assert THRESHOLD == 10
    assert reviews(daily(9)) == []
    (alert,) = reviews(daily(10))
    assert (alert.status, alert.severity) == (AlertStatus.RAISED, Severity.INFO)
    assert alert.cause == (episode(10),)
    assert alert.alert_id == alert_id("clinic-a", "patient-1", RULE, [episode(10)])
    assert alert.title == "Polypharmacy: 10 different medicines in use"
    assert sorted(e.claim_id for e in alert.evidence) == sorted(f"rx-{n}" for n in range(10))


def test_given_two_orders_of_one_medicine_then_it_counts_once() -> None:
    events = [*daily(9), rx("rx-lisinopril-again", "lisinopril 20 mg tablet", 20)]
    assert reviews(events) == []
    combination = rx("rx-augmentin", "Amoxicillin 875 MG / Clavulanate 125 MG Oral Tablet", 21)
    (alert,) = reviews([*events, combination])
    assert alert.cause == (episode(21),)


def test_given_saline_in_two_bag_sizes_then_one_medicine_beside_a_drug_it_carries() -> None:
    fluids = [
        rx("rx-saline-1l", "Sodium Chloride 0.9% 1000 mL injectable solution", 20),
        rx("rx-saline-bag", "NaCl 0.9% 500 mL bag", 21),
    ]
    assert reviews([*daily(8), *fluids]) == []
    potassium = rx("rx-kcl", "Potassium Chloride / Sodium Chloride 0.9% injectable solution", 22)
    (alert,) = reviews([*daily(8), *fluids, potassium])
    assert alert.cause == (episode(22),)


def test_given_a_drug_the_knowledge_layer_cannot_resolve_then_it_still_counts_by_name() -> None:
    (alert,) = reviews([*daily(9), rx("rx-unknown", "Zorblaxin 10 mg tablet", 30)])
    assert alert.cause == (episode(30),)


def test_given_two_strengths_of_a_drug_the_knowledge_cannot_resolve_then_one_medicine() -> None:
    unknown = [rx("rx-z10", "Zorblaxin 10 mg", 30), rx("rx-z20", "Zorblaxin 20 mg oral tablet", 31)]
    assert reviews([*daily(8), *unknown]) == []
    (alert,) = reviews([*daily(8), *unknown, rx("rx-other", "Quetrabol 5 mg", 32)])
    assert alert.cause == (episode(32),)


def test_given_changes_above_the_threshold_then_quiet_and_below_it_resolved() -> None:
    events = [*daily(11), stop("rx-0", 20)]
    assert [a.status for a in reviews(events)] == [AlertStatus.RAISED]
    events.append(stop("rx-1", 21))
    raised, resolved = reviews(events)
    assert (resolved.status, resolved.alert_id) == (AlertStatus.RESOLVED, raised.alert_id)
    assert resolved.reason is not None and "MedicationStopped" in resolved.reason


def test_given_a_second_episode_then_a_new_alert() -> None:
    events = [*daily(10), stop("rx-0", 20), rx("rx-again", DRUGS[11], 25)]
    first, resolved, second = reviews(events)
    assert [first.status, resolved.status, second.status] == [
        AlertStatus.RAISED,
        AlertStatus.RESOLVED,
        AlertStatus.RAISED,
    ]
    assert second.cause == (episode(25),)
    assert second.alert_id != first.alert_id


def test_given_a_late_stop_that_moves_the_episode_start_then_the_review_follows_it() -> None:
    late_stop = stop("rx-0", 5.5)
    first, *answer = reviews([*daily(11), late_stop])
    assert first.cause == (episode(10),)
    assert {(a.status, a.cause) for a in answer} == {
        (AlertStatus.RESOLVED, (episode(10),)),
        (AlertStatus.RAISED, (episode(11),)),
    }
    (moved,) = (a for a in answer if a.status is AlertStatus.RAISED)
    in_time_order = sorted([*daily(11), late_stop], key=lambda event: event.occurred_at)
    assert [a.alert_id for a in reviews(in_time_order)] == [moved.alert_id]


def test_given_a_prescription_entered_in_error_then_the_episode_is_dated_without_it() -> None:
    """The first of eleven orders never held: the episode began with the eleventh."""
    void = make_event(
        "MedicationStopped",
        "void-rx-0",
        at=30 * DAY,
        payload={"prescription_id": "rx-0", "entered_in_error": True},
    )
    first, *answer = reviews([*daily(11), void])
    assert first.cause == (episode(10),)
    assert {(a.status, a.cause) for a in answer} == {
        (AlertStatus.RESOLVED, (episode(10),)),
        (AlertStatus.RAISED, (episode(11),)),
    }


def test_given_a_prescription_whose_validity_ends_then_time_resolves_the_review() -> None:
    events = [
        *daily(9),
        rx("rx-course", DRUGS[11], 12, valid_until=T0 + 19 * DAY),
        make_event("PreferenceStated", "later", at=30 * DAY),
    ]
    raised, resolved = reviews(events)
    assert resolved.alert_id == raised.alert_id
    assert resolved.reason is not None and resolved.reason.startswith("time reaching")


def test_given_one_day_of_many_orders_in_any_arrival_order_then_one_alert() -> None:
    orders = [rx(f"rx-{n}", drug, 3) for n, drug in enumerate(DRUGS)]
    expected = reviews(orders)
    assert [a.cause for a in expected] == [(episode(3),)]
    for seed in range(5):
        shuffled = list(orders)
        Random(seed).shuffle(shuffled)
        assert [a.alert_id for a in reviews(shuffled)] == [expected[0].alert_id]


def _open(alerts: list[Alert]) -> set[str]:
    latest = {str(a.alert_id): a.status for a in alerts}
    return {key for key, status in latest.items() if status is not AlertStatus.RESOLVED}


@st.composite
def medicine_histories(draw: st.DrawFn) -> list[Event]:
    """Prescriptions of a few medicines on distinct days, some stopped later."""
    count = draw(st.integers(min_value=1, max_value=8))
    days = draw(st.lists(st.integers(0, 60), min_size=2 * count, max_size=2 * count, unique=True))
    events = []
    for n in range(count):
        start, end = sorted(days[2 * n : 2 * n + 2])
        drug = DRUGS[draw(st.integers(0, 5))]
        events.append(rx(f"rx-{n}", drug, start))
        if draw(st.booleans()):
            events.append(stop(f"rx-{n}", end))
    return events


@settings(max_examples=150)
@given(medicine_histories(), st.randoms(use_true_random=False))
def test_given_any_arrival_order_then_the_same_open_review_as_in_time_order(
    events: list[Event], rng: Random
) -> None:
    rules = [PolypharmacyRule(KNOWLEDGE, threshold=3)]
    in_time_order = sorted(events, key=lambda e: e.occurred_at)
    shuffled = list(events)
    rng.shuffle(shuffled)
    assert _open(run_rules(shuffled, rules)) == _open(run_rules(in_time_order, rules))


@settings(max_examples=150)
@given(medicine_histories())
def test_given_any_history_then_a_review_is_open_exactly_when_enough_medicines_are_in_use(
    events: list[Event],
) -> None:
    rule = PolypharmacyRule(KNOWLEDGE, threshold=3)
    state = replay(events, initial_state("clinic-a", "patient-1"))
    in_use = {
        (KNOWLEDGE.resolve(view.drug).ingredients)
        for view in state.medication_views()
        if view.active
    }
    assert bool(rule.findings(state, None)) == (len(in_use) >= 3)


def test_given_a_review_as_a_detected_issue_then_its_evidence_references_the_orders() -> None:
    (alert,) = reviews(daily(10))
    issue = detected_issue(alert)
    assert issue["severity"] == "low"
    assert "implicated" not in issue
    orders = [
        (detail["type"], detail["identifier"]["system"], detail["identifier"]["value"])
        for entry in issue["evidence"]
        for detail in entry["detail"]
    ]
    system = "urn:uac:tenant:clinic-a:subject:patient-1:medication"
    assert sorted(orders) == sorted(("MedicationRequest", system, f"rx-{n}") for n in range(10))
