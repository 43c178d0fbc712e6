"""R4 shapes met when probing the import with files it had not seen: each is read as what it
says, or refused with an error that says why."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.events import (
    AllergyCategory,
    AllergyRecorded,
    ClinicalStatus,
    Criticality,
    MedicationPrescribed,
    MedicationStopped,
    ReactionSeverity,
    VerificationStatus,
)
from tests.unit.fhir.test_clinical_scenarios import (
    drug_allergy_alerts,
    fold,
    subject,
    submitted_from,
)
from tests.unit.fhir.test_error_paths import (
    ALLERGY,
    MEDICATION,
    ORDER,
    PATIENT,
    messages,
    run,
    with_value,
)

CLINICAL = "http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical"
VERIFICATION = "http://terminology.hl7.org/CodeSystem/allergyintolerance-verification"


def recorded(resource: dict[str, Any]) -> AllergyRecorded:
    result = run(resource)
    assert result.errors == []
    (payload,) = [event.payload for _, event in result.events]
    assert isinstance(payload, AllergyRecorded)
    return payload


@pytest.mark.parametrize(
    ("key", "coding", "expected"),
    [
        pytest.param(
            "clinicalStatus",
            {"system": CLINICAL, "code": "Active"},
            ClinicalStatus.ACTIVE,
            id="given clinicalStatus coded Active then an active allergy, not an error",
        ),
        pytest.param(
            "clinicalStatus",
            {"system": CLINICAL, "code": "RESOLVED"},
            ClinicalStatus.RESOLVED,
            id="given clinicalStatus coded RESOLVED then a resolved allergy",
        ),
        pytest.param(
            "verificationStatus",
            {"system": VERIFICATION, "code": "Refuted"},
            VerificationStatus.REFUTED,
            id="given verificationStatus coded Refuted then a refuted allergy",
        ),
        pytest.param(
            "verificationStatus",
            {"code": "ENTERED_IN_ERROR"},
            VerificationStatus.ENTERED_IN_ERROR,
            id="given verificationStatus coded ENTERED_IN_ERROR then entered in error",
        ),
    ],
)
def test_a_status_code_in_other_letters_is_read_as_the_code_it_spells(
    key: str, coding: dict[str, str], expected: ClinicalStatus | VerificationStatus
) -> None:
    allergy = recorded(with_value(ALLERGY, (key,), {"coding": [coding]}))

    status = allergy.clinical_status if key == "clinicalStatus" else allergy.verification_status
    assert status is expected


def test_a_status_code_that_spells_no_code_is_still_an_error_naming_the_codes() -> None:
    result = run(with_value(ALLERGY, ("clinicalStatus",), {"coding": [{"code": "Current"}]}))

    assert [error.message for error in result.errors] == [
        "AllergyIntolerance/a1: clinicalStatus 'Current' is not one of active, inactive, resolved"
    ]
    assert result.events == []


def test_allergy_codes_in_other_letters_are_read_as_the_codes_they_spell() -> None:
    allergy = recorded(
        {
            **ALLERGY,
            "criticality": "HIGH",
            "category": ["Medication"],
            "reaction": [{"manifestation": [{"text": "hives"}], "severity": "Severe"}],
        }
    )

    assert allergy.criticality is Criticality.HIGH
    assert allergy.categories == (AllergyCategory.MEDICATION,)
    assert [reaction.severity for reaction in allergy.reactions] == [ReactionSeverity.SEVERE]


@pytest.mark.parametrize(
    ("status", "intent", "kinds"),
    [
        pytest.param("Active", "Order", ["MedicationPrescribed"], id="Active Order: prescribed"),
        pytest.param("ACTIVE", "ORIGINAL_ORDER", ["MedicationPrescribed"], id="upper case"),
        pytest.param(
            "Stopped", "order", ["MedicationPrescribed", "MedicationStopped"], id="Stopped: ends"
        ),
        pytest.param(
            "Entered in error", "order", ["MedicationStopped"], id="Entered in error: only an end"
        ),
    ],
)
def test_a_request_status_or_intent_in_other_letters_is_read_as_the_code_it_spells(
    status: str, intent: str, kinds: list[str]
) -> None:
    result = run({**ORDER, "status": status, "intent": intent}, MEDICATION)

    assert result.errors == []
    assert [type(event.payload).__name__ for _, event in result.events] == kinds


def test_a_request_status_that_spells_no_status_is_still_an_error_naming_it() -> None:
    result = run({**ORDER, "status": "Current"}, MEDICATION)

    assert [error.message for error in result.errors] == [
        "MedicationRequest/rx1: status 'Current' is not a request status (one of active,"
        " cancelled, completed, draft, entered-in-error, on-hold, stopped, unknown)"
    ]
    assert result.events == []


def test_a_statement_status_in_other_letters_is_read_as_the_code_it_spells() -> None:
    statement = {
        "resourceType": "MedicationStatement",
        "id": "ms1",
        "status": "Completed",
        "medicationCodeableConcept": {"text": "amoxicillin 500 mg"},
        "subject": {"reference": "Patient/p1"},
        "effectivePeriod": {"start": "2024-05-01", "end": "2024-05-08"},
    }
    result = run(statement)

    assert result.errors == []
    payloads = [event.payload for _, event in result.events]
    assert [type(payload) for payload in payloads] == [MedicationPrescribed, MedicationStopped]


def prescribed(order: dict[str, Any]) -> tuple[MedicationPrescribed, list[str]]:
    result = run(order, MEDICATION)
    assert result.errors == []
    (payload,) = [event.payload for _, event in result.events]
    assert isinstance(payload, MedicationPrescribed)
    return payload, messages(result)


STRUCTURED_DOSAGE = {
    "timing": {"repeat": {"frequency": 2, "period": 1, "periodUnit": "d"}},
    "route": {
        "coding": [{"system": "http://snomed.info/sct", "code": "26643006", "display": "Oral"}]
    },
    "doseAndRate": [{"doseQuantity": {"value": 500, "unit": "mg"}}],
}


def test_a_dosage_without_text_gives_its_dose_quantity_as_the_dose() -> None:
    order, problems = prescribed(with_value(ORDER, ("dosageInstruction",), [STRUCTURED_DOSAGE]))

    assert (order.dose, order.route, problems) == ("500 mg", "Oral", [])


def test_a_dosage_text_is_preferred_to_its_dose_quantity() -> None:
    dosage = {**STRUCTURED_DOSAGE, "text": "500 mg twice daily with food"}
    order, _ = prescribed(with_value(ORDER, ("dosageInstruction",), [dosage]))

    assert order.dose == "500 mg twice daily with food"


def test_an_unreadable_dose_quantity_is_left_out_and_named_by_its_path() -> None:
    dosage = {**STRUCTURED_DOSAGE, "doseAndRate": [{"doseQuantity": {"value": "500"}}]}
    order, problems = prescribed(with_value(ORDER, ("dosageInstruction",), [dosage]))

    assert (order.dose, order.route) == (None, "Oral")
    assert problems == [
        "MedicationRequest/rx1: dosageInstruction[0].doseAndRate[0].doseQuantity.value is not a "
        "number (imported without it)"
    ]


@pytest.mark.parametrize(
    ("resource", "key", "message"),
    [
        pytest.param(
            ALLERGY,
            "code",
            "AllergyIntolerance/a1: code has no text, display or code with a system "
            "(code.coding[0] has the code '7980' but no system: which terminology it is from, "
            "and so what it names, cannot be told)",
            id="given an allergy coded 7980 without a system then the error says so",
        ),
        pytest.param(
            {**ORDER, "medicationReference": None},
            "medicationCodeableConcept",
            "MedicationRequest/rx1: medicationCodeableConcept has no text, display or code with a "
            "system (medicationCodeableConcept.coding[0] has the code '7980' but no system: which "
            "terminology it is from, and so what it names, cannot be told)",
            id="given an order coded 7980 without a system then the error says so",
        ),
    ],
)
def test_a_code_without_a_system_is_an_error_that_names_the_missing_system(
    resource: dict[str, Any], key: str, message: str
) -> None:
    result = run(with_value(resource, (key,), {"coding": [{"code": "7980"}]}))

    assert [error.message for error in result.errors] == [message]


@pytest.mark.parametrize(
    "allergen",
    [
        "Latex, Natural Rubber",
        "Shellfish Derived",
        "Peanut-Containing Drug Products",
        "Morphine And Related",
    ],
)
def test_an_allergen_named_as_ehr_pick_lists_name_it_raises_nothing_for_an_unrelated_drug(
    allergen: str,
) -> None:
    """Such a name was only partly read, so every order for the patient was `unverified`."""
    allergy = {**ALLERGY, "code": {"text": allergen}, "recordedDate": "2024-01-01"}
    order = {**ORDER, "medicationReference": {"reference": "Medication/apap"}}
    acetaminophen = {**MEDICATION, "id": "apap", "code": {"text": "acetaminophen 500 mg tablet"}}

    results = fold(submitted_from([PATIENT, allergy, order, acetaminophen]))

    assert drug_allergy_alerts(subject(results, "p1")) == []
