"""Rules fire on transitions, in both directions, with ids that are facts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from itertools import permutations
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.state import Kind, initial_state, replay
from projections.views import step_allergy
from rules.base import Rule, alert_id
from rules.drug_allergy import RULE as DRUG_ALLERGY
from rules.drug_allergy import DrugAllergyRule, severity_for
from rules.duplicate_therapy import DuplicateTherapyRule
from rules.engine import default_rules, evaluate
from rules.knowledge.bundled import load_bundled_knowledge
from rules.knowledge.model import MatchLevel
from rules.knowledge.report import check_drug
from schemas.alerts import Alert, AlertStatus
from schemas.severity import Severity
from tests.factories import T0, make_event
from tests.fakes import TableKnowledge

RULES = default_rules(TableKnowledge())
DAY = timedelta(days=1)


def run(events: list[Any], rules: Sequence[Rule] = RULES) -> list[Alert]:
    """Alerts from folding `events` in the given (arrival) order."""
    state = initial_state("clinic-a", "patient-1")
    alerts: list[Alert] = []
    for event in events:
        after = replay([event], state)
        alerts += evaluate(rules, state, after, event)
        state = after
    return alerts


def allergy(
    name: str = "allergy", substance: str = "penicillin", day: float = 0, **payload: Any
) -> Any:
    return make_event(
        "AllergyRecorded", name, at=day * DAY, payload={"substance": substance, **payload}
    )


def rx(name: str, drug: str, day: float = 1, prescription: str | None = None) -> Any:
    return make_event(
        "MedicationPrescribed",
        name,
        at=day * DAY,
        payload={"prescription_id": prescription or name, "drug": drug},
    )


def test_given_an_allergy_when_a_drug_of_its_class_is_prescribed_then_one_critical_alert() -> None:
    (alert,) = run([allergy(), rx("rx-amox", "amoxicillin")])
    assert (alert.status, alert.severity, alert.rule_id) == (
        AlertStatus.RAISED,
        Severity.CRITICAL,
        DRUG_ALLERGY.id,
    )
    assert alert.drug_allergy is not None and alert.drug_allergy.level == "same_class"
    assert alert.alert_id == alert_id(
        "clinic-a", "patient-1", DRUG_ALLERGY, ["allergy:allergy-1", "medication:rx-amox"]
    )


def test_given_a_combination_product_then_the_matching_ingredient_is_named() -> None:
    (alert,) = run([allergy(substance="amoxicillin"), rx("rx-aug", "amoxicillin/clavulanate")])
    assert alert.drug_allergy is not None
    assert alert.drug_allergy.level == "same_ingredient"
    assert alert.drug_allergy.matched == ("amoxicillin",)


def test_given_either_order_then_the_same_alert_id() -> None:
    events = [allergy(), rx("rx-amox", "amoxicillin")]
    ids = {tuple(a.alert_id for a in run(list(order))) for order in permutations(events)}
    assert len(ids) == 1


def test_given_an_allergy_learned_after_the_drug_then_the_alert_is_dated_when_both_held() -> None:
    """The allergy (onset day 0) reaches UaC after the prescription of day 3: the conflict
    began on day 3, not on the allergy's day 0, before the drug was prescribed."""
    prescribed = rx("rx-amox", "amoxicillin", day=3)
    for order in ([allergy(), prescribed], [prescribed, allergy()]):
        (alert,) = run(order)
        assert alert.occurred_at == prescribed.occurred_at


def test_given_a_version_dated_before_the_drug_that_ends_the_conflict_then_it_resolves_no_earlier() -> (
    None
):
    """A newer version of one imported allergy (same source_ref), dated at its first record's
    day 0 and learned after the day-3 drug, says it is no allergy: the resolution is dated when
    the alert was raised, day 3, never before it (a consumer ordering by time would keep it
    open), while its trigger is the version that ended it."""
    first = make_event(
        "AllergyRecorded",
        "allergy",
        source_ref="AllergyIntolerance/a1",
        payload={"substance": "penicillin"},
    )
    prescribed = rx("rx-amox", "amoxicillin", day=3)
    negated = make_event(
        "AllergyRecorded",
        "negated",
        recorded=T0 + 4 * DAY,
        source_ref="AllergyIntolerance/a1",
        payload={"substance": "No known allergy", "negated": True},
    )
    raised, resolved = run([first, prescribed, negated])
    assert (raised.status, resolved.status) == (AlertStatus.RAISED, AlertStatus.RESOLVED)
    assert raised.occurred_at == resolved.occurred_at == prescribed.occurred_at
    assert resolved.trigger_event_id == negated.id


def test_given_an_unresolvable_drug_then_an_unverified_warning_not_silence() -> None:
    (alert,) = run([allergy(), rx("rx-x", "zyxorin forte")])
    assert alert.severity is Severity.WARNING
    assert (
        alert.drug_allergy is not None and alert.drug_allergy.level == MatchLevel.UNVERIFIED.value
    )


def test_given_an_unrelated_drug_then_no_alert() -> None:
    assert run([allergy(), rx("rx-met", "metformin")]) == []


def test_given_a_raised_alert_when_the_drug_is_stopped_then_it_is_resolved_with_the_same_id() -> (
    None
):
    stop = make_event(
        "MedicationStopped", "stop", at=2 * DAY, payload={"prescription_id": "rx-amox"}
    )
    raised, resolved = run([allergy(), rx("rx-amox", "amoxicillin"), stop])
    assert (raised.status, resolved.status) == (AlertStatus.RAISED, AlertStatus.RESOLVED)
    assert raised.alert_id == resolved.alert_id
    assert resolved.trigger_event_id == stop.id


def test_given_a_raised_alert_when_the_allergy_is_refuted_then_it_is_resolved() -> None:
    refute = make_event(
        "AllergyStatusChanged",
        "refute",
        at=2 * DAY,
        payload={"allergy_id": "allergy-1", "verification_status": "refuted"},
    )
    alerts = run([allergy(), rx("rx-amox", "amoxicillin"), refute])
    assert [a.status for a in alerts] == [AlertStatus.RAISED, AlertStatus.RESOLVED]


def _override(alert_id: object, day: float, name: str = "override") -> Any:
    payload = {"alert_id": str(alert_id), "action": "overridden", "reason": "desensitised"}
    return make_event("AlertAcknowledged", name, at=day * DAY, payload=payload)


def _final_status(alerts: list[Alert]) -> dict[object, AlertStatus]:
    return {alert.alert_id: alert.status for alert in alerts}


