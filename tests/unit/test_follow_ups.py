"""A stop or status change dated before the prescription or allergy it follows is admitted in
every order of arrival, leaves the claim as recorded, and raises one warning alert
(`follow-up-before-its-claim`) with one id whatever the order; a correction with a date at or
after the claim resolves it and applies the follow-up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import permutations
from typing import Any

import pytest

from projections.document import state_hash
from projections.gate import Admitted, GateContext, GatePolicy, TenantPolicy
from projections.queries import active_allergies, active_medications
from projections.state import UserState, initial_state
from rules.engine import default_rules, process
from rules.follow_ups import RULE
from rules.rejudge import latest_records
from schemas.alerts import Alert, AlertStatus
from schemas.events import Event
from tests.factories import T0, make_event
from tests.fakes import TableKnowledge

RULES = default_rules(TableKnowledge())
CONTEXT = GateContext(
    now=datetime(2030, 1, 1, tzinfo=UTC),
    policy=GatePolicy(tenants={"clinic-a": TenantPolicy(frozenset({"ehr-adapter"}))}),
    encoded_size=200,
)
CLAIMED_AT = T0 + timedelta(days=10)
STOP = ("MedicationStopped", {"prescription_id": "rx-1"})
REFUTATION = ("AllergyStatusChanged", {"allergy_id": "allergy-1", "verification_status": "refuted"})


def claims() -> list[Event]:
    """A penicillin allergy and an amoxicillin order (rx-1), both dated `CLAIMED_AT`."""
    return [
        make_event("AllergyRecorded", "allergy", at=CLAIMED_AT),
        make_event(
            "MedicationPrescribed",
            "order",
            at=CLAIMED_AT,
            payload={"prescription_id": "rx-1", "drug": "amoxicillin"},
        ),
    ]


def follow_up(kind: tuple[str, dict[str, Any]], name: str, at: timedelta, **envelope: Any) -> Event:
    event_type, payload = kind
    recorded = envelope.pop("recorded", CLAIMED_AT + timedelta(days=2))
    return make_event(
        event_type, name, at=CLAIMED_AT + at, recorded=recorded, payload=payload, **envelope
    )


def arrive(events: list[Event]) -> tuple[UserState, list[Alert]]:
    """Gate, fold and rules over `events` in this order; every event must be admitted."""
    state, alerts = initial_state("clinic-a", "patient-1"), list[Alert]()
    for event in events:
        outcome = process(state, event, CONTEXT, RULES)
        assert isinstance(outcome.decision, Admitted), outcome.decision
        state, alerts = outcome.after, [*alerts, *outcome.alerts]
    return state, alerts


def open_follow_up_alerts(alerts: list[Alert]) -> list[Alert]:
    return [
        record
        for record in latest_records(alerts).values()
        if record.rule_id == RULE.id and record.status is AlertStatus.RAISED
    ]


def claim_held(state: UserState, kind: tuple[str, dict[str, Any]]) -> bool:
    """Whether the claim the follow-up names still holds (the order active, the allergy too)."""
    held = active_medications(state) if kind is STOP else active_allergies(state)
    return len(held) == 1


@pytest.mark.parametrize(
    ("kind", "offset", "recorded", "held", "flagged"),
    [
        pytest.param(
            STOP, timedelta(hours=-9), None, True, True, id="a stop dated before its order"
        ),
        pytest.param(
            REFUTATION,
            timedelta(days=-1),
            None,
            True,
            True,
            id="a refutation dated before its allergy",
        ),
        pytest.param(
            STOP,
            timedelta(0),
            CLAIMED_AT - timedelta(days=1),
            False,
            False,
            id="a stop dated at its order's instant but learned before it",
        ),
        pytest.param(
            REFUTATION,
            timedelta(0),
            CLAIMED_AT - timedelta(days=1),
            False,
            False,
            id="a refutation at its allergy's instant learned before it",
        ),
        pytest.param(STOP, timedelta(days=1), None, False, False, id="a stop after its order"),
    ],
)
def test_given_a_follow_up_in_every_order_of_arrival_then_one_state_and_one_alert(
    kind: tuple[str, dict[str, Any]],
    offset: timedelta,
    recorded: datetime | None,
    held: bool,
    flagged: bool,
) -> None:
    envelope = {} if recorded is None else {"recorded": recorded}
    late = follow_up(kind, "follow-up", offset, **envelope)
    expected_cause = [_cause(kind, late)] if flagged else []
    outcomes = [arrive(list(order)) for order in permutations([*claims(), late])]
    assert len({state_hash(state) for state, _ in outcomes}) == 1
    for state, alerts in outcomes:
        assert claim_held(state, kind) is held
        assert [alert.cause for alert in open_follow_up_alerts(alerts)] == expected_cause
    ids = {alert.alert_id for _, alerts in outcomes for alert in open_follow_up_alerts(alerts)}
    assert len(ids) == len(expected_cause)


@pytest.mark.parametrize("kind", [STOP, REFUTATION], ids=["stop", "refutation"])
def test_given_an_early_follow_up_then_its_alert_names_both_records_and_a_correction_resolves_it(
    kind: tuple[str, dict[str, Any]],
) -> None:
    early = follow_up(kind, "early", timedelta(hours=-9))
    _, alerts = arrive([*claims(), early])
    (alert,) = open_follow_up_alerts(alerts)
    assert alert.severity.value == "warning"
    assert early.id in alert.detail
    assert "dated before" in alert.title
    assert {item.event_id for item in alert.evidence} == {early.id, _claim_of(kind).id}
    corrected = follow_up(
        kind,
        "corrected",
        timedelta(hours=1),
        supersedes=early.id,
        recorded=CLAIMED_AT + timedelta(3),
    )
    state, more = arrive([*claims(), early, corrected])
    assert not claim_held(state, kind)
    assert open_follow_up_alerts(more) == []
    assert latest_records(more)[alert.alert_id].status is AlertStatus.RESOLVED


@pytest.mark.parametrize("kind", [STOP, REFUTATION], ids=["stop", "refutation"])
def test_given_a_follow_up_corrected_to_before_its_claim_then_the_claim_holds_and_is_flagged(
    kind: tuple[str, dict[str, Any]],
) -> None:
    """A correction dated before the claim hides the follow-up it corrects and cannot apply
    itself: the drug is active again (its allergy alert raised again), and the alert says why."""
    first = follow_up(kind, "follow-up", timedelta(days=1))
    stopped, _ = arrive([*claims(), first])
    assert not claim_held(stopped, kind)
    correction = follow_up(
        kind,
        "corrected",
        timedelta(hours=-9),
        supersedes=first.id,
        recorded=CLAIMED_AT + timedelta(3),
    )
    state, alerts = arrive([*claims(), first, correction])
    assert claim_held(state, kind)
    (alert,) = open_follow_up_alerts(alerts)
    assert correction.id in alert.detail


def test_given_a_follow_up_before_any_record_of_its_claim_then_no_alert_until_one_arrives() -> None:
    stop = follow_up(STOP, "stop", timedelta(hours=-9))
    _, alerts = arrive([stop])
    assert open_follow_up_alerts(alerts) == []
    _, alerts = arrive([stop, *claims()])
    assert len(open_follow_up_alerts(alerts)) == 1


def test_given_a_status_change_between_two_versions_then_it_waits_for_the_earlier_one() -> None:
    """An allergy's status change dated between its two versions, arriving after the later one
    only, is admitted and flagged; once the earlier version arrives it applies to it, the flag
    resolves, and the state is the one of the order the versions were written in."""
    first = make_event("AllergyRecorded", "first", at=T0, payload={"substance": "latex"})
    later = make_event(
        "AllergyRecorded", "later", at=T0 + timedelta(days=10), payload={"substance": "amoxicillin"}
    )
    resolved = make_event(
        "AllergyStatusChanged",
        "resolved",
        at=T0 + timedelta(days=1),
        recorded=T0 + timedelta(days=11),
        payload={"allergy_id": "allergy-1", "clinical_status": "resolved"},
    )
    _, flagged = arrive([later, resolved])
    assert len(open_follow_up_alerts(flagged)) == 1
    state, alerts = arrive([later, resolved, first])
    assert open_follow_up_alerts(alerts) == []
    assert state_hash(state) == state_hash(arrive([first, resolved, later])[0])


def _cause(kind: tuple[str, dict[str, Any]], follow_up: Event) -> tuple[str, ...]:
    if kind is STOP:
        return ("medication:rx-1", f"medication_stop:{follow_up.id}")
    return ("allergy:allergy-1", f"allergy_status:{follow_up.id}")


def _claim_of(kind: tuple[str, dict[str, Any]]) -> Event:
    allergy, order = claims()
    return order if kind is STOP else allergy


@pytest.mark.parametrize(
    ("kind", "opening", "payload"),
    [
        pytest.param(
            STOP,
            "MedicationPrescribed",
            {"prescription_id": "rx-1", "drug": "amoxicillin"},
            id="an order restarted under its id",
        ),
        pytest.param(REFUTATION, "AllergyRecorded", {}, id="an allergy recorded again"),
    ],
)
def test_given_a_follow_up_of_the_first_of_two_versions_then_applied_to_it_and_not_flagged(
    kind: tuple[str, dict[str, Any]], opening: str, payload: dict[str, Any]
) -> None:
    """A stop dated between an order and its restart under the same id ends the first course,
    in any order of arrival; the newer version holds after it."""
    first = make_event(opening, "first", at=timedelta(days=1), payload=payload)
    again = make_event(opening, "again", at=timedelta(days=20), payload=payload)
    late = follow_up(kind, "late", timedelta(days=10) - (CLAIMED_AT - T0))
    outcomes = [arrive(list(order)) for order in permutations([first, again, late])]
    assert len({state_hash(state) for state, _ in outcomes}) == 1
    for state, alerts in outcomes:
        assert claim_held(state, kind)
        assert open_follow_up_alerts(alerts) == []


def test_given_an_early_stop_retracted_then_its_alert_resolves() -> None:
    early = follow_up(STOP, "early", timedelta(hours=-9))
    retraction = make_event(
        "ClaimRetracted", "retraction", at=CLAIMED_AT, payload={"claim_id": early.id}
    )
    state, alerts = arrive([*claims(), early, retraction])
    assert claim_held(state, STOP)
    assert [a.status for a in alerts if a.rule_id == RULE.id] == [
        AlertStatus.RAISED,
        AlertStatus.RESOLVED,
    ]
