"""An error or a left-out part names the part of the resource by its full path
(`clinicalStatus.coding[0].code`, `meta`), never by its last key alone (`code`, which code?)
nor by a key it did not reach (`meta` sent as a string was reported as `lastUpdated`)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from schemas.fhir.mapping import FhirImport, combine, import_fhir, unpack, without_unmapped
from tests.unit.fhir.test_mapping import CONTEXT, SNOMED

PATIENT = {"resourceType": "Patient", "id": "p1", "address": [{"country": "US"}]}
ALLERGY = {
    "resourceType": "AllergyIntolerance",
    "id": "a1",
    "patient": {"reference": "Patient/p1"},
    "clinicalStatus": {"coding": [{"code": "active"}]},
    "verificationStatus": {"coding": [{"code": "confirmed"}]},
    "code": {
        "coding": [{"system": SNOMED, "code": "91936005", "display": "Allergy to penicillin"}]
    },
    "reaction": [{"manifestation": [{"text": "hives"}], "severity": "mild"}],
}
ORDER = {
    "resourceType": "MedicationRequest",
    "id": "rx1",
    "status": "active",
    "intent": "order",
    "subject": {"reference": "Patient/p1"},
    "authoredOn": "2024-05-01",
    "medicationReference": {"reference": "Medication/m1"},
    "dosageInstruction": [{"text": "1 tds", "route": {"text": "oral"}}],
}
MEDICATION = {"resourceType": "Medication", "id": "m1", "code": {"text": "amoxicillin 500 mg"}}


def with_value(resource: dict[str, Any], path: tuple[str | int, ...], value: Any) -> Any:
    changed = copy.deepcopy(resource)
    holder: Any = changed
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = value
    return changed


def run(*resources: Any) -> FhirImport:
    return import_fhir(combine(unpack(r, f"test#{n}") for n, r in enumerate(resources)), CONTEXT)


def messages(result: FhirImport) -> list[str]:
    return [error.message for error in result.errors] + [
        part.message for part in result.passed_over
    ]


@pytest.mark.parametrize(
    ("resource", "path", "value", "message"),
    [
        pytest.param(
            ALLERGY,
            ("meta",),
            "v2",
            "AllergyIntolerance/a1: meta is not a JSON object",
            id="meta sent as a string names meta, not lastUpdated",
        ),
        pytest.param(
            ALLERGY,
            ("meta",),
            {"versionId": 2},
            "AllergyIntolerance/a1: meta.versionId is not a string",
            id="a versionId sent as a number",
        ),
        pytest.param(
            ALLERGY,
            ("clinicalStatus", "coding", 0, "code"),
            1,
            "AllergyIntolerance/a1: clinicalStatus.coding[0].code is not a string",
            id="a status code sent as a number names the status",
        ),
        pytest.param(
            ALLERGY,
            ("verificationStatus", "coding"),
            {"code": "confirmed"},
            "AllergyIntolerance/a1: verificationStatus.coding is not a list of objects",
            id="a status coding sent as an object names the status",
        ),
        pytest.param(
            ALLERGY,
            ("code", "coding", 0, "system"),
            ["sct"],
            "AllergyIntolerance/a1: code.coding[0].system is not a string",
            id="an allergen coding's system",
        ),
        pytest.param(
            ALLERGY,
            ("patient", "reference"),
            7,
            "AllergyIntolerance/a1: patient.reference is not a string",
            id="the patient reference",
        ),
        pytest.param(
            ALLERGY,
            ("reaction", 0, "manifestation", 0, "text"),
            3,
            "AllergyIntolerance/a1: reaction[0].manifestation[0].text is not a string "
            "(imported without it)",
            id="a reaction's manifestation, left out",
        ),
        pytest.param(
            ORDER,
            ("subject", "reference"),
            7,
            "MedicationRequest/rx1: subject.reference is not a string",
            id="the subject reference",
        ),
        pytest.param(
            ORDER,
            ("medicationReference", "reference"),
            7,
            "MedicationRequest/rx1: medicationReference.reference is not a string",
            id="the medication reference",
        ),
        pytest.param(
            ORDER,
            ("dosageInstruction", 0, "route"),
            "PO",
            "MedicationRequest/rx1: dosageInstruction[0].route is not a JSON object "
            "(imported without it)",
            id="a route sent as a string, left out",
        ),
        pytest.param(
            MEDICATION,
            ("code", "coding"),
            [{"system": "x", "code": 5}],
            "MedicationRequest/rx1: the Medication Medication/m1: code.coding[0].code is not a "
            "string",
            id="a referenced Medication's code names that Medication",
        ),
        pytest.param(
            PATIENT,
            ("address", 0, "period"),
            "2001",
            "Patient/p1: address.period is not a JSON object",
            id="an address period sent as a string names the period, not its start",
        ),
    ],
)
def test_the_message_names_the_part_by_its_path(
    resource: dict[str, Any], path: tuple[str | int, ...], value: Any, message: str
) -> None:
    resources = [PATIENT, ALLERGY, ORDER, MEDICATION]
    broken = [with_value(r, path, value) if r is resource else r for r in resources]
    assert message in messages(run(*broken))


@pytest.mark.parametrize("spelling", ["bundle", "BUNDLE", "Bun dle"])
def test_a_bundle_misspelt_in_case_is_an_error_not_one_unsupported_resource(
    spelling: str,
) -> None:
    """A `"resourceType": "bundle"` must not drop every record it holds as one skipped
    "unsupported resource": the import fails for it and names the type meant."""
    bundle = {"resourceType": spelling, "type": "collection", "entry": [{"resource": ALLERGY}]}
    parsed = unpack(bundle, "test#0")
    for result in (import_fhir(parsed, CONTEXT), import_fhir(without_unmapped(parsed), CONTEXT)):
        assert result.skipped == []
        (error,) = result.errors
        assert error.reason == "not_a_resource"
        assert "did you mean Bundle?" in error.message
