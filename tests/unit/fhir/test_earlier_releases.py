"""Records of earlier FHIR releases sent to the R4 importer: the STU3 and DSTU2 modifier
elements that say a drug was not taken or not given (`taken` "n", `wasNotTaken`, `notGiven`,
`wasNotGiven`) skip the record as R4's not-taken and not-done do. Read as if they were absent,
a vaccine not given raised an alert for a dose the patient never had, without a word."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.events import MedicationPrescribed
from tests.unit.fhir.test_error_paths import run

PATIENT = {"reference": "Patient/p1"}
AMOXICILLIN = {"text": "amoxicillin 500 mg"}
STATEMENT = {
    "resourceType": "MedicationStatement",
    "id": "s1",
    "status": "active",
    "medicationCodeableConcept": AMOXICILLIN,
    "subject": PATIENT,
    "effectiveDateTime": "2024-05-01",
}
ADMINISTRATION = {
    "resourceType": "MedicationAdministration",
    "id": "ad1",
    "status": "completed",
    "medicationCodeableConcept": AMOXICILLIN,
    "subject": PATIENT,
    "effectiveDateTime": "2024-05-01T10:00:00Z",
}
IMMUNIZATION = {
    "resourceType": "Immunization",
    "id": "i1",
    "status": "completed",
    "vaccineCode": {"coding": [{"system": "http://hl7.org/fhir/sid/cvx", "code": "03"}]},
    "patient": PATIENT,
    "occurrenceDateTime": "2024-05-01",
}


@pytest.mark.parametrize(
    ("resource", "said"),
    [
        pytest.param(
            {**STATEMENT, "taken": "n"},
            "MedicationStatement taken 'n' (STU3), an earlier release's not-taken: the patient "
            "does not take the drug",
            id="given an STU3 statement taken n then it is skipped as not taken",
        ),
        pytest.param(
            {**STATEMENT, "wasNotTaken": True},
            "MedicationStatement wasNotTaken true (DSTU2), an earlier release's not-taken: the "
            "patient does not take the drug",
            id="given a DSTU2 statement wasNotTaken then it is skipped as not taken",
        ),
        pytest.param(
            {**ADMINISTRATION, "notGiven": True},
            "MedicationAdministration notGiven true (STU3), an earlier release's not-done: the "
            "drug was not given",
            id="given an STU3 administration notGiven then it is skipped as not done",
        ),
        pytest.param(
            {**IMMUNIZATION, "wasNotGiven": True},
            "Immunization wasNotGiven true (DSTU2), an earlier release's not-done: the vaccine "
            "was not given",
            id="given a DSTU2 immunization wasNotGiven then it is skipped as not done",
        ),
    ],
)
def test_an_earlier_releases_not_taken_or_not_given_skips_the_record_with_a_line(
    resource: dict[str, Any], said: str
) -> None:
    result = run(resource)
    assert result.errors == []
    assert result.events == []
    assert [skip.reason for skip in result.skipped] == [said]


@pytest.mark.parametrize(
    "resource",
    [
        pytest.param({**STATEMENT, "taken": "y"}, id="given taken y then the drug is taken"),
        pytest.param({**STATEMENT, "taken": "unk"}, id="given taken unk then it is read"),
        pytest.param(
            {**ADMINISTRATION, "notGiven": False}, id="given notGiven false then it was given"
        ),
        pytest.param(
            {**IMMUNIZATION, "notGiven": False}, id="given a vaccine not refused then it is read"
        ),
    ],
)
def test_an_earlier_releases_element_that_does_not_negate_leaves_the_record_read(
    resource: dict[str, Any],
) -> None:
    result = run(resource)
    assert result.errors == []
    assert any(isinstance(event.payload, MedicationPrescribed) for _, event in result.events)
