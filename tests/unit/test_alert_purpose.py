"""A claim is used only for the purpose it was recorded for: a rule combines claims of one
purpose, and its alert carries that purpose (the purpose it may be read for)."""

from __future__ import annotations

from datetime import timedelta
from itertools import permutations
from typing import Any

import pytest

from projections.gate import TenantPolicy
from projections.queries import trips
from projections.reads import readable_document
from projections.state import replay
from rules.engine import default_rules
from rules.knowledge.bundled import load_bundled_knowledge
from rules.polypharmacy import THRESHOLD
from schemas.alerts import Alert, AlertStatus
from schemas.events import Event
from tests.factories import make_event
from tests.unit.test_polypharmacy import DRUGS as POLYPHARMACY_DRUGS
from tests.unit.test_rules import run

RULES = default_rules(load_bundled_knowledge())
DAY = timedelta(days=1)
CARE, RESEARCH = "care", "research"
DRUGS = POLYPHARMACY_DRUGS[:THRESHOLD]
"""Ten different medicines: the polypharmacy threshold."""


def allergy(name: str, purpose: str, day: float = 0, **payload: Any) -> Event:
    return make_event(
        "AllergyRecorded",
        name,
        at=day * DAY,
        payload={"allergy_id": name, "substance": "penicillin", **payload},
        purpose=purpose,
    )


def rx(name: str, drug: str, purpose: str, day: float = 1) -> Event:
    return make_event(
        "MedicationPrescribed",
        name,
        at=day * DAY,
        payload={"prescription_id": name, "drug": drug},
        purpose=purpose,
    )


def raised(events: list[Event], rule: str) -> list[Alert]:
    return [
        alert
        for alert in run(events, RULES)
        if alert.rule_id == rule and alert.status is AlertStatus.RAISED
    ]


@pytest.mark.parametrize("purposes", [(CARE, RESEARCH), (RESEARCH, CARE)])
def test_an_allergy_and_a_drug_recorded_for_different_purposes_raise_nothing_in_either_order(
    purposes: tuple[str, str],
) -> None:
    allergy_purpose, drug_purpose = purposes
    events = [allergy("pen", allergy_purpose), rx("amox", "amoxicillin", drug_purpose)]
    assert raised(events, "drug-allergy-conflict") == []
    assert raised(events[::-1], "drug-allergy-conflict") == []


@pytest.mark.parametrize("purpose", [CARE, RESEARCH])
def test_an_allergy_and_a_drug_of_one_purpose_raise_an_alert_of_that_purpose(purpose: str) -> None:
    (alert,) = raised(
        [allergy("pen", purpose), rx("amox", "amoxicillin", purpose)], "drug-allergy-conflict"
    )
    assert alert.purpose == purpose
    assert alert.drug_allergy is not None and alert.drug_allergy.level == "same_class"


def test_a_drug_is_judged_against_the_allergies_of_its_purpose_only() -> None:
    """A care prescription against a care and a research allergy: one alert, the care pair's;
    stopping the drug resolves it, and its resolution carries the purpose too."""
    events = [
        allergy("pen-care", CARE),
        allergy("pen-research", RESEARCH, day=0.5),
        rx("amox", "amoxicillin", CARE),
        make_event("MedicationStopped", "stop", at=2 * DAY, payload={"prescription_id": "amox"}),
    ]
    alerts = [a for a in run(events, RULES) if a.rule_id == "drug-allergy-conflict"]
    assert [(a.status, a.purpose) for a in alerts] == [
        (AlertStatus.RAISED, CARE),
        (AlertStatus.RESOLVED, CARE),
    ]
    assert {e.claim_id for e in alerts[0].evidence} == {"pen-care", "amox"}


def test_duplicate_therapy_pairs_prescriptions_of_one_purpose_only() -> None:
    mixed = [rx("a", "ibuprofen 400 mg", CARE), rx("b", "naproxen 500 mg", RESEARCH, day=2)]
    assert raised(mixed, "duplicate-therapy") == []
    same = [rx("a", "ibuprofen 400 mg", RESEARCH), rx("b", "naproxen 500 mg", RESEARCH, day=2)]
    (alert,) = raised(same, "duplicate-therapy")
    assert alert.purpose == RESEARCH


def test_a_no_known_allergy_statement_contradicts_allergies_of_its_purpose_only() -> None:
    statement = make_event(
        "AllergyRecorded",
        "nkda",
        payload={
            "allergy_id": "nkda",
            "substance": "No known drug allergies",
            "negated": True,
            "categories": ["medication"],
        },
        purpose=CARE,
    )
    assert raised([statement, allergy("pen", RESEARCH, day=1)], "allergy-list-contradiction") == []
    (alert,) = raised([statement, allergy("pen", CARE, day=1)], "allergy-list-contradiction")
    assert alert.purpose == CARE