@pytest.mark.parametrize("override_first", [True, False], ids=["override first", "order first"])
def test_given_an_override_arriving_before_or_after_its_alert_then_the_alert_ends_overridden(
    override_first: bool,
) -> None:
    """A clinician's override at order sign can reach the log before the order: the alert's
    lifecycle must end the same way whichever arrives first."""
    (raised,) = run([allergy(), rx("rx-amox", "amoxicillin")])
    override = _override(raised.alert_id, day=1)
    order = rx("rx-amox", "amoxicillin", day=1.01)
    events = [allergy(), override, order] if override_first else [allergy(), order, override]
    alerts = run(events)
    assert [a.status for a in alerts] == [AlertStatus.RAISED, AlertStatus.OVERRIDDEN]
    assert alerts[1].reason == "desensitised"


def test_given_an_override_then_a_new_episode_of_the_alert_then_it_stays_overridden() -> None:
    (raised,) = run([allergy(), rx("rx-amox", "amoxicillin")])
    stop = make_event(
        "MedicationStopped", "stop", at=3 * DAY, payload={"prescription_id": "rx-amox"}
    )
    events = [
        allergy(),
        rx("rx-amox", "amoxicillin"),
        _override(raised.alert_id, day=2),
        stop,
        rx("rx-amox-again", "amoxicillin", day=4, prescription="rx-amox"),
    ]
    alerts = run(events)
    assert [a.status for a in alerts] == [
        AlertStatus.RAISED,
        AlertStatus.OVERRIDDEN,
        AlertStatus.RESOLVED,
        AlertStatus.RAISED,
        AlertStatus.OVERRIDDEN,
    ]
    assert len({a.lifecycle_id for a in alerts}) == len(alerts)


def test_given_a_retracted_override_then_the_alert_is_raised_again() -> None:
    (raised,) = run([allergy(), rx("rx-amox", "amoxicillin")])
    override = _override(raised.alert_id, day=2)
    retraction = make_event(
        "ClaimRetracted", "retract-override", at=3 * DAY, payload={"claim_id": override.id}
    )
    alerts = run([allergy(), rx("rx-amox", "amoxicillin"), override, retraction])
    assert _final_status(alerts) == {raised.alert_id: AlertStatus.RAISED}
    assert "retracted its acknowledgement" in str(alerts[-1].reason)


def _accept(alert_id: object, day: float, name: str = "accept") -> Any:
    payload = {"alert_id": str(alert_id), "action": "accepted", "reason": "seen, order changed"}
    return make_event("AlertAcknowledged", name, at=day * DAY, payload=payload)


def test_given_a_retracted_override_under_an_earlier_acceptance_then_the_acceptance_holds() -> None:
    (raised,) = run([allergy(), rx("rx-amox", "amoxicillin")])
    accept, override = _accept(raised.alert_id, day=2), _override(raised.alert_id, day=3)
    retraction = make_event(
        "ClaimRetracted", "retract-override", at=4 * DAY, payload={"claim_id": override.id}
    )
    alerts = run([allergy(), rx("rx-amox", "amoxicillin"), accept, override, retraction])
    assert _final_status(alerts) == {raised.alert_id: AlertStatus.ACKNOWLEDGED}
    assert alerts[-1].reason == "seen, order changed"
    assert alerts[-1].trigger_event_id == retraction.id


def test_given_a_retracted_acknowledgement_that_no_longer_held_then_nothing_changes() -> None:
    (raised,) = run([allergy(), rx("rx-amox", "amoxicillin")])
    accept, override = _accept(raised.alert_id, day=2), _override(raised.alert_id, day=3)
    retraction = make_event(
        "ClaimRetracted", "retract-accept", at=4 * DAY, payload={"claim_id": accept.id}
    )
    alerts = run([allergy(), rx("rx-amox", "amoxicillin"), accept, override, retraction])
    assert alerts[-1].status is AlertStatus.OVERRIDDEN
    assert alerts[-1].trigger_event_id == override.id


@pytest.mark.parametrize("later_first", [True, False], ids=["later first", "in order"])
def test_given_acknowledgements_in_any_arrival_order_then_the_latest_in_valid_time_holds(
    later_first: bool,
) -> None:
    (raised,) = run([allergy(), rx("rx-amox", "amoxicillin")])
    accept, override = _accept(raised.alert_id, day=2), _override(raised.alert_id, day=3)
    acks = [override, accept] if later_first else [accept, override]
    alerts = run([allergy(), rx("rx-amox", "amoxicillin"), *acks])
    assert _final_status(alerts) == {raised.alert_id: AlertStatus.OVERRIDDEN}
    assert alerts[-1].reason == "desensitised"


@pytest.mark.parametrize("late_acknowledgement", [True, False], ids=["ack late", "in order"])
def test_given_an_acknowledged_alert_regraded_graver_in_any_arrival_order_then_it_is_raised_again(
    late_acknowledgement: bool,
) -> None:
    """Accepting a warning is no decision about a critical: an intolerance accepted, then
    recorded as an allergy, is raised as critical and stays raised, whichever arrives first."""
    intolerance = allergy(allergy_type="intolerance")
    (raised,) = run([intolerance, rx("rx-amox", "amoxicillin")])
    accept = _accept(raised.alert_id, day=2)
    regrade = allergy("allergy-again", day=3, allergy_type="allergy")
    late = [regrade, accept] if late_acknowledgement else [accept, regrade]
    alerts = run([intolerance, rx("rx-amox", "amoxicillin"), *late])
    final = alerts[-1]
    assert (final.status, final.severity) == (AlertStatus.RAISED, Severity.CRITICAL)
    assert [a.severity for a in alerts if a.status is AlertStatus.RAISED] == [
        Severity.WARNING,
        Severity.CRITICAL,
    ]
    assert len({a.lifecycle_id for a in alerts}) == len(alerts)


def test_given_a_graver_regrade_then_the_raised_record_names_the_acknowledgement_it_outgrew() -> (
    None
):
    intolerance = allergy(allergy_type="intolerance")
    (raised,) = run([intolerance, rx("rx-amox", "amoxicillin")])
    accept = _accept(raised.alert_id, day=2)
    regrade = allergy("allergy-again", day=3, allergy_type="allergy")
    final = run([intolerance, rx("rx-amox", "amoxicillin"), accept, regrade])[-1]
    assert final.status is AlertStatus.RAISED
    assert f"graver than the warning that AlertAcknowledged {accept.id}" in str(final.reason)


@pytest.mark.parametrize("late_acknowledgement", [True, False], ids=["ack late", "in order"])
def test_given_an_acknowledged_alert_regraded_milder_in_any_arrival_order_then_it_ends_acknowledged(
    late_acknowledgement: bool,
) -> None:
    """An acceptance of a critical covers the warning it becomes (an allergy corrected to an
    intolerance): the re-grade is raised with its new severity and the acceptance follows it."""
    (raised,) = run([allergy(), rx("rx-amox", "amoxicillin")])
    accept = _accept(raised.alert_id, day=2)
    regrade = allergy("allergy-again", day=3, allergy_type="intolerance")
    late = [regrade, accept] if late_acknowledgement else [accept, regrade]
    alerts = run([allergy(), rx("rx-amox", "amoxicillin"), *late])
    final = alerts[-1]
    assert (final.status, final.severity, final.reason) == (
        AlertStatus.ACKNOWLEDGED,
        Severity.WARNING,
        "seen, order changed",
    )


