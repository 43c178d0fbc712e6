"""A status reason, an administration's dosage or a vaccination's route that cannot be read is
left out with a notice: it never costs the order, its stop, the administration or the
vaccination (and so their alerts)."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.events import EventType, MedicationPrescribed, MedicationStopped
from tests.unit.fhir.test_error_paths import ORDER, PATIENT, messages, run

ACTIVE = {
    **{key: value for key, value in ORDER.items() if key != "medicationReference"},
    "medicationCodeableConcept": {"text": "amoxicillin 500 mg"},
    "meta": {"versionId": "1", "lastUpdated": "2024-05-01T00:00:00Z"},
}
STOPPED = {
    **ACTIVE,
    "status": "stopped",
    "meta": {"versionId": "2", "lastUpdated": "2024-05-03T00:00:00Z"},
}
ADMINISTRATION = {
    "resourceType": "MedicationAdministration",
    "id": "ad1",
    "status": "completed",
    "subject": {"reference": "Patient/p1"},
    "medicationCodeableConcept": {"text": "ampicillin 1 g"},
    "effectiveDateTime": "2024-05-02T08:00:00Z",
}
VACCINATION = {
    "resourceType": "Immunization",
    "id": "im1",
    "status": "completed",
    "patient": {"reference": "Patient/p1"},
    "vaccineCode": {"text": "MMR"},
    "occurrenceDateTime": "2024-05-02",
    "doseQuantity": {"value": 0.5, "unit": "mL"},
}


@pytest.mark.parametrize(
    ("status_reason", "notice"),
    [
        pytest.param("Patient request", "statusReason is not a JSON object", id="a bare string"),
        pytest.param(
            {"text": ["rash"]}, "statusReason.text is not a string", id="a text sent as a list"
        ),
    ],
)
def test_a_stop_with_an_unreadable_reason_still_stops_the_order(
    status_reason: Any, notice: str
) -> None:
    result = run(PATIENT, ACTIVE, {**STOPPED, "statusReason": status_reason})
    assert result.errors == []
    stops = [e.payload for _, e in result.events if e.type == EventType.MEDICATION_STOPPED]
    assert stops == [MedicationStopped(prescription_id="rx1", reason="stopped")]
    assert f"MedicationRequest/rx1: {notice} (imported without it)" in messages(result)


@pytest.mark.parametrize(
    ("resource", "fields", "kept", "notice"),
    [
        pytest.param(
            ADMINISTRATION,
            {"dosage": {"text": 1, "route": {"text": "IV"}}},
            {"dose": None, "route": "IV"},
            "MedicationAdministration/ad1: dosage.text is not a string",
            id="an administration's dosage text sent as a number",
        ),
        pytest.param(
            ADMINISTRATION,
            {"dosage": "1 g IV"},
            {"dose": None, "route": None},
            "MedicationAdministration/ad1: dosage is not a JSON object",
            id="an administration's dosage sent as a string",
        ),
        pytest.param(
            VACCINATION,
            {"route": "IM"},
            {"dose": "0.5 mL", "route": None},
            "Immunization/im1: route is not a JSON object",
            id="a vaccination's route sent as a string",
        ),
        pytest.param(
            VACCINATION,
            {"doseQuantity": {"value": "half", "unit": "mL"}},
            {"dose": None},
            "Immunization/im1: doseQuantity.value is not a number",
            id="a vaccination's dose sent as words",
        ),
    ],
)
def test_a_drug_given_with_an_unreadable_dosage_is_kept_without_it(
    resource: dict[str, Any], fields: dict[str, Any], kept: dict[str, Any], notice: str
) -> None:
    result = run(PATIENT, {**resource, **fields})
    assert result.errors == []
    (given,) = [e.payload for _, e in result.events if isinstance(e.payload, MedicationPrescribed)]
    assert {name: getattr(given, name) for name in kept} == kept
    assert f"{notice} (imported without it)" in messages(result)