def test_a_reversal_stated_for_another_purpose_asks_for_no_confirmation() -> None:
    def stated(name: str, value: str, purpose: str, day: float) -> Event:
        payload = {"key": "seat", "value": value}
        return make_event("PreferenceStated", name, at=day * DAY, payload=payload, purpose=purpose)

    held = stated("held", "aisle", "personalization", 0)
    elsewhere = stated("elsewhere", "window", "marketing", 1)
    assert raised([held, elsewhere], "claim-needs-confirmation") == []
    reversal = stated("reversal", "window", "personalization", 1)
    (alert,) = raised([held, reversal], "claim-needs-confirmation")
    assert alert.purpose == "personalization"
    assert set(alert.cause) == {f"preference:{held.id}", f"preference:{reversal.id}"}


def test_polypharmacy_counts_the_medicines_of_each_purpose_apart() -> None:
    """Ten medicines split between two purposes are no episode; ten of one purpose are one,
    of that purpose, whatever the other purpose holds."""
    split = [
        rx(f"rx-{n}", drug, CARE if n % 2 else RESEARCH, day=1 + n) for n, drug in enumerate(DRUGS)
    ]
    assert len(DRUGS) == THRESHOLD
    assert raised(split, "polypharmacy") == []
    research_too = [rx("extra", POLYPHARMACY_DRUGS[THRESHOLD], RESEARCH, day=0.5)]
    care = [rx(f"rx-{n}", drug, CARE, day=1 + n) for n, drug in enumerate(DRUGS)]
    (alert,) = raised(research_too + care, "polypharmacy")
    assert alert.purpose == CARE
    assert len(alert.evidence) == THRESHOLD


def only_the_care_alert_is_raised(events: list[Event], rule: str) -> None:
    """In every arrival order of `events`, `rule` raises one alert, for care, and nothing else."""
    for order in permutations(events):
        alerts = [a for a in run(list(order), RULES) if a.rule_id == rule]
        assert [(a.status, a.purpose) for a in alerts] == [(AlertStatus.RAISED, CARE)], order


def acknowledge(
    name: str, alert: Alert, purpose: str, day: float, action: str = "overridden"
) -> Event:
    return make_event(
        "AlertAcknowledged",
        name,
        at=day * DAY,
        payload={"alert_id": str(alert.alert_id), "action": action, "reason": f"{purpose} says"},
        purpose=purpose,
    )


def care_conflict() -> tuple[list[Event], Alert]:
    """A penicillin allergy and an amoxicillin order recorded for care, and their alert."""
    care = [allergy("pen", CARE), rx("amox", "amoxicillin", CARE)]
    (care_alert,) = raised(care, "drug-allergy-conflict")
    return care, care_alert


def test_the_same_claims_restated_for_another_purpose_are_another_alert() -> None:
    """An allergy and a prescription recorded for care, then restated (same ids) for research:
    the research records are records of their own, so the care alert stays as it was (its
    override too) and a research alert with its own id is raised; a care override does not
    carry over to it, and every record of an id has one purpose."""
    care, care_alert = care_conflict()
    history = [
        *care,
        acknowledge("override", care_alert, CARE, day=1.5),
        allergy("pen-restated", RESEARCH, day=2, allergy_id="pen"),
        make_event(
            "MedicationPrescribed",
            "amox-restated",
            at=3 * DAY,
            payload={"prescription_id": "amox", "drug": "amoxicillin"},
            purpose=RESEARCH,
        ),
    ]
    alerts = [a for a in run(history, RULES) if a.rule_id == "drug-allergy-conflict"]
    by_id: dict[str, set[str]] = {}
    for alert in alerts:
        by_id.setdefault(str(alert.alert_id), set()).add(alert.purpose)
    assert len(by_id) == 2
    assert all(len(purposes) == 1 for purposes in by_id.values())
    assert [a.status for a in alerts if a.purpose == CARE] == [
        AlertStatus.RAISED,
        AlertStatus.OVERRIDDEN,
    ]
    (research,) = [a for a in alerts if a.purpose == RESEARCH]
    assert research.status is AlertStatus.RAISED
    assert research.alert_id != care_alert.alert_id


def test_an_acknowledgement_recorded_for_another_purpose_acknowledges_nothing() -> None:
    care, care_alert = care_conflict()
    elsewhere = acknowledge("research-ack", care_alert, RESEARCH, day=2)
    assert [a.status for a in run([*care, elsewhere], RULES)] == [AlertStatus.RAISED]
    in_care = acknowledge("care-ack", care_alert, CARE, day=2)
    assert [a.status for a in run([*care, in_care], RULES)] == [
        AlertStatus.RAISED,
        AlertStatus.OVERRIDDEN,
    ]


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(
            make_event(
                "AllergyStatusChanged",
                "refuted-elsewhere",
                at=2 * DAY,
                payload={"allergy_id": "pen", "verification_status": "refuted"},
                purpose=RESEARCH,
            ),
            id="a research refutation of the care allergy",
        ),
        pytest.param(
            make_event(
                "MedicationStopped",
                "stopped-elsewhere",
                at=2 * DAY,
                payload={"prescription_id": "amox"},
                purpose=RESEARCH,
            ),
            id="a research stop of the care prescription",
        ),
    ],
)
def test_a_change_recorded_for_another_purpose_leaves_the_care_alert_raised_in_any_order(
    change: Event,
) -> None:
    care = [allergy("pen", CARE), rx("amox", "amoxicillin", CARE)]
    only_the_care_alert_is_raised([*care, change], "drug-allergy-conflict")


