"""R4 shapes met when probing the import with files it had not seen: each is read as what it
says, or refused with an error that says why."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.events import AllergyRecorded, ClinicalStatus, VerificationStatus
from tests.unit.fhir.test_error_paths import ALLERGY, run, with_value

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
            id="given clinicalStatus coded Active (capitalised) then an active allergy, not an error",
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
            id="given verificationStatus coded ENTERED_IN_ERROR without a system then entered in error",
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