def test_given_an_acknowledgement_recorded_after_the_graver_regrade_then_it_covers_it() -> None:
    """One recorded when the alert was already critical answered the critical, even when it
    reaches UaC before the re-grade does."""
    intolerance = allergy(allergy_type="intolerance")
    (raised,) = run([intolerance, rx("rx-amox", "amoxicillin")])
    regrade = allergy("allergy-again", day=3, allergy_type="allergy")
    accept = _accept(raised.alert_id, day=4)
    for order in ([regrade, accept], [accept, regrade]):
        final = run([intolerance, rx("rx-amox", "amoxicillin"), *order])[-1]
        assert (final.status, final.severity) == (AlertStatus.ACKNOWLEDGED, Severity.CRITICAL)


def test_given_a_regrade_graver_and_back_then_the_acknowledgement_holds_again() -> None:
    intolerance = allergy(allergy_type="intolerance")
    (raised,) = run([intolerance, rx("rx-amox", "amoxicillin")])
    accept = _accept(raised.alert_id, day=2)
    graver = allergy("allergy-again", day=3, allergy_type="allergy")
    back = allergy("intolerance-again", day=4, allergy_type="intolerance")
    alerts = run([intolerance, rx("rx-amox", "amoxicillin"), accept, graver, back])
    assert [(a.status, a.severity) for a in alerts[2:]] == [
        (AlertStatus.RAISED, Severity.CRITICAL),
        (AlertStatus.RAISED, Severity.WARNING),
        (AlertStatus.ACKNOWLEDGED, Severity.WARNING),
    ]


@pytest.mark.parametrize("late_acknowledgement", [True, False], ids=["ack late", "in order"])
def test_given_an_acceptance_that_names_the_grade_it_answered_then_that_grade_is_covered(
    late_acknowledgement: bool,
) -> None:
    """An acknowledgement may say which grade it answered (`severity`): one that accepted the
    intolerance knowing it might be an allergy covers the critical it becomes; one that names
    the warning does not cover the critical, even if recorded after the re-grade."""
    intolerance = allergy(allergy_type="intolerance")
    (raised,) = run([intolerance, rx("rx-amox", "amoxicillin")])
    regrade = allergy("allergy-again", day=3, allergy_type="allergy")
    for stated, day, final in (
        ("critical", 2, AlertStatus.ACKNOWLEDGED),
        ("warning", 4, AlertStatus.RAISED),
    ):
        payload = {"alert_id": str(raised.alert_id), "action": "accepted", "severity": stated}
        accept = make_event("AlertAcknowledged", "accept", at=day * DAY, payload=payload)
        late = [regrade, accept] if late_acknowledgement else [accept, regrade]
        alerts = run([intolerance, rx("rx-amox", "amoxicillin"), *late])
        assert (alerts[-1].status, alerts[-1].severity) == (final, Severity.CRITICAL), stated


@pytest.mark.parametrize("late", [True, False], ids=["learned late", "in order"])
def test_given_a_grade_learned_late_for_the_time_of_an_acceptance_then_the_alert_follows_it(
    late: bool,
) -> None:
    """The allergy was known as an allergy (critical) when the acceptance was recorded, but
    that version reaches UaC after a later one: the acceptance answered the critical, so the
    alert ends acknowledged, as when everything arrives in order."""
    intolerance = allergy(allergy_type="intolerance")
    (raised,) = run([intolerance, rx("rx-amox", "amoxicillin")])
    known_then = allergy("allergy-then", day=2, allergy_type="allergy")
    accept = _accept(raised.alert_id, day=3)
    known_later = allergy("allergy-later", day=5, allergy_type="allergy")
    rest = [accept, known_later, known_then] if late else [known_then, accept, known_later]
    alerts = run([intolerance, rx("rx-amox", "amoxicillin"), *rest])
    assert (alerts[-1].status, alerts[-1].severity) == (AlertStatus.ACKNOWLEDGED, Severity.CRITICAL)
    if late:
        assert [a.status for a in alerts[-2:]] == [AlertStatus.RAISED, AlertStatus.ACKNOWLEDGED]
        assert alerts[-1].trigger_event_id == known_then.id


@pytest.mark.parametrize("override_first", [True, False], ids=["override first", "order first"])
def test_given_an_override_at_order_sign_then_a_graver_regrade_raises_the_alert_again(
    override_first: bool,
) -> None:
    """An override that reaches UaC before its order answered the grade the alert was first
    found with."""
    intolerance = allergy(allergy_type="intolerance")
    (raised,) = run([intolerance, rx("rx-amox", "amoxicillin")])
    override = _override(raised.alert_id, day=1)
    order = rx("rx-amox", "amoxicillin", day=1.01)
    regrade = allergy("allergy-again", day=3, allergy_type="allergy")
    signed = [override, order] if override_first else [order, override]
    alerts = run([intolerance, *signed, regrade])
    assert [(a.status, a.severity) for a in alerts] == [
        (AlertStatus.RAISED, Severity.WARNING),
        (AlertStatus.OVERRIDDEN, Severity.WARNING),
        (AlertStatus.RAISED, Severity.CRITICAL),
    ]


def test_given_an_unchanged_conflict_when_unrelated_events_arrive_then_no_repeat_alert() -> None:
    pref = make_event("PreferenceStated", "pref", at=3 * DAY)
    trip = make_event("TravelRecorded", "trip", at=4 * DAY)
    assert len(run([allergy(), rx("rx-amox", "amoxicillin"), pref, trip])) == 1


def test_given_an_acknowledgement_then_a_lifecycle_record_with_its_reason() -> None:
    (raised,) = run([allergy(), rx("rx-amox", "amoxicillin")])
    ack = make_event(
        "AlertAcknowledged",
        "ack",
        at=2 * DAY,
        payload={
            "alert_id": str(raised.alert_id),
            "action": "overridden",
            "reason": "desensitised in 2023",
        },
    )
    alerts = run([allergy(), rx("rx-amox", "amoxicillin"), ack])
    assert [(a.status, a.reason) for a in alerts[1:]] == [
        (AlertStatus.OVERRIDDEN, "desensitised in 2023")
    ]
    assert alerts[1].alert_id == raised.alert_id


def test_given_two_active_drugs_of_one_class_then_duplicate_therapy() -> None:
    alerts = run([rx("rx-ibu", "ibuprofen"), rx("rx-nap", "naproxen", day=2)])
    assert [(a.rule_id, a.severity) for a in alerts] == [("duplicate-therapy", Severity.WARNING)]


