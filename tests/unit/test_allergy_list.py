"""An allergy list that says "no known allergy" and records an allergy it covers asks for a
correction, in either order, and stands down when either record is corrected."""

from __future__ import annotations

from datetime import timedelta
from itertools import permutations
from typing import Any

import pytest

from rules.allergy_list import RULE as LIST_RULE
from rules.base import alert_id
from rules.drug_allergy import RULE as DRUG_ALLERGY
from rules.engine import default_rules
from rules.knowledge.bundled import load_bundled_knowledge
from schemas.alerts import Alert, AlertStatus
from schemas.events import Event
from schemas.severity import Severity
from tests.factories import T0, event_id, make_event
from tests.unit.test_rules import run as run_rules

RULES = default_rules(load_bundled_knowledge())
DAY = timedelta(days=1)
NKDA = {"substance": "No known drug allergies", "negated": True, "categories": ["medication"]}


def run(events: list[Event]) -> list[Alert]:
    return run_rules(events, RULES)


def listed(events: list[Event]) -> list[tuple[AlertStatus, str]]:
    """(status, title) of the allergy-list alerts of folding `events` in arrival order."""
    return [(a.status, a.title) for a in run(events) if a.rule_id == LIST_RULE.id]


def record(name: str, day: float, **payload: Any) -> Event:
    return make_event(
        "AllergyRecorded", name, at=day * DAY, payload={"allergy_id": name, **payload}
    )


def status(name: str, allergy: str, day: float, **change: str) -> Event:
    return make_event(
        "AllergyStatusChanged", name, at=day * DAY, payload={"allergy_id": allergy, **change}
    )


def test_given_nkda_and_a_penicillin_allergy_then_one_warning_naming_both_in_either_order() -> None:
    events = [record("nkda", 0, **NKDA), record("pen", 1, substance="penicillin")]
    seen = set()
    for order in permutations(events):
        (alert,) = [a for a in run(list(order)) if a.rule_id == LIST_RULE.id]
        assert (alert.status, alert.severity) == (AlertStatus.RAISED, Severity.WARNING)
        assert alert.cause == ("allergy:nkda", "allergy:pen")
        assert "No known drug allergies" in alert.title and "penicillin" in alert.title
        seen.add(alert.alert_id)
    assert seen == {alert_id("clinic-a", "patient-1", LIST_RULE, ["allergy:nkda", "allergy:pen"])}


def test_given_a_negated_record_naming_a_substance_then_the_title_says_it_is_a_negation() -> None:
    """A record of "no penicillin allergy" (negated, substance penicillin) beside an amoxicillin
    allergy: the title must not read as if the list recorded a penicillin allergy."""
    negation = record("no-pen", 0, substance="penicillin", negated=True, categories=["medication"])
    ((_, title),) = listed([negation, record("amox", 1, substance="amoxicillin")])
    assert title == (
        "Allergy list records 'penicillin' as no known allergy but also an active allergy to "
        "amoxicillin"
    )


def test_given_a_substance_named_with_its_kind_then_the_kind_is_not_said_twice() -> None:
    """A coded record's display ("Allergy to penicillin") already says it is an allergy: the
    title and the evidence read "an active Allergy to penicillin", not "allergy to Allergy to
    penicillin"."""
    events = [record("nkda", 0, **NKDA), record("pen", 1, substance="Allergy to penicillin")]
    (alert,) = [a for a in run(events) if a.rule_id == LIST_RULE.id]
    assert alert.title.endswith("but also an active Allergy to penicillin")
    assert [item.description for item in alert.evidence] == [
        "No known drug allergies",
        "Allergy to penicillin",
    ]


def test_the_allergy_is_still_judged_against_drugs_while_the_list_contradicts_itself() -> None:
    events = [
        record("nkda", 0, **NKDA),
        record("pen", 1, substance="penicillin"),
        make_event("MedicationPrescribed", "rx", at=2 * DAY, payload={"drug": "amoxicillin"}),
    ]
    assert sorted(a.rule_id for a in run(events)) == sorted([LIST_RULE.id, DRUG_ALLERGY.id])


