"""A `resourceType` that names no FHIR R4 resource (a typo, a DSTU2 name, a made-up one) is an
error: skipped as "unsupported", a misspelt allergy was lost while the import said it
succeeded. A real R4 type UaC does not import stays a skip, and so does a type of a later
release (R4B, R5), which an R4 export mixed with newer data may hold."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.events import AllergyRecorded
from schemas.fhir.mapping import (
    MAPPED_TYPES,
    FhirImport,
    combine,
    import_fhir,
    unpack,
    without_unmapped,
)
from schemas.fhir.resource_types import LATER_RESOURCE_TYPES, R4_RESOURCE_TYPES
from tests.unit.fhir.test_mapping import CONTEXT, RXNORM

ALLERGY: dict[str, Any] = {
    "resourceType": "AllergyIntolerance",
    "id": "a1",
    "patient": {"reference": "Patient/p1"},
    "code": {"coding": [{"system": RXNORM, "code": "7980", "display": "Penicillin G"}]},
    "recordedDate": "2024-03-01",
}
PATIENT: dict[str, Any] = {"resourceType": "Patient", "id": "p1"}


def holding(*resources: dict[str, Any]) -> dict[str, Any]:
    return {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [{"resource": r} for r in resources],
    }


def both_ways(*resources: dict[str, Any]) -> list[FhirImport]:
    """The import of the resources as mapped whole, and as files are read (resources of a type
    no mapper reads dropped while reading)."""
    parsed = combine(unpack(r, f"bundle.json#entry[{n}]") for n, r in enumerate(resources))
    return [import_fhir(parsed, CONTEXT), import_fhir(without_unmapped(parsed), CONTEXT)]


@pytest.mark.parametrize(
    ("written", "hint"),
    [
        pytest.param(
            "AllergyIntolerence",
            " (did you mean AllergyIntolerance?)",
            id="given a misspelt allergy then the type meant is suggested",
        ),
        pytest.param(
            "AlergyIntolerance",
            " (did you mean AllergyIntolerance?)",
            id="given a letter missing then the type meant is suggested",
        ),
        pytest.param(
            "MedicationOrder",
            " (a DSTU2 name: R4 calls it MedicationRequest)",
            id="given DSTU2's MedicationOrder then R4's name for it",
        ),
        pytest.param(
            "Patinet",
            " (did you mean Patient?)",
            id="given two letters swapped then the type meant is suggested",
        ),
        pytest.param("Foo", "", id="given a made-up type then no suggestion"),
        pytest.param("Resource", "", id="given an abstract type then no suggestion"),
    ],
)
def test_a_resource_type_that_is_no_r4_type_is_an_error_naming_it(written: str, hint: str) -> None:
    for result in both_ways({**ALLERGY, "resourceType": written}):
        assert (result.events, result.skipped) == ([], [])
        (error,) = result.errors
        assert (error.origin, error.reason) == ("bundle.json#entry[0]", "not_a_resource")
        assert error.message == (
            f"{written}/a1: resourceType '{written}' is not a FHIR R4 resource type{hint}"
        )


def test_a_misspelt_record_fails_alone_and_the_others_are_imported() -> None:
    misspelt = {**ALLERGY, "id": "a2", "resourceType": "AllergyIntolerence"}
    for result in both_ways(ALLERGY, misspelt):
        assert [type(event.payload) for _, event in result.events] == [AllergyRecorded]
        assert [error.origin for error in result.errors] == ["bundle.json#entry[1]"]


@pytest.mark.parametrize(
    "resource_type", sorted(R4_RESOURCE_TYPES - MAPPED_TYPES - {"Bundle", "OperationOutcome"})
)
def test_every_r4_type_not_imported_is_skipped_as_unsupported_as_before(
    resource_type: str,
) -> None:
    for result in both_ways({"resourceType": resource_type, "id": "x1"}):
        assert (result.events, result.errors) == ([], [])
        assert [skip.reason for skip in result.skipped] == [
            f"unsupported resource type {resource_type}"
        ]


@pytest.mark.parametrize("resource_type", sorted(LATER_RESOURCE_TYPES))
def test_a_type_of_a_later_release_is_skipped_and_said_to_be_one(resource_type: str) -> None:
    for result in both_ways({"resourceType": resource_type, "id": "x1"}):
        assert (result.events, result.errors) == ([], [])
        assert [skip.reason for skip in result.skipped] == [
            f"unsupported resource type {resource_type} (of a later FHIR release than R4)"
        ]


def test_an_r5_shaped_allergy_is_still_read_beside_an_r5_resource() -> None:
    r5_allergy = {
        **ALLERGY,
        "type": {"coding": [{"code": "allergy"}]},
        "reaction": [{"manifestation": [{"concept": {"text": "hives"}}]}],
    }
    permission = {"resourceType": "Permission", "id": "perm1", "status": "active"}
    for result in both_ways(r5_allergy, permission):
        assert result.errors == []
        (allergy,) = (event.payload for _, event in result.events)
        assert isinstance(allergy, AllergyRecorded)
        assert allergy.reactions[0].manifestation == "hives"
        assert [skip.resource_type for skip in result.skipped] == ["Permission"]


@pytest.mark.parametrize(
    ("resource", "said"),
    [
        pytest.param(
            {
                "resourceType": "Condition",
                "id": "c1",
                "code": {"coding": [{"display": "Allergy to penicillin (finding)"}]},
            },
            "unsupported resource type Condition: it records an allergy ('Allergy to penicillin "
            "(finding)'), which is read from an AllergyIntolerance only; send it as one",
            id="given a Condition recording an allergy then its skip says so",
        ),
        pytest.param(
            {"resourceType": "Condition", "id": "c2", "code": {"text": "Latex allergy"}},
            "unsupported resource type Condition: it records an allergy ('Latex allergy'), which "
            "is read from an AllergyIntolerance only; send it as one",
            id="given a Condition named 'X allergy' then its skip says so",
        ),
        pytest.param(
            {
                "resourceType": "Condition",
                "id": "c3",
                "code": {"text": "Seasonal allergic rhinitis"},
            },
            "unsupported resource type Condition",
            id="given an allergic disease then a plain skip",
        ),
        pytest.param(
            {"resourceType": "List", "id": "l1", "contained": [ALLERGY]},
            "unsupported resource type List: it holds an AllergyIntolerance (at contained[0]), "
            "which is not read from inside another resource; send it as a resource of its own",
            id="given a List holding an allergy then its skip says so",
        ),
        pytest.param(
            {"resourceType": "Parameters", "parameter": [{"name": "a", "resource": ALLERGY}]},
            "unsupported resource type Parameters: it holds an AllergyIntolerance (at "
            "parameter[0].resource), which is not read from inside another resource; send it "
            "as a resource of its own",
            id="given Parameters holding an allergy then its skip says so",
        ),
        pytest.param(
            {
                "resourceType": "List",
                "id": "meds",
                "contained": [
                    {
                        "resourceType": "MedicationStatement",
                        "id": "s1",
                        "status": "active",
                        "medicationCodeableConcept": {"text": "amoxicillin 500 mg"},
                        "subject": {"reference": "Patient/p1"},
                    }
                ],
            },
            "unsupported resource type List: it holds a MedicationStatement (at contained[0]), "
            "which is not read from inside another resource; send it as a resource of its own",
            id="given a medication List holding a statement then its skip says so",
        ),
        pytest.param(
            {
                "resourceType": "Parameters",
                "parameter": [{"name": "a", "resource": {"resourceType": "Patient", "id": "p1"}}],
            },
            "unsupported resource type Parameters",
            id="given Parameters holding only a Patient then a plain skip",
        ),
    ],
)
def test_a_skipped_resource_that_records_an_allergy_or_a_drug_says_so(
    resource: dict[str, Any], said: str
) -> None:
    """Not lost among hundreds of skips of its type: an amoxicillin order would raise nothing."""
    for imported in both_ways(resource):
        assert [skip.reason for skip in imported.skipped] == [said]


@pytest.mark.parametrize(
    ("resource", "where"),
    [
        pytest.param(
            {
                "resourceType": "Parameters",
                "parameter": [{"name": "return", "resource": holding(PATIENT, ALLERGY)}],
            },
            "parameter[0].resource.entry[1].resource",
            id="given Parameters returning a Bundle holding an allergy then its skip says so",
        ),
        pytest.param(
            {
                "resourceType": "Parameters",
                "parameter": [
                    {"name": "count", "valueInteger": 1},
                    {
                        "name": "result",
                        "part": [
                            {
                                "name": "match",
                                "resource": holding(holding(PATIENT), holding(ALLERGY)),
                            }
                        ],
                    },
                ],
            },
            "parameter[1].part[0].resource.entry[1].resource.entry[0].resource",
            id="given an allergy in Bundles nested in a part of Parameters then its path is named",
        ),
        pytest.param(
            {"resourceType": "Parameters", "parameter": {"name": "x", "resource": ALLERGY}},
            "parameter.resource",
            id="given a parameter sent as one object then the allergy in it is still named",
        ),
        pytest.param(
            {
                "resourceType": "List",
                "id": "l1",
                "entry": [None, 5],
                "contained": [None, "x", ALLERGY],
            },
            "contained[2]",
            id="given a List whose lists hold null and numbers then the allergy is named",
        ),
    ],
)
def test_an_allergy_held_at_any_depth_of_a_skipped_resource_is_named_in_its_skip(
    resource: dict[str, Any], where: str
) -> None:
    """A $everything-style answer wrapped in Parameters was skipped as "unsupported resource
    type Parameters", with no word of the allergy and the order inside."""
    for imported in both_ways(resource):
        assert imported.errors == []
        ((skip),) = imported.skipped
        assert f": it holds an AllergyIntolerance (at {where}), which is not read" in skip.reason


@pytest.mark.parametrize(
    "resource",
    [
        pytest.param(
            {"resourceType": "Observation", "id": "o1", "contained": [None]},
            id="given a skipped Observation whose contained holds null then a plain skip",
        ),
        pytest.param(
            {"resourceType": "Parameters", "parameter": [{"resource": "Bundle"}, {"part": {}}]},
            id="given Parameters whose parts are of the wrong type then a plain skip",
        ),
        pytest.param(
            {
                "resourceType": "Parameters",
                "parameter": [
                    {"resource": {"resourceType": "Bundle", "entry": [None, {"resource": 1}]}}
                ],
            },
            id="given a Bundle in Parameters whose entries are not objects then a plain skip",
        ),
    ],
)
def test_a_skipped_resource_of_a_malformed_shape_is_skipped_not_a_crash(
    resource: dict[str, Any],
) -> None:
    """A `contained: [null]` in a skipped Observation aborted the whole import."""
    for imported in both_ways(resource):
        assert imported.errors == []
        assert [skip.reason for skip in imported.skipped] == [
            f"unsupported resource type {resource['resourceType']}"
        ]