def _standing(alerts: list[Alert]) -> set[tuple[str, ...]]:
    """The causes of the duplicate-therapy alerts the stream holds raised."""
    latest = {alert.alert_id: alert for alert in alerts if alert.rule_id == "duplicate-therapy"}
    return {alert.cause for alert in latest.values() if alert.status is AlertStatus.RAISED}


def test_given_three_drugs_of_one_class_then_each_later_one_is_flagged_against_the_first() -> None:
    """Each prescription that duplicates one already in use is flagged against the first
    started of them, by what it shares; when that one stops, the others are flagged against
    each other."""
    started = [rx("rx-1", "ibuprofen", day=1), rx("rx-2", "naproxen", day=2)]
    started.append(rx("rx-3", "ibuprofen", day=3))
    alerts = run(started)
    assert _standing(alerts) == {
        ("medication:rx-1", "medication:rx-2"),
        ("medication:rx-1", "medication:rx-3"),
    }
    stop = make_event(
        "MedicationStopped", "stop-1", at=4 * DAY, payload={"prescription_id": "rx-1"}
    )
    assert _standing(run([*started, stop])) == {("medication:rx-2", "medication:rx-3")}


def test_given_many_orders_of_one_drug_then_one_alert_per_extra_order() -> None:
    """Forty renewals of a medicine left active beside its first order are forty duplicates of
    that order, not the 820 pairs among the 41 orders."""
    orders = [rx(f"rx-{n}", "naproxen", day=1 + n / 24) for n in range(41)]
    for arrival in (orders, orders[::-1]):
        assert _standing(run(arrival)) == {
            ("medication:rx-0", f"medication:rx-{n}") for n in range(1, 41)
        }


@settings(max_examples=40)
@given(
    drugs=st.lists(
        st.sampled_from(["ibuprofen", "naproxen", "amoxicillin"]), min_size=1, max_size=8
    ),
    focused=st.sets(st.integers(min_value=0, max_value=9), max_size=4),
)
def test_duplicate_therapy_findings_for_a_focus_are_the_pairs_that_touch_it(
    drugs: list[str], focused: set[int]
) -> None:
    rule = DuplicateTherapyRule(TableKnowledge())
    state = replay([rx(f"rx-{n}", drug, day=n + 1) for n, drug in enumerate(drugs)])
    focus = frozenset((Kind.MEDICATION, f"rx-{n}") for n in focused)
    everything = rule.findings(state, None)
    touching = {
        identifier
        for identifier, finding in everything.items()
        if {f"medication:rx-{n}" for n in focused} & set(finding.cause)
    }
    assert dict(rule.findings(state, focus)) == {i: everything[i] for i in touching}


@settings(max_examples=40)
@given(
    substances=st.lists(
        st.sampled_from(["penicillin", "aspirin", "sulfa"]), min_size=1, max_size=5
    ),
    drugs=st.lists(
        st.sampled_from(["amoxicillin", "ibuprofen", "sulfamethoxazole", "metformin"]),
        max_size=6,
    ),
    focused=st.sets(st.sampled_from(["a-0", "a-1", "a-3", "rx-0", "rx-2", "rx-5"]), max_size=3),
)
def test_drug_allergy_findings_for_a_focus_are_the_pairs_that_touch_it(
    substances: list[str], drugs: list[str], focused: set[str]
) -> None:
    rule = DrugAllergyRule(TableKnowledge())
    state = replay(
        [
            allergy(f"a-{n}", substance, day=n, allergy_id=f"a-{n}")
            for n, substance in enumerate(substances)
        ]
        + [rx(f"rx-{n}", drug, day=n + 10) for n, drug in enumerate(drugs)]
    )
    focus = frozenset(
        (Kind.ALLERGY if key.startswith("a-") else Kind.MEDICATION, key) for key in focused
    )
    everything = rule.findings(state, None)
    causes = {f"allergy:{k}" if k.startswith("a-") else f"medication:{k}" for k in focused}
    touching = {i for i, finding in everything.items() if causes & set(finding.cause)}
    assert dict(rule.findings(state, focus)) == {i: everything[i] for i in touching}


def test_given_a_quick_explicit_reversal_then_a_needs_confirmation_alert() -> None:
    first = make_event("PreferenceStated", "p1", payload={"value": "vegetarian"})
    second = make_event("PreferenceStated", "p2", at=DAY, payload={"value": "omnivore"})
    confirm = make_event("PreferenceStated", "p3", at=2 * DAY, payload={"value": "omnivore"})
    alerts = run([first, second, confirm])
    assert [(a.rule_id, a.status) for a in alerts] == [
        ("claim-needs-confirmation", AlertStatus.RAISED),
        ("claim-needs-confirmation", AlertStatus.RESOLVED),
    ]


def _reversal(**challenger: Any) -> list[Any]:
    held = make_event("PreferenceStated", "held", payload={"key": "seat", "value": "aisle"})
    reversal = make_event(
        "PreferenceStated",
        "reversal",
        at=DAY,
        payload={"key": "seat", "value": "window"},
        **challenger,
    )
    return [held, reversal]


def test_given_a_challenger_whose_window_closes_then_the_confirmation_alert_resolves_by_time() -> (
    None
):
    events = [*_reversal(valid_until=T0 + 3 * DAY), later(2), later(4)]
    alerts = run(events)
    assert [(a.status, a.trigger_event_id) for a in alerts] == [
        (AlertStatus.RAISED, events[1].id),
        (AlertStatus.RESOLVED, events[3].id),
    ]
    assert alerts[1].reason is not None
    assert alerts[1].reason.startswith(f"time reaching {(T0 + 4 * DAY).isoformat()}")


def test_given_a_held_claim_whose_window_closes_then_the_confirmation_alert_resolves() -> None:
    held, reversal = _reversal()
    held = held.model_copy(update={"valid_until": T0 + 3 * DAY})
    alerts = run([held, reversal, later(4)])
    assert [a.status for a in alerts] == [AlertStatus.RAISED, AlertStatus.RESOLVED]


def test_given_a_challenger_valid_only_from_a_later_day_then_the_alert_waits_for_that_day() -> None:
    events = [*_reversal(valid_from=T0 + 3 * DAY), later(2), later(4)]
    alerts = run(events)
    assert [(a.status, a.trigger_event_id) for a in alerts] == [(AlertStatus.RAISED, events[3].id)]


def test_given_a_third_disagreeing_fact_then_the_open_confirmation_alert_names_all_three() -> None:
    """The alert left open lists every value in dispute, in any arrival order: the second
    statement does not drop out of the question when a third arrives."""
    facts = [
        make_event("FactAsserted", name, at=n * DAY, payload={"key": "blood_type", "value": value})
        for n, (name, value) in enumerate([("f1", "A+"), ("f2", "B+"), ("f3", "O+")])
    ]
    for order in permutations(facts):
        latest = {alert.alert_id: alert for alert in run(list(order))}
        (still_open,) = [a for a in latest.values() if a.status is not AlertStatus.RESOLVED]
        assert set(still_open.cause) == {f"fact:{event.id}" for event in facts}