@pytest.mark.parametrize(
    ("statement", "allergy", "contradicts"),
    [
        pytest.param(NKDA, {"substance": "peanut", "categories": ["food"]}, False, id="NKDA+food"),
        pytest.param(
            {"substance": "No known allergy", "negated": True, "categories": []},
            {"substance": "peanut", "categories": ["food"]},
            True,
            id="NKA naming no category covers food",
        ),
        pytest.param(
            {"substance": "No known latex allergy", "negated": True, "categories": ["environment"]},
            {"substance": "latex", "categories": ["environment"]},
            True,
            id="NKLA+latex",
        ),
        pytest.param(
            {"substance": "No known latex allergy", "negated": True, "categories": ["environment"]},
            {"substance": "penicillin", "categories": ["medication"]},
            False,
            id="NKLA+penicillin",
        ),
        pytest.param(
            NKDA,
            {"substance": "Augmentin", "categories": []},
            True,
            id="uncategorised brand read as a medication",
        ),
        pytest.param(
            NKDA,
            {"substance": "cashew nuts", "categories": []},
            False,
            id="uncategorised food is not a drug",
        ),
        pytest.param(
            NKDA,
            {"substance": "flu vaccine", "categories": []},
            True,
            id="uncategorised vaccine is a medication too",
        ),
        pytest.param(
            {"substance": "No known food allergy", "negated": True, "categories": ["food"]},
            {"substance": "zorblax", "categories": []},
            True,
            id="uncategorised unknown substance may be any category",
        ),
        pytest.param(
            NKDA,
            {"substance": "lactose", "allergy_type": "intolerance", "categories": ["food"]},
            False,
            id="NKDA+food intolerance",
        ),
        pytest.param(
            NKDA,
            {"substance": "codeine", "allergy_type": "intolerance", "categories": ["medication"]},
            True,
            id="NKDA+drug intolerance",
        ),
    ],
)
def test_a_statement_covers_the_allergies_of_its_categories(
    statement: dict[str, Any], allergy: dict[str, Any], contradicts: bool
) -> None:
    titles = listed([record("statement", 0, **statement), record("allergy", 1, **allergy)])
    assert len(titles) == int(contradicts)


def test_an_uncategorised_allergy_says_its_category_was_read_from_the_substance() -> None:
    events = [record("nkda", 0, **NKDA), record("amox", 1, substance="amoxicillin", categories=[])]
    (alert,) = [a for a in run(events) if a.rule_id == LIST_RULE.id]
    assert "no category recorded; read from the substance" in alert.detail


@pytest.mark.parametrize(
    "correction",
    [
        pytest.param(
            status("fix", "nkda", 2, verification_status="entered_in_error"), id="NKDA EIE"
        ),
        pytest.param(status("fix", "nkda", 2, verification_status="refuted"), id="NKDA refuted"),
        pytest.param(status("fix", "nkda", 2, clinical_status="inactive"), id="NKDA inactive"),
        pytest.param(status("fix", "pen", 2, verification_status="refuted"), id="allergy refuted"),
        pytest.param(status("fix", "pen", 2, clinical_status="resolved"), id="allergy resolved"),
        pytest.param(
            make_event(
                "ClaimRetracted",
                "fix",
                at=2 * DAY,
                payload={"claim_id": event_id("nkda")},
            ),
            id="NKDA retracted",
        ),
    ],
)
def test_correcting_either_record_resolves_the_alert(correction: Event) -> None:
    events = [record("nkda", 0, **NKDA), record("pen", 1, substance="penicillin"), correction]
    assert [s for s, _ in listed(events)] == [AlertStatus.RAISED, AlertStatus.RESOLVED]


def test_a_statement_corrected_before_the_allergy_is_never_left_open_in_any_arrival_order() -> None:
    """Raised only while both stood as they arrived (the correction came last), then resolved."""
    nkda, fix, pen = (
        record("nkda", 0, **NKDA),
        status("fix", "nkda", 1, verification_status="entered_in_error"),
        record("pen", 2, substance="penicillin"),
    )
    for order in permutations([nkda, fix, pen]):
        both_stood = order.index(fix) == 2
        expected = [AlertStatus.RAISED, AlertStatus.RESOLVED] if both_stood else []
        assert [s for s, _ in listed(list(order))] == expected


def test_a_statement_whose_validity_ended_is_not_a_contradiction() -> None:
    statement = make_event(
        "AllergyRecorded",
        "nkda",
        at=0 * DAY,
        payload={"allergy_id": "nkda", **NKDA},
        valid_until=T0 + DAY,
    )
    assert listed([statement, record("pen", 2, substance="penicillin")]) == []


def test_each_allergy_a_statement_covers_is_its_own_alert() -> None:
    events = [
        record("nkda", 0, **NKDA),
        record("pen", 1, substance="penicillin"),
        record("sulfa", 2, substance="sulfamethoxazole"),
    ]
    alerts = [a for a in run(events) if a.rule_id == LIST_RULE.id]
    assert sorted(a.cause for a in alerts) == [
        ("allergy:nkda", "allergy:pen"),
        ("allergy:nkda", "allergy:sulfa"),
    ]
