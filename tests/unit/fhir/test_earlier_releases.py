"""Records of other FHIR releases sent to the R4 importer: the STU3 and DSTU2 modifier
elements that say a drug was not taken or not given (`taken` "n", `wasNotTaken`, `notGiven`,
`wasNotGiven`) skip the record as R4's not-taken and not-done do (read as if they were absent,
a vaccine not given raised an alert for a dose the patient never had, without a word), and an
R5 statement (`recorded`, with its `adherence`) is read as the R4 status it says."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.events import MedicationPrescribed, MedicationStopped
from tests.unit.fhir.test_clinical_scenarios import (
    drug_allergy_alerts,
    fold,
    subject,
    submitted_from,
)
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


ADHERENCE = "http://hl7.org/fhir/CodeSystem/medication-statement-adherence"


def r5_statement(adherence: str | None) -> dict[str, Any]:
    statement: dict[str, Any] = {
        "resourceType": "MedicationStatement",
        "id": "s1",
        "status": "recorded",
        "medication": {"concept": AMOXICILLIN},
        "subject": PATIENT,
        "effectiveDateTime": "2024-05-01",
    }
    if adherence is not None:
        statement["adherence"] = {"code": {"coding": [{"system": ADHERENCE, "code": adherence}]}}
    return statement


ALLERGY = {
    "resourceType": "AllergyIntolerance",
    "id": "a1",
    "patient": PATIENT,
    "code": {"text": "Penicillin"},
    "verificationStatus": {"coding": [{"code": "confirmed"}]},
    "recordedDate": "2024-01-01",
}


@pytest.mark.parametrize(
    "adherence",
    [
        pytest.param(None, id="given no adherence then taken"),
        pytest.param("taking", id="given taking then taken"),
        pytest.param("on-hold-as-directed", id="given on hold then still checked"),
    ],
)
def test_an_r5_recorded_statement_is_checked_against_the_allergy(adherence: str | None) -> None:
    """An IPS built on R5 says `recorded`: refused as no R4 status, the amoxicillin the patient
    takes was never checked against the penicillin allergy."""
    resources = [ALLERGY, r5_statement(adherence)]
    result = run(*resources)
    assert result.errors == []
    (alert,) = drug_allergy_alerts(subject(fold(submitted_from(resources)), "p1"))
    assert alert.severity == "critical"


def test_an_r5_statement_of_a_drug_not_taken_is_skipped_with_a_line() -> None:
    result = run(r5_statement("not-taking"))
    assert result.errors == []
    assert result.events == []
    assert [skip.reason for skip in result.skipped] == [
        "MedicationStatement recorded (R5) with an adherence of not taking: the patient does not "
        "take the drug"
    ]


def test_an_r5_statement_stopped_by_its_adherence_is_stopped() -> None:
    statement = {**r5_statement("stopped"), "effectivePeriod": {"start": "2024-05-01"}}
    del statement["effectiveDateTime"]
    result = run(statement)
    assert result.errors == []
    assert [type(event.payload) for _, event in result.events] == [
        MedicationPrescribed,
        MedicationStopped,
    ]


@pytest.mark.parametrize("prefix", ["occurence", "occurrence"])
def test_an_r5_administration_is_dated_when_its_occurence_says(prefix: str) -> None:
    """R5 renamed `effective[x]` to `occurence[x]`: read past, the dose was dated at the
    Bundle's time, and the day it was given was lost without a word."""
    administration = {**ADMINISTRATION, f"{prefix}DateTime": "2023-06-01T10:00:00Z"}
    del administration["effectiveDateTime"]
    result = run(administration)
    assert result.errors == []
    prescribed = [e for _, e in result.events if isinstance(e.payload, MedicationPrescribed)]
    assert [event.occurred_at.isoformat() for event in prescribed] == ["2023-06-01T10:00:00+00:00"]


def test_an_r5_dispense_unfulfilled_is_skipped_as_nothing_dispensed() -> None:
    dispense = {
        "resourceType": "MedicationDispense",
        "id": "d1",
        "status": "unfulfilled",
        "medicationCodeableConcept": AMOXICILLIN,
        "subject": PATIENT,
        "whenHandedOver": "2024-05-01",
    }
    result = run(dispense)
    assert result.errors == []
    assert result.events == []
    assert [skip.reason for skip in result.skipped] == [
        "MedicationDispense unfulfilled: nothing was dispensed"
    ]