def test_given_a_third_disagreeing_fact_then_the_two_party_alert_says_which_alert_replaces_it() -> (
    None
):
    first, second, third = [
        make_event("FactAsserted", name, at=n * DAY, payload={"key": "blood_type", "value": value})
        for n, (name, value) in enumerate([("f1", "A+"), ("f2", "B+"), ("f3", "O+")])
    ]
    raised, widened, replaced = run([first, second, third])
    assert (widened.status, replaced.status) == (AlertStatus.RAISED, AlertStatus.RESOLVED)
    assert replaced.alert_id == raised.alert_id
    assert replaced.reason == (
        f"FactAsserted {third.id} joined the cause: alert {widened.alert_id} takes its place"
    )


def _view(**payload: Any) -> Any:
    return step_allergy(None, allergy(**payload))


SEVERITY_CASES = [
    pytest.param(MatchLevel.SAME_CLASS, {}, Severity.CRITICAL, id="given same class then critical"),
    pytest.param(
        MatchLevel.PARTIAL, {}, Severity.WARNING, id="given partial cross-reactivity then warning"
    ),
    pytest.param(
        MatchLevel.PARTIAL,
        {"criticality": "high"},
        Severity.CRITICAL,
        id="given partial cross-reactivity and high criticality then critical",
    ),
    pytest.param(
        MatchLevel.PARTIAL,
        {"reactions": [{"manifestation": "anaphylaxis", "severity": "severe"}]},
        Severity.CRITICAL,
        id="given partial cross-reactivity and a severe past reaction then critical",
    ),
    pytest.param(
        MatchLevel.LOW_RISK,
        {"criticality": "high"},
        Severity.INFO,
        id="given a low-risk relation then info even with high criticality",
    ),
    pytest.param(
        MatchLevel.SAME_CLASS,
        {"allergy_type": "intolerance"},
        Severity.WARNING,
        id="given an intolerance then one step lower than an allergy",
    ),
    pytest.param(
        MatchLevel.SAME_CLASS,
        {"allergy_type": "intolerance", "reactions": [{"manifestation": "Anaphylaxis"}]},
        Severity.CRITICAL,
        id="given an intolerance that records anaphylaxis then not lowered",
    ),
    pytest.param(
        MatchLevel.SAME_INGREDIENT,
        {"allergy_type": "intolerance", "reactions": [{"manifestation": "Lip swelling"}]},
        Severity.CRITICAL,
        id="given an intolerance that records angioedema signs then not lowered",
    ),
    pytest.param(
        MatchLevel.SAME_CLASS,
        {"allergy_type": "intolerance", "reactions": [{"manifestation": "Nausea"}]},
        Severity.WARNING,
        id="given an intolerance that records nausea then one step lower",
    ),
    pytest.param(
        MatchLevel.SAME_INGREDIENT,
        {"verification_status": "unconfirmed", "criticality": "low"},
        Severity.WARNING,
        id="given an unconfirmed low-criticality record then one step lower",
    ),
    pytest.param(
        MatchLevel.SAME_INGREDIENT,
        {
            "verification_status": "unconfirmed",
            "criticality": "low",
            "reactions": [{"manifestation": "anaphylaxis", "severity": "severe"}],
        },
        Severity.CRITICAL,
        id="given an unconfirmed low-criticality record with a severe reaction then not lowered",
    ),
    pytest.param(
        MatchLevel.PARTIAL,
        {
            "verification_status": "unconfirmed",
            "criticality": "low",
            "reactions": [{"manifestation": "anaphylaxis", "severity": "severe"}],
        },
        Severity.CRITICAL,
        id="given partial cross-reactivity, unconfirmed low criticality and a severe reaction "
        "then critical",
    ),
    pytest.param(MatchLevel.NONE, {}, None, id="given no relation then no alert"),
]


@pytest.mark.parametrize(("level", "allergy_fields", "expected"), SEVERITY_CASES)
def test_severity(
    level: MatchLevel, allergy_fields: dict[str, Any], expected: Severity | None
) -> None:
    assert severity_for(level, _view(**allergy_fields)) is expected


@pytest.mark.parametrize(
    ("allergy_fields", "expected"),
    [
        ({}, Severity.INFO),
        ({"criticality": "high"}, Severity.WARNING),
        ({"reactions": [{"manifestation": "anaphylaxis", "severity": "severe"}]}, Severity.WARNING),
        ({"criticality": "high", "allergy_type": "intolerance"}, Severity.INFO),
    ],
)
def test_given_a_low_risk_relation_the_source_tests_first_after_a_severe_reaction_then_warning(
    allergy_fields: dict[str, Any], expected: Severity
) -> None:
    assert severity_for(MatchLevel.LOW_RISK, _view(**allergy_fields), True) is expected


@pytest.mark.parametrize(
    ("allergy_fields", "expected"),
    [
        ({}, Severity.INFO),
        ({"reactions": [{"manifestation": "anaphylaxis", "severity": "severe"}]}, Severity.WARNING),
    ],
)
def test_given_cephalosporin_anaphylaxis_then_a_dissimilar_cephalosporin_is_a_warning(
    allergy_fields: dict[str, Any], expected: Severity
) -> None:
    events = [allergy(substance="cephalexin", **allergy_fields), rx("rx-1", "ceftriaxone")]
    (alert,) = run(events, default_rules(load_bundled_knowledge()))
    assert alert.drug_allergy is not None
    assert (alert.drug_allergy.level, alert.severity) == ("low_risk", expected)


def test_given_penicillin_anaphylaxis_then_a_carbapenem_stays_info() -> None:
    """Carbapenems are given after penicillin anaphylaxis without a test first."""
    severe: dict[str, Any] = {"reactions": [{"manifestation": "anaphylaxis", "severity": "severe"}]}
    (alert,) = run(
        [allergy(**severe), rx("rx-1", "meropenem")], default_rules(load_bundled_knowledge())
    )
    assert alert.severity is Severity.INFO


@pytest.mark.parametrize(
    ("level", "allergy_fields", "expected"),
    [
        pytest.param(MatchLevel.LOW_RISK, {}, Severity.WARNING, id="given low risk then warning"),
        pytest.param(
            MatchLevel.LOW_RISK,
            {"allergy_type": "intolerance"},
            Severity.WARNING,
            id="given low risk in a record typed as an intolerance then still a warning",
        ),
        pytest.param(
            MatchLevel.PARTIAL,
            {"verification_status": "unconfirmed", "criticality": "low"},
            Severity.CRITICAL,
            id="given partial in an unconfirmed low-criticality record then critical",
        ),
        pytest.param(MatchLevel.SAME_CLASS, {}, Severity.CRITICAL, id="given same class"),
    ],
)
def test_given_a_severe_cutaneous_reaction_then_it_counts_as_a_severe_immune_reaction(
    level: MatchLevel, allergy_fields: dict[str, Any], expected: Severity
) -> None:
    view = _view(**allergy_fields)
    assert severity_for(level, view, True, severe_cutaneous_reaction=True) is expected


