"""An unreadable optional part of a record is left out with a notice; the record is kept.

A criticality "severe" or a category "drug" (C-CDA conversions write them), a reaction or a
note sent as an object: none of them identifies the allergen or the drug, so none may cost the
allergy or the order, and so the alert."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from schemas.events import (
    AllergyRecorded,
    ClinicalStatus,
    MedicationPrescribed,
    Reaction,
    VerificationStatus,
)
from schemas.fhir.mapping import FhirImport, Skipped, combine, import_fhir, unpack
from streams.cli_app import app
from streams.fhir_files import skip_lines
from tests.unit.fhir.test_mapping import CONTEXT, PENICILLIN, changed

AMOXICILLIN_ORDER = {
    "resourceType": "MedicationRequest",
    "id": "rx1",
    "status": "active",
    "intent": "order",
    "subject": {"reference": "Patient/example"},
    "authoredOn": "2024-05-01",
    "medicationCodeableConcept": {"text": "Amoxicillin 500 MG Oral Capsule"},
}


def run(*resources: Any) -> FhirImport:
    return import_fhir(combine(unpack(r, f"test#{n}") for n, r in enumerate(resources)), CONTEXT)


def only(result: FhirImport) -> Any:
    assert result.errors == []
    (pair,) = result.events
    return pair[1].payload


@pytest.mark.parametrize(
    ("fields", "kept", "notice"),
    [
        pytest.param(
            {"criticality": "severe"},
            {"criticality": None},
            "criticality 'severe' is not one of high, low, unable-to-assess",
            id="a criticality outside the value set",
        ),
        pytest.param(
            {"category": ["drug"]},
            {"categories": ()},
            "category 'drug' is not one of",
            id="a category outside the value set",
        ),
        pytest.param(
            {"type": "adverse reaction"},
            {"allergy_type": None},
            "type 'adverse reaction' is not one of allergy, intolerance",
            id="a type outside the value set",
        ),
        pytest.param(
            {"note": {"text": "seen in clinic"}},
            {"note": None},
            "note is not a list of objects",
            id="a note sent as an object",
        ),
        pytest.param(
            {"reaction": {"manifestation": [{"text": "Hives"}]}},
            {"reactions": ()},
            "reaction is not a list of objects",
            id="a reaction sent as an object",
        ),
        pytest.param(
            {"reaction": [{"manifestation": [{"text": "Hives"}], "severity": "serious"}]},
            {"reactions": (Reaction(manifestation="Hives"),)},
            "reaction[0].severity 'serious' is not one of mild, moderate, severe",
            id="a reaction severity outside the value set",
        ),
        pytest.param(
            {"reaction": [{"manifestation": {"text": "Hives"}, "severity": "severe"}]},
            {
                "reactions": (
                    Reaction(manifestation="unspecified manifestation", severity="severe"),
                )
            },
            "manifestation is not a list of objects",
            id="a manifestation sent as an object",
        ),
        pytest.param(
            {"reaction": [None, {"manifestation": [{"text": "Anaphylaxis"}]}]},
            {"reactions": (Reaction(manifestation="Anaphylaxis"),)},
            "reaction[0] is not an object",
            id="a null reaction before the anaphylaxis, which is kept",
        ),
        pytest.param(
            {"reaction": [{"manifestation": [None, {"text": "Anaphylaxis"}]}]},
            {"reactions": (Reaction(manifestation="Anaphylaxis"),)},
            "reaction[0].manifestation[0] is not an object",
            id="a null manifestation before the anaphylaxis, which is kept",
        ),
    ],
)
def test_an_allergy_with_an_unreadable_optional_part_is_kept_without_it(
    fields: dict[str, Any], kept: dict[str, Any], notice: str
) -> None:
    result = run(changed(PENICILLIN, **fields))
    payload = only(result)
    assert isinstance(payload, AllergyRecorded)
    assert payload.substance == "Penicillin G"
    assert {name: getattr(payload, name) for name in kept} == kept
    (passed,) = result.passed_over
    assert passed.origin == "test#0"
    assert passed.message.startswith("AllergyIntolerance/medication: ")
    assert notice in passed.message
    assert passed.message.endswith("(imported without it)")


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"dosageInstruction": {"text": "1 capsule tds"}}, id="dosage as an object"),
        pytest.param({"note": {"text": "for the chest"}}, id="note as an object"),
    ],
)
def test_an_order_with_an_unreadable_optional_part_is_kept_without_it(
    fields: dict[str, Any],
) -> None:
    result = run({**AMOXICILLIN_ORDER, **fields})
    payload = only(result)
    assert isinstance(payload, MedicationPrescribed)
    assert (payload.drug, payload.dose, payload.note) == (
        "Amoxicillin 500 MG Oral Capsule",
        None,
        None,
    )
    assert [passed.message.split(": ")[0] for passed in result.passed_over] == [
        "MedicationRequest/rx1"
    ]


def test_a_readable_record_has_nothing_passed_over() -> None:
    assert run(PENICILLIN, AMOXICILLIN_ORDER).passed_over == []


@pytest.mark.parametrize(
    ("clinical", "verification", "expected"),
    [
        pytest.param(
            "active",
            "confirmed",
            (ClinicalStatus.ACTIVE, VerificationStatus.CONFIRMED),
            id="bare codes of DSTU2/STU3",
        ),
        pytest.param(
            {
                "coding": [{"system": "http://hospital.example/status", "code": "A"}],
                "text": "Active",
            },
            {"coding": [{"system": "http://hospital.example/ver", "code": "R"}], "text": "Refuted"},
            (ClinicalStatus.ACTIVE, VerificationStatus.REFUTED),
            id="local codes with the status in the text",
        ),
    ],
)
def test_statuses_written_the_older_or_local_way_are_read(
    clinical: Any, verification: Any, expected: tuple[ClinicalStatus, VerificationStatus]
) -> None:
    payload = only(
        run(changed(PENICILLIN, clinicalStatus=clinical, verificationStatus=verification))
    )
    assert (payload.clinical_status, payload.verification_status) == expected


def test_a_local_status_code_whose_text_names_no_status_is_still_an_error() -> None:
    status = {"coding": [{"system": "http://hospital.example/status", "code": "A"}], "text": "Yes"}
    result = run(changed(PENICILLIN, clinicalStatus=status))
    assert result.events == []
    (error,) = result.errors
    assert "clinicalStatus 'A' is not one of" in error.message


def test_the_allergy_kept_without_its_criticality_still_alerts_and_the_notice_is_shown(
    tmp_path: Path,
) -> None:
    bundle = {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [
            {"resource": changed(PENICILLIN, criticality="severe")},
            {"resource": AMOXICILLIN_ORDER},
        ],
    }
    path = tmp_path / "export.json"
    path.write_text(json.dumps(bundle), encoding="utf-8")
    result = CliRunner().invoke(app, ["replay", "--format", "fhir", "--file", str(path), "--json"])
    assert result.exit_code == 0, result.output
    (subject,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert [alert["status"] for alert in subject["alerts"]] == ["raised"]
    assert "export.json#entry[0]: AllergyIntolerance/medication: criticality 'severe'" in (
        result.stderr
    )


def test_skipped_resources_are_named_per_reason_most_frequent_first() -> None:
    proposals = [
        Skipped(f"orders.json#entry[{n}]", "MedicationRequest", f"rx{n}", "intent proposal")
        for n in range(5)
    ]
    draft = Skipped("orders.json#entry[9]", "MedicationRequest", "rx9", "status draft")
    assert skip_lines([draft, *proposals]) == [
        "skipped 5 resource(s): intent proposal (MedicationRequest/rx0 at orders.json#entry[0], "
        "MedicationRequest/rx1 at orders.json#entry[1], MedicationRequest/rx2 at "
        "orders.json#entry[2] and 2 more)",
        "skipped 1 resource(s): status draft (MedicationRequest/rx9 at orders.json#entry[9])",
    ]


@pytest.mark.parametrize(
    ("holder", "held", "article", "imported"),
    [
        pytest.param(
            AMOXICILLIN_ORDER,
            PENICILLIN,
            "an",
            {"MedicationPrescribed"},
            id="an allergy in an order",
        ),
        pytest.param(
            {"resourceType": "Patient", "id": "example", "address": [{"country": "NL"}]},
            AMOXICILLIN_ORDER,
            "a",
            {"FactAsserted"},
            id="an order inside the patient",
        ),
    ],
)
def test_a_record_contained_in_a_record_that_is_read_is_named_not_dropped(
    holder: dict[str, Any], held: dict[str, Any], article: str, imported: set[str]
) -> None:
    """Only a Medication is read from `contained`: an allergy or an order held there is not
    imported, and the import says so instead of leaving the allergy list silently short."""
    result = run({**holder, "contained": [{**held, "id": "inner"}]})
    assert {type(event.payload).__name__ for _, event in result.events} == imported
    (passed,) = result.passed_over
    assert passed.message == (
        f"{holder['resourceType']}/{holder['id']}: it holds {article} {held['resourceType']} "
        "(#inner) in contained, which is not read from inside another resource; send it as a "
        "resource of its own"
    )
