"""A record filed under the wrong patient and moved at the source (a later version names
another patient) leaves the first patient: no allergy that is not theirs, no alert from it."""

from __future__ import annotations

from typing import Any

import pytest

from projections.queries import active_allergies, active_medications
from schemas.alerts import AlertStatus
from schemas.fhir.mapping import FhirImport, ImportContext, combine, import_fhir, unpack
from tests.unit.fhir.test_clinical_scenarios import (
    ACTOR,
    DRUG_ALLERGY,
    FALLBACK,
    TENANT,
    fold,
    submitted_from,
)


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


def versions_of_an_order(**later: Any) -> list[dict[str, Any]]:
    """Version 1 of an order for patient A, then version 2 changed by `later`."""
    first = order("rx-v", "A", "2024-03-02")
    first["meta"] = {"versionId": "1", "lastUpdated": "2024-03-02T09:00:00Z"}
    return [
        first,
        first | {"meta": {"versionId": "2", "lastUpdated": "2024-03-03T09:00:00Z"}} | later,
    ]


def imported(resources: list[dict[str, Any]]) -> FhirImport:
    context = ImportContext(tenant_id=TENANT, actor=ACTOR, fallback_time=FALLBACK)
    return import_fhir(
        combine(unpack(r, f"scenario#{n}") for n, r in enumerate(resources)), context
    )


@pytest.mark.parametrize(
    ("later", "why"),
    [
        pytest.param(
            {"doNotPerform": True},
            "MedicationRequest doNotPerform: an instruction not to give the drug",
            id="given a later version that is an instruction not to give the drug",
        ),
        pytest.param(
            {"intent": "proposal"},
            "MedicationRequest intent proposal is not a prescription",
            id="given a later version that is a proposal",
        ),
        pytest.param(
            {"status": "draft"},
            "MedicationRequest status draft is not yet a prescription",
            id="given a later version that is a draft",
        ),
    ],
)
def test_a_later_version_skipped_by_design_is_reported_and_the_order_stays_in_force(
    later: dict[str, Any], why: str
) -> None:
    """The order and its alerts stayed in force without a word: the safe reading keeps them,
    and a line says so."""
    resources = versions_of_an_order(**later)
    assert [(part.source_ref, part.detail) for part in imported(resources).passed_over] == [
        (
            "MedicationRequest/rx-v",
            f"a later version (meta.versionId 2) is skipped ({why}): the earlier version "
            "imported stays in force, and its alerts with it; check the record at the source",
        )
    ]
    results = fold(submitted_from(resources))
    assert [m.prescription_id for m in active_medications(results["clinic-a:A"].state)] == ["rx-v"]


def test_a_later_version_for_a_group_ends_the_order_for_the_patient_as_a_move_does() -> None:
    resources = versions_of_an_order(subject={"reference": "Group/ward-3"})
    [part] = imported(resources).passed_over
    assert part.detail.endswith(
        "it is no longer the record of patient A, so it ends there as a move to another patient does"
    )
    results = fold(submitted_from(resources))
    assert active_medications(results["clinic-a:A"].state) == []
    assert [m.entered_in_error for m in results["clinic-a:A"].state.medication_views()] == [True]


def test_a_later_statement_version_not_taken_is_reported_and_the_statement_stays() -> None:
    taken = {
        "resourceType": "MedicationStatement",
        "id": "st-v",
        "meta": {"versionId": "1", "lastUpdated": "2024-03-02T09:00:00Z"},
        "status": "active",
        "subject": {"reference": "Patient/A"},
        "effectiveDateTime": "2024-03-02",
        "medicationCodeableConcept": {"text": "amoxicillin"},
    }
    not_taken = taken | {
        "status": "not-taken",
        "meta": {"versionId": "2", "lastUpdated": "2024-03-03T09:00:00Z"},
    }
    [part] = imported([taken, not_taken]).passed_over
    assert part.source_ref == "MedicationStatement/st-v"
    assert "the earlier version imported stays in force" in part.detail