@pytest.mark.parametrize(
    ("drug", "level", "severity"),
    [
        pytest.param("ceftriaxone", "low_risk", Severity.WARNING, id="a dissimilar cephalosporin"),
        pytest.param("meropenem", "low_risk", Severity.WARNING, id="a carbapenem"),
        pytest.param("cefadroxil", "partial", Severity.CRITICAL, id="a shared side chain"),
        pytest.param("amoxicillin", "same_ingredient", Severity.CRITICAL, id="the culprit"),
    ],
)
def test_given_stevens_johnson_syndrome_recorded_as_a_reaction_then_related_drugs_need_evaluation(
    drug: str, level: str, severity: Severity
) -> None:
    """A reaction recorded without a severity, as FHIR imports often are: the syndrome alone
    makes it severe."""
    sjs: dict[str, Any] = {"reactions": [{"manifestation": "Stevens-Johnson syndrome"}]}
    (alert,) = run(
        [allergy(substance="amoxicillin", **sjs), rx("rx-1", drug)],
        default_rules(load_bundled_knowledge()),
    )
    assert alert.drug_allergy is not None
    assert (alert.drug_allergy.level, alert.severity) == (level, severity)
    if level in ("low_risk", "partial"):
        assert "severe cutaneous adverse reaction" in alert.drug_allergy.reason
        assert alert.title.endswith("evaluate first")


UNCONFIRMED_LOW: dict[str, Any] = {"verification_status": "unconfirmed", "criticality": "low"}


@pytest.mark.parametrize(
    ("manifestation", "reaction_severity", "drug", "expected"),
    [
        pytest.param(
            "Anaphylaxis",
            None,
            "amoxicillin",
            Severity.CRITICAL,
            id="given anaphylaxis without a severity then the class match is not lowered",
        ),
        pytest.param(
            "Anaphylaxis",
            "mild",
            "amoxicillin",
            Severity.CRITICAL,
            id="given anaphylaxis graded mild then it is still severe",
        ),
        pytest.param(
            "Anaphylactic shock",
            "moderate",
            "amoxicillin",
            Severity.CRITICAL,
            id="given anaphylactic shock graded moderate then it is still severe",
        ),
        pytest.param(
            "39579001",
            None,
            "amoxicillin",
            Severity.CRITICAL,
            id="given the SNOMED CT code of anaphylaxis as the manifestation then severe",
        ),
        pytest.param(
            "anaphylactoid reaction",
            None,
            "amoxicillin",
            Severity.CRITICAL,
            id="given an anaphylactoid reaction then severe",
        ),
        pytest.param(
            "Anaphylaxis",
            None,
            "cefadroxil",
            Severity.CRITICAL,
            id="given anaphylaxis then a partial match is raised to critical",
        ),
        pytest.param(
            "Anaphylaxis",
            None,
            "ceftriaxone",
            Severity.INFO,
            id="given penicillin anaphylaxis then a dissimilar cephalosporin stays info",
        ),
        pytest.param(
            "Urticaria",
            None,
            "amoxicillin",
            Severity.WARNING,
            id="given hives without a severity then the record is lowered as before",
        ),
        pytest.param(
            "no anaphylaxis",
            None,
            "amoxicillin",
            Severity.WARNING,
            id="given anaphylaxis denied then it is not recorded",
        ),
        pytest.param(
            "Anaphylaxis: No",
            None,
            "amoxicillin",
            Severity.WARNING,
            id="given anaphylaxis answered no then it is not recorded",
        ),
        pytest.param(
            "Hypotension",
            None,
            "cefadroxil",
            Severity.CRITICAL,
            id="given hypotension as the manifestation then a partial match is critical",
        ),
        pytest.param(
            "Bronchospasm",
            "moderate",
            "amoxicillin",
            Severity.CRITICAL,
            id="given bronchospasm graded moderate then it is still severe",
        ),
        pytest.param(
            "Throat tightness",
            None,
            "cefadroxil",
            Severity.CRITICAL,
            id="given the throat tightening then a partial match is critical",
        ),
        pytest.param(
            "Urticaria",
            None,
            "amoxicillin",
            Severity.WARNING,
            id="given hives alone then the unconfirmed low-criticality record is lowered",
        ),
    ],
)
def test_given_an_unconfirmed_low_criticality_allergy_with_anaphylaxis_then_it_is_not_lowered(
    manifestation: str, reaction_severity: str | None, drug: str, expected: Severity
) -> None:
    """Anaphylaxis is a severe reaction by definition, whatever severity the record gives it
    (none, as FHIR imports often do, or a lower one): it outweighs the low criticality."""
    reaction: dict[str, Any] = {"manifestation": manifestation}
    if reaction_severity is not None:
        reaction["severity"] = reaction_severity
    knowledge = load_bundled_knowledge()
    (alert,) = run(
        [
            allergy(substance="amoxicillin", reactions=[reaction], **UNCONFIRMED_LOW),
            rx("rx-1", drug),
        ],
        default_rules(knowledge),
    )
    assert alert.severity is expected
    report = check_drug(knowledge, "amoxicillin", drug, reactions=(manifestation,))
    if drug != "amoxicillin":
        assert report["severity"] == expected.value


