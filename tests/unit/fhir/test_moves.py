"""A record filed under the wrong patient and moved at the source (a later version names
another patient) leaves the first patient: no allergy that is not theirs, no alert from it."""

from __future__ import annotations

from typing import Any

import pytest

from projections.queries import active_allergies, active_medications
from schemas.alerts import AlertStatus
from tests.unit.fhir.test_clinical_scenarios import DRUG_ALLERGY, fold, submitted_from


def allergy(patient: str, version: int, updated: str) -> dict[str, Any]:
    return {
        "resourceType": "AllergyIntolerance",
        "id": "alg-moved",
        "meta": {"versionId": str(version), "lastUpdated": updated},
        "patient": {"reference": f"Patient/{patient}"},
        "verificationStatus": {"coding": [{"code": "confirmed"}]},
        "code": {"text": "penicillin"},
        "recordedDate": "2024-03-01",
    }


def order(order_id: str, patient: str, authored: str, **more: Any) -> dict[str, Any]:
    return {
        "resourceType": "MedicationRequest",
        "id": order_id,
        "status": "active",
        "intent": "order",
        "subject": {"reference": f"Patient/{patient}"},
        "authoredOn": authored,
        "medicationCodeableConcept": {"text": "amoxicillin"},
        **more,
    }


MOVED = [
    allergy("A", 1, "2024-03-01T10:00:00Z"),
    allergy("B", 2, "2024-03-05T10:00:00Z"),
    order("rx-a", "A", "2024-03-02"),
    order("rx-b", "B", "2024-03-06"),
]


@pytest.mark.parametrize(
    "resources",
    [
        pytest.param(MOVED, id="given the versions in order"),
        pytest.param(MOVED[::-1], id="given the newer version first in the file"),
    ],
)
def test_given_an_allergy_moved_to_another_patient_then_only_that_patient_holds_it(
    resources: list[dict[str, Any]],
) -> None:
    results = fold(submitted_from(resources))

    first, second = results["clinic-a:A"], results["clinic-a:B"]
    assert [view.substance for view in active_allergies(first.state)] == []
    assert [view.substance for view in active_allergies(second.state)] == ["penicillin"]
    statuses = [(a.status, a.rule_id) for a in first.alerts]
    assert statuses in (
        [],
        [(AlertStatus.RAISED, DRUG_ALLERGY), (AlertStatus.RESOLVED, DRUG_ALLERGY)],
    )
    assert [(a.status, a.rule_id) for a in second.alerts] == [(AlertStatus.RAISED, DRUG_ALLERGY)]


def test_given_an_order_moved_then_it_is_stopped_for_the_first_patient_and_active_for_the_second() -> (
    None
):
    moved = [
        order(
            "rx-m",
            "A",
            "2024-03-02",
            meta={"versionId": "1", "lastUpdated": "2024-03-02T09:00:00Z"},
        ),
        order(
            "rx-m",
            "B",
            "2024-03-02",
            meta={"versionId": "2", "lastUpdated": "2024-03-03T09:00:00Z"},
        ),
    ]
    results = fold(submitted_from(moved))

    assert active_medications(results["clinic-a:A"].state) == []
    assert [m.entered_in_error for m in results["clinic-a:A"].state.medication_views()] == [True]
    assert [m.drug for m in active_medications(results["clinic-a:B"].state)] == ["amoxicillin"]


def test_given_a_move_and_back_then_the_patient_of_the_latest_version_holds_it() -> None:
    resources = [
        allergy("A", 1, "2024-03-01T10:00:00Z"),
        allergy("B", 2, "2024-03-05T10:00:00Z"),
        allergy("A", 3, "2024-03-09T10:00:00Z"),
    ]
    results = fold(submitted_from(resources))

    assert [v.substance for v in active_allergies(results["clinic-a:A"].state)] == ["penicillin"]
    assert active_allergies(results["clinic-a:B"].state) == []


def test_given_the_same_file_imported_twice_then_the_same_events() -> None:
    ids = [[item.event.event_id for item in submitted_from(MOVED)] for _ in range(2)]
    assert ids[0] == ids[1]
    assert len(set(ids[0])) == len(ids[0])


def test_given_a_statement_about_an_order_moved_then_the_order_stays_with_its_patient() -> None:
    def statement(patient: str, version: int, updated: str) -> dict[str, Any]:
        return {
            "resourceType": "MedicationStatement",
            "id": "st-1",
            "meta": {"versionId": str(version), "lastUpdated": updated},
            "status": "active",
            "subject": {"reference": f"Patient/{patient}"},
            "basedOn": [{"reference": "MedicationRequest/rx-a"}],
            "effectiveDateTime": "2024-03-03",
            "medicationCodeableConcept": {"text": "amoxicillin"},
        }

    resources = [
        order("rx-a", "A", "2024-03-02"),
        statement("A", 1, "2024-03-03T10:00:00Z"),
        statement("B", 2, "2024-03-04T10:00:00Z"),
    ]
    results = fold(submitted_from(resources))

    assert [m.prescription_id for m in active_medications(results["clinic-a:A"].state)] == ["rx-a"]