def stated(kind: str, name: str, key: str, value: str, purpose: str, day: float) -> Event:
    payload = {"key": key, "value": value}
    return make_event(kind, name, at=day * DAY, payload=payload, purpose=purpose)


def test_a_statement_for_another_purpose_neither_settles_nor_hides_a_care_conflict() -> None:
    """A care reversal within the confirmation window asks for confirmation; a research
    statement about the same key in between is research's own value: the care conflict stays
    open and its alert raised, whatever the order of arrival, and each read sees its value."""
    care = [
        stated("PreferenceStated", "aisle", "seat", "aisle", CARE, 0),
        stated("PreferenceStated", "window", "seat", "window", CARE, 1),
    ]
    elsewhere = stated("PreferenceStated", "middle", "seat", "middle", RESEARCH, 0.5)
    only_the_care_alert_is_raised([*care, elsewhere], "claim-needs-confirmation")
    state = replay([*care, elsewhere])
    in_care = readable_document(state, CARE)["preferences"]["seat"]
    assert (in_care["value"], in_care["needs_confirmation"] is not None) == ("aisle", True)
    assert [entry["value"] for entry in in_care["history"]] == ["aisle", "window"]
    for_research = readable_document(state, RESEARCH)["preferences"]["seat"]
    assert (for_research["value"], for_research["needs_confirmation"]) == ("middle", None)


def test_a_home_country_recorded_for_research_leaves_the_care_trips_as_they_were() -> None:
    """A trip is international by the home country recorded for the trip's own purpose."""
    home = stated("FactAsserted", "home-nl", "home_country", "NL", CARE, 0)
    moved = stated("FactAsserted", "home-be", "home_country", "BE", RESEARCH, 1)

    def trip(name: str, purpose: str) -> Event:
        payload = {
            "trip_id": name,
            "origin_country": "NL",
            "destination_country": "BE",
            "departure_date": "2024-03-10",
        }
        return make_event("TravelRecorded", name, at=2 * DAY, payload=payload, purpose=purpose)

    history = [home, moved, trip("care", CARE), trip("study", RESEARCH)]
    found = {
        found.trip_id: (found.home_country, found.international) for found in trips(replay(history))
    }
    assert found == {"care": ("NL", True), "study": ("BE", False)}


def test_an_acknowledgement_for_another_purpose_leaves_the_care_override_in_force() -> None:
    care, care_alert = care_conflict()
    override = acknowledge("care-override", care_alert, CARE, day=1.5)
    elsewhere = acknowledge("research-ack", care_alert, RESEARCH, day=2, action="accepted")
    for order in permutations([*care, override, elsewhere]):
        alerts = run(list(order), RULES)
        assert alerts[-1].status is AlertStatus.OVERRIDDEN, order
        assert alerts[-1].trigger_event_id == override.id, order
    clinic = TenantPolicy(frozenset({"ehr-adapter"}), frozenset({CARE}))
    acknowledgements = readable_document(replay([*care, override, elsewhere]), CARE, clinic)
    assert [entry["event_id"] for entry in acknowledgements["acknowledgements"].values()] == [
        override.id
    ]


@pytest.mark.parametrize(
    ("elsewhere", "held_for_research"),
    [
        pytest.param(
            allergy("peanut", RESEARCH, day=-1, allergy_id="pen", substance="peanut"),
            "peanut",
            id="an allergy recorded for research under the care allergy's id, dated before it",
        ),
        pytest.param(
            make_event(
                "MedicationPrescribed",
                "other-drug",
                at=2 * DAY,
                payload={"prescription_id": "amox", "drug": "metformin"},
                purpose=RESEARCH,
            ),
            "metformin",
            id="a prescription recorded for research under the care prescription's id",
        ),
    ],
)
def test_a_record_for_another_purpose_under_a_care_id_takes_nothing_from_care(
    elsewhere: Event, held_for_research: str
) -> None:
    care = [allergy("pen", CARE), rx("amox", "amoxicillin", CARE)]
    only_the_care_alert_is_raised([*care, elsewhere], "drug-allergy-conflict")
    state = replay([*care, elsewhere])
    clinic = TenantPolicy(frozenset({"ehr-adapter"}), frozenset({CARE, RESEARCH}))
    in_care = readable_document(state, CARE, clinic)
    assert [a["substance"] for a in in_care["allergies"]] == ["penicillin"]
    assert [m["drug"] for m in in_care["medications"]["active"]] == ["amoxicillin"]
    for_research = readable_document(state, RESEARCH, clinic)
    held = [a["substance"] for a in for_research["allergies"]]
    held += [m["drug"] for m in for_research["medications"]["active"]]
    assert held == [held_for_research]