@pytest.mark.parametrize(
    ("substance", "drug", "expected", "judged"),
    [
        ("amoxicillin - anaphylaxis", "cefalexin", Severity.CRITICAL, "critical"),
        ("anaphylactic shock to amoxicillin", "cefadroxil", Severity.CRITICAL, "critical"),
        ("amoxicillin (39579001)", "amoxicillin", Severity.CRITICAL, "critical"),
        ("阿莫西林 过敏性休克", "cefalexin", Severity.CRITICAL, "critical"),
        ("amoxicillin - anaphylaxis", "ceftriaxone", Severity.INFO, "info"),
        ("amoxicillin, no anaphylaxis", "cefalexin", Severity.INFO, "warning"),
        ("amoxicillin - rash", "cefalexin", Severity.INFO, "warning"),
        ("lisinopril angioedema", "Entresto", Severity.CRITICAL, "critical"),
        ("ACE inhibitor angio-oedema", "sacubitril/valsartan", Severity.CRITICAL, "critical"),
        ("lisinopril - cough", "Entresto", Severity.INFO, "info"),
        ("lisinopril angioedema", "losartan", Severity.INFO, "info"),
        ("lisinopril, angioedema ruled out", "Entresto", Severity.INFO, "warning"),
        ("penicillin - tongue swelling", "Keflex", Severity.CRITICAL, "critical"),
        ("penicillin - throat closing", "cefadroxil", Severity.CRITICAL, "critical"),
        ("amoxicillin: hives, laryngeal edema", "cefalexin", Severity.CRITICAL, "critical"),
        ("青霉素 - 喉头水肿", "头孢氨苄", Severity.CRITICAL, "critical"),
        ("lisinopril - swelling of the lips", "Entresto", Severity.CRITICAL, "critical"),
        ("amoxicillin - difficulty breathing", "cefalexin", Severity.CRITICAL, "critical"),
        ("amoxicillin - rash, no difficulty breathing", "cefalexin", Severity.INFO, "warning"),
        ("amoxicillin - ankle swelling", "cefalexin", Severity.INFO, "warning"),
    ],
)
def test_given_anaphylaxis_named_in_the_allergy_text_then_it_counts_as_a_severe_reaction(
    substance: str, drug: str, expected: Severity, judged: str
) -> None:
    """A record that says "amoxicillin - anaphylaxis" with no reaction entry, as free-text
    allergy lists do, is as severe as one whose reaction says it: an unconfirmed low-criticality
    record is not lowered (others are, in the alert; check-drug does not know the record's
    verification and criticality) and a partial cross-reactivity is critical, in the alert and
    in check-drug alike; a denied anaphylaxis is not one. Angioedema counts as anaphylaxis does
    (sacubitril/valsartan is contraindicated after ACE-inhibitor angioedema), and so do their
    signs written instead of their names (swelling of the tongue, lips or throat, the throat
    closing, breathing difficulty), not a swelling elsewhere."""
    knowledge = load_bundled_knowledge()
    (alert,) = run(
        [allergy(substance=substance, **UNCONFIRMED_LOW), rx("rx-1", drug)],
        default_rules(knowledge),
    )
    assert alert.severity is expected
    assert check_drug(knowledge, substance, drug)["severity"] == judged


@pytest.mark.parametrize(
    "drug", ["ceftriaxone", "cefadroxil", "meropenem", "amoxicillin", "azithromycin", "aztreonam"]
)
def test_given_a_severe_cutaneous_reaction_in_the_allergy_text_then_the_rule_agrees_with_check_drug(
    drug: str,
) -> None:
    knowledge = load_bundled_knowledge()
    report = check_drug(knowledge, "amoxicillin - SJS", drug)
    alerts = run(
        [allergy(substance="amoxicillin - SJS"), rx("rx-1", drug)], default_rules(knowledge)
    )
    assert [alert.severity.value for alert in alerts] == (
        [] if report["severity"] == "none" else [report["severity"]]
    )


@pytest.mark.parametrize(
    ("allergy_fields", "severity", "kind"),
    [
        pytest.param({}, Severity.WARNING, "intolerance", id="given no type then an intolerance"),
        pytest.param(
            {"reactions": [{"manifestation": "Nausea"}]},
            Severity.WARNING,
            "intolerance",
            id="given nausea among the reactions too then an intolerance",
        ),
        pytest.param(
            {"reactions": [{"manifestation": "Urticaria"}]},
            Severity.CRITICAL,
            "allergy",
            id="given hives among the reactions then an allergy",
        ),
        pytest.param(
            {"allergy_type": "allergy"},
            Severity.CRITICAL,
            "allergy",
            id="given a record typed as an allergy then it stays one",
        ),
    ],
)
def test_given_an_allergy_text_that_names_a_side_effect_then_the_alert_is_one_step_lower(
    allergy_fields: dict[str, Any], severity: Severity, kind: str
) -> None:
    knowledge = load_bundled_knowledge()
    (alert,) = run(
        [allergy(substance="codeine - nausea", **allergy_fields), rx("rx-1", "Tylenol #3")],
        default_rules(knowledge),
    )
    assert alert.severity is severity
    assert alert.title.endswith(f"recorded codeine - nausea {kind}")
    if not allergy_fields:
        assert (
            alert.severity.value
            == check_drug(knowledge, "codeine - nausea", "Tylenol #3")["severity"]
        )


def test_given_a_correction_to_intolerance_then_the_alert_is_raised_again_as_warning() -> None:
    corrected = allergy("correction", day=2, allergy_type="intolerance")
    corrected = corrected.model_copy(update={"supersedes": allergy().id})
    first, regraded = run([allergy(), rx("rx-amox", "amoxicillin"), corrected])
    assert first.alert_id == regraded.alert_id
    assert (first.status, first.severity) == (AlertStatus.RAISED, Severity.CRITICAL)
    assert (regraded.status, regraded.severity) == (AlertStatus.RAISED, Severity.WARNING)
    assert regraded.reason == (
        f"AllergyRecorded {corrected.id} changed the judgement: severity critical -> warning"
    )
    assert regraded.lifecycle_id != first.lifecycle_id


def test_given_a_correction_that_changes_nothing_the_alert_shows_then_no_new_record() -> None:
    corrected = allergy("correction", day=2, note="confirmed by the GP")
    corrected = corrected.model_copy(update={"supersedes": allergy().id})
    (only,) = run([allergy(), rx("rx-amox", "amoxicillin"), corrected])
    assert only.status is AlertStatus.RAISED


def prescription_valid(days: tuple[float | None, float | None], name: str = "rx-window") -> Any:
    start, end = (None if day is None else T0 + day * DAY for day in days)
    window: dict[str, Any] = {
        k: v for k, v in {"valid_from": start, "valid_until": end}.items() if v
    }
    return make_event(
        "MedicationPrescribed",
        name,
        at=DAY,
        payload={"prescription_id": name, "drug": "amoxicillin"},
        **window,
    )


def later(day: float) -> Any:
    """An event about something else, at `day`: it moves the subject's time."""
    return make_event("PreferenceStated", f"later-{day}", at=day * DAY)


def test_given_a_raised_alert_when_time_passes_the_prescriptions_validity_then_resolved() -> None:
    raised, resolved = run([allergy(), prescription_valid((None, 3)), later(5)])
    assert (raised.status, resolved.status) == (AlertStatus.RAISED, AlertStatus.RESOLVED)
    assert resolved.alert_id == raised.alert_id
    assert resolved.reason == (
        f"time reaching {(T0 + 5 * DAY).isoformat()} (PreferenceStated {later(5).id}) "
        "removed the cause"
    )


def test_given_a_prescription_valid_from_a_later_day_then_raised_when_time_reaches_it() -> None:
    events = [allergy(), prescription_valid((4, None)), later(2)]
    assert run(events) == []
    (raised,) = run([*events, later(4)])
    assert raised.status is AlertStatus.RAISED
    assert raised.alert_id == alert_id(
        "clinic-a", "patient-1", DRUG_ALLERGY, ["allergy:allergy-1", "medication:rx-window"]
    )


def test_given_time_moving_inside_the_window_then_no_record() -> None:
    (raised,) = run([allergy(), prescription_valid((None, 9)), later(3), later(8)])
    assert raised.status is AlertStatus.RAISED


def test_given_events_out_of_valid_time_order_then_expiry_is_judged_at_the_latest_time() -> None:
    """An event with an earlier valid time does not move the subject's time back."""
    alerts = run([later(5), allergy(), prescription_valid((None, 3))])
    assert alerts == []


SNOMED = "http://snomed.info/sct"
RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"


@pytest.mark.parametrize(
    ("substance", "drug", "title"),
    [
        pytest.param(
            "Drug allergy - see chart",
            "Home med #3",
            "Home med #3 (amoxicillin 500 MG Oral Capsule) conflicts with the recorded "
            "Drug allergy - see chart (Allergy to penicillin)",
            id="given texts that name nothing then the title names what was judged",
        ),
        pytest.param(
            "Allergy to penicillin (finding)",
            "Amoxil",
            "Amoxil conflicts with the recorded Allergy to penicillin (finding)",
            id="given an allergen named as an allergy then the title does not say it twice",
        ),
        pytest.param(
            "Penicillin",
            "Amoxil",
            "Amoxil conflicts with the recorded Penicillin allergy",
            id="given texts that name the drug and the allergen then the texts alone",
        ),
    ],
)
def test_an_alert_judged_by_code_displays_names_them_in_its_title(
    substance: str, drug: str, title: str
) -> None:
    rules = [DrugAllergyRule(load_bundled_knowledge())]
    recorded = allergy(
        substance=substance,
        codes=[{"system": SNOMED, "code": "999999001", "display": "Allergy to penicillin"}],
    )
    prescribed = make_event(
        "MedicationPrescribed",
        "rx-home",
        at=DAY,
        payload={
            "prescription_id": "rx-home",
            "drug": drug,
            "codes": [
                {
                    "system": RXNORM,
                    "code": "999999002",
                    "display": "amoxicillin 500 MG Oral Capsule",
                }
            ],
        },
    )

    (alert,) = run([recorded, prescribed], rules)

    assert (alert.severity, alert.title) == (Severity.CRITICAL, title)


@pytest.mark.parametrize(
    ("mild_name", "grave_name"), [("version-a", "version-b"), ("version-b", "version-a")]
)
def test_given_two_versions_of_an_allergy_at_one_instant_then_the_graver_is_held_whatever_their_ids(
    mild_name: str, grave_name: str
) -> None:
    """Two versions of one allergy record stated at the same instant (same valid and recording
    times) are ordered by nothing but their event ids: the graver is held, not the one whose id
    happens to sort last, so an anaphylaxis version is never dropped for a mild one."""
    mild = allergy(
        mild_name,
        "sulfa",
        allergy_id="a2",
        reactions=[{"manifestation": "rash", "severity": "mild"}],
        **UNCONFIRMED_LOW,
    )
    grave = allergy(
        grave_name,
        "sulfa",
        allergy_id="a2",
        criticality="high",
        reactions=[{"manifestation": "Anaphylaxis", "severity": "severe"}],
    )
    (held,) = replay([mild, grave]).allergy_views()
    assert held.record.id == grave.id
    alerts = run([mild, grave, rx("rx-1", "Bactrim DS")], default_rules(load_bundled_knowledge()))
    assert [alert.severity for alert in alerts] == [Severity.CRITICAL]


@pytest.mark.parametrize(
    ("grave_reaction", "mild_payload"),
    [
        pytest.param(
            {"manifestation": "Anaphylaxis"},
            {"reactions": [{"manifestation": "Urticaria", "severity": "moderate"}]},
            id="given anaphylaxis without a severity against moderate hives",
        ),
        pytest.param(
            {"manifestation": "hives"},
            {
                "reactions": [{"manifestation": "hives"}],
                "allergy_type": "intolerance",
            },
            id="given an allergy against an intolerance",
        ),
    ],
)
@pytest.mark.parametrize("grave_first", [True, False], ids=["graver id first", "graver id last"])
def test_given_versions_at_one_instant_that_differ_by_their_reaction_or_type_then_the_graver_is_held(
    grave_reaction: dict[str, Any], mild_payload: dict[str, Any], grave_first: bool
) -> None:
    """Anaphylaxis is severe whatever severity it was given, and an allergy is graver than an
    intolerance: swapping the two versions' event ids does not change which one is held."""
    names = ("version-a", "version-b") if grave_first else ("version-b", "version-a")
    grave = allergy(names[0], "sulfa", allergy_id="a2", reactions=[grave_reaction])
    mild = allergy(names[1], "sulfa", allergy_id="a2", **mild_payload)
    (held,) = replay([mild, grave]).allergy_views()
    assert held.record.id == grave.id


@pytest.mark.parametrize("first_id", [True, False], ids=["held id first", "held id last"])
@pytest.mark.parametrize(
    ("held", "other"),
    [
        pytest.param(
            {"criticality": None},
            {"criticality": "low"},
            id="given unsaid criticality against low then the unsaid one (it lowers nothing)",
        ),
        pytest.param(
            {"origin": "verified_source", "clinical_status": "resolved"},
            {"origin": "explicit_statement"},
            id="given a verified resolved version against a stated active one then the verified",
        ),
    ],
)
def test_given_two_versions_at_one_instant_then_the_same_one_is_held_whatever_their_ids(
    held: dict[str, Any], other: dict[str, Any], first_id: bool
) -> None:
    names = ("version-a", "version-b") if first_id else ("version-b", "version-a")

    def version(name: str, fields: dict[str, Any]) -> Any:
        payload = {k: v for k, v in fields.items() if k != "origin"}
        return make_event(
            "AllergyRecorded",
            name,
            origin=fields.get("origin", "explicit_statement"),
            payload={"substance": "penicillin", **payload},
        )

    kept, dropped = version(names[0], held), version(names[1], other)
    (view,) = replay([dropped, kept]).allergy_views()
    assert view.record.id == kept.id


@pytest.mark.parametrize("order", ["guess learned last", "guess learned first"])
def test_a_guessed_version_dated_earlier_never_undoes_a_verified_one(order: str) -> None:
    """A verified allergy (day 8) and an inferred refutation of it dated day 5: whichever was
    learned last, the verified record holds and its alert stays raised."""
    verified = make_event(
        "AllergyRecorded",
        "verified",
        at=8 * DAY,
        recorded=T0 + 10 * DAY,
        origin="verified_source",
        payload={"substance": "penicillin"},
    )
    guess = make_event(
        "AllergyRecorded",
        "guess",
        at=5 * DAY,
        recorded=T0 + (11 if order == "guess learned last" else 9) * DAY,
        origin="inferred",
        payload={"substance": "penicillin", "verification_status": "refuted"},
    )
    (view,) = replay([verified, guess]).allergy_views()
    assert view.record.id == verified.id
    assert view.active
