"""A drug or allergen whose words and code name different substances is reported, a line naming
the record: the knowledge layer judges the record by both (safe), but a clinician reads the
words. Before, an order coded as amoxicillin and written "Ibuprofen" gave the alert "Ibuprofen
conflicts with the recorded penicillin allergy" without a word."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from schemas.events import AllergyRecorded, MedicationPrescribed
from streams.cli_app import app
from streams.fhir_files import DrugNamesDiffer, FhirFiles, read_fhir_files
from tests.unit.fhir.test_mapping import EXAMPLES, FALLBACK, RXNORM, SNOMED

runner = CliRunner()
IBUPROFEN_CODED_AS_AMOXICILLIN = {
    "resourceType": "MedicationRequest",
    "id": "r1",
    "status": "active",
    "intent": "order",
    "subject": {"reference": "Patient/p1"},
    "authoredOn": "2024-02-01",
    "medicationCodeableConcept": {
        "text": "Ibuprofen",
        "coding": [{"system": RXNORM, "code": "723", "display": "Ibuprofen"}],
    },
}
SULFA_CODED_AS_PENICILLIN = {
    "resourceType": "AllergyIntolerance",
    "id": "a2",
    "patient": {"reference": "Patient/p1"},
    "recordedDate": "2024-01-01",
    "code": {
        "text": "Sulfa drugs",
        "coding": [{"system": SNOMED, "code": "91936005", "display": "Allergy to penicillin"}],
    },
}


def bundle_file(tmp_path: Path, *resources: dict[str, Any]) -> Path:
    path = tmp_path / "bundle.json"
    entries = [{"resource": resource} for resource in resources]
    path.write_text(json.dumps({"resourceType": "Bundle", "type": "collection", "entry": entries}))
    return path


def read(*paths: Path) -> FhirFiles:
    return read_fhir_files(paths, tenant_id="clinic-a", actor="fhir-import", fallback_time=FALLBACK)


def differing(files: FhirFiles) -> list[str]:
    return [note.message() for note in files.notes if isinstance(note, DrugNamesDiffer)]


def test_a_drug_and_an_allergen_whose_words_and_code_differ_are_reported_and_imported(
    tmp_path: Path,
) -> None:
    files = read(bundle_file(tmp_path, SULFA_CODED_AS_PENICILLIN, IBUPROFEN_CODED_AS_AMOXICILLIN))
    assert files.errors == []
    assert [type(item.event.payload) for item in files.submitted] == [
        AllergyRecorded,
        MedicationPrescribed,
    ]
    assert differing(files) == [
        "bundle.json#entry[0]: AllergyIntolerance/a2: code names different substances: 'Sulfa "
        "drugs' reads as sulfonamide antibiotics (arylamine sulfonamides), but its coding "
        "http://snomed.info/sct|91936005 is penicillins; the record is imported and checked "
        "against both, but it may be shown by the words: check at the source which is meant",
        "bundle.json#entry[1]: MedicationRequest/r1: medicationCodeableConcept names different "
        "substances: 'Ibuprofen' reads as ibuprofen, but its coding "
        "http://www.nlm.nih.gov/research/umls/rxnorm|723 is amoxicillin; the record is imported "
        "and checked against both, but it may be shown by the words: check at the source which "
        "is meant",
    ]


def test_an_official_example_whose_display_is_another_substance_than_its_code_is_reported() -> None:
    """HL7's R4 example medrx0329 names its contained Medication's ingredient "Salicyclic Acid"
    under SNOMED 396458002, hydrocortisone."""
    (line,) = differing(read(EXAMPLES / "MedicationRequest-medrx0329.json"))
    assert line.startswith(
        "MedicationRequest-medrx0329.json: MedicationRequest/medrx0329: the Medication #med0319: "
        "ingredient[1].itemCodeableConcept names different substances: 'Salicyclic Acid "
        "(substance)' reads as salicylic acid, but its coding http://snomed.info/sct|396458002 "
        "is hydrocortisone"
    )


def test_words_and_the_display_of_an_unknown_code_that_differ_are_reported_and_both_judged(
    tmp_path: Path,
) -> None:
    """An order written "Azithromycin" whose NDC (not one UaC lists) is displayed "Amoxicillin
    500 MG Oral Capsule": the display was read only when the text named nothing, so a
    penicillin allergy gave no alert and no line, though a pharmacy fills by the code."""
    order = {
        **IBUPROFEN_CODED_AS_AMOXICILLIN,
        "medicationCodeableConcept": {
            "text": "Azithromycin 250 mg tablet",
            "coding": [
                {
                    "system": "http://hl7.org/fhir/sid/ndc",
                    "code": "0093-3109-01",
                    "display": "Amoxicillin 500 MG Oral Capsule",
                }
            ],
        },
    }
    allergy = {**SULFA_CODED_AS_PENICILLIN, "code": {"text": "penicillin"}}
    files = read(bundle_file(tmp_path, allergy, order))
    (line,) = differing(files)
    assert (
        "'Azithromycin 250 mg tablet' reads as azithromycin, but its coding "
        "http://hl7.org/fhir/sid/ndc|0093-3109-01, displayed 'Amoxicillin 500 MG Oral Capsule', "
        "is amoxicillin; the record is imported and checked against both"
    ) in line
    result = runner.invoke(
        app, ["replay", "--file", str(tmp_path / "bundle.json"), "--format", "fhir", "--json"]
    )
    (subject,) = [json.loads(text) for text in result.stdout.splitlines() if text.startswith("{")]
    assert [(a["severity"], a["drug_allergy"]["matched"]) for a in subject["alerts"]] == [
        ("critical", ["amoxicillin"])
    ]


def test_a_known_code_and_the_display_of_another_unknown_code_are_both_judged(
    tmp_path: Path,
) -> None:
    """An order coded RxNorm ibuprofen and, in a second coding, a local code displayed
    "Amoxicillin 500 mg capsule": the line said both were checked, yet only the known code
    was, and a penicillin allergy raised nothing."""
    order = {
        **IBUPROFEN_CODED_AS_AMOXICILLIN,
        "medicationCodeableConcept": {
            "coding": [
                {"system": RXNORM, "code": "5640", "display": "Ibuprofen"},
                {
                    "system": "http://hospital.example/formulary",
                    "code": "F-17",
                    "display": "Amoxicillin 500 mg capsule",
                },
            ]
        },
    }
    allergy = {**SULFA_CODED_AS_PENICILLIN, "code": {"text": "penicillin"}}
    path = bundle_file(tmp_path, allergy, order)
    (line,) = differing(read(path))
    assert "checked against both" in line
    result = runner.invoke(app, ["replay", "--file", str(path), "--format", "fhir", "--json"])
    (subject,) = [json.loads(text) for text in result.stdout.splitlines() if text.startswith("{")]
    assert [(a["severity"], a["drug_allergy"]["matched"]) for a in subject["alerts"]] == [
        ("critical", ["amoxicillin"])
    ]


def test_words_and_codes_that_agree_are_not_reported(tmp_path: Path) -> None:
    agreeing = {
        **IBUPROFEN_CODED_AS_AMOXICILLIN,
        "medicationCodeableConcept": {
            "text": "Amoxicillin 500 mg capsule",
            "coding": [{"system": RXNORM, "code": "723", "display": "Amoxicillin"}],
        },
    }
    unknown_code = {
        **SULFA_CODED_AS_PENICILLIN,
        "code": {"text": "Sulfa drugs", "coding": [{"system": SNOMED, "code": "1"}]},
    }
    assert differing(read(bundle_file(tmp_path, agreeing, unknown_code))) == []


def test_replay_prints_the_line_and_keeps_exit_code_zero(tmp_path: Path) -> None:
    path = bundle_file(tmp_path, IBUPROFEN_CODED_AS_AMOXICILLIN)
    result = runner.invoke(app, ["replay", "--format", "fhir", "--json", "--file", str(path)])
    assert result.exit_code == 0
    assert "medicationCodeableConcept names different substances: 'Ibuprofen'" in result.stderr


def nka_coded(text: str, code: str = "716186003") -> dict[str, Any]:
    return {
        **SULFA_CODED_AS_PENICILLIN,
        "code": {"text": text, "coding": [{"system": SNOMED, "code": code}]},
    }


@pytest.mark.parametrize(
    ("allergy", "says"),
    [
        pytest.param(
            nka_coded("Penicillin allergy"),
            "'Penicillin allergy' reads as penicillins, but its coding "
            "http://snomed.info/sct|716186003 is no known allergy statement",
            id="given a 'no known allergy' code written as a penicillin allergy",
        ),
        pytest.param(
            nka_coded("Amoxicillin - hives", code="409137002"),
            "'Amoxicillin - hives' reads as amoxicillin, but its coding "
            "http://snomed.info/sct|409137002 is no known allergy statement",
            id="given a 'no known drug allergy' code written as an amoxicillin allergy",
        ),
        pytest.param(
            nka_coded("NKDA", code="91936005"),
            "'NKDA' reads as no known allergy statement, but its coding "
            "http://snomed.info/sct|91936005 is penicillins",
            id="given a penicillin allergy code written NKDA",
        ),
    ],
)
def test_an_allergy_whose_words_and_code_disagree_on_whether_there_is_one_is_an_error(
    tmp_path: Path, allergy: dict[str, Any], says: str
) -> None:
    """Before, the words of a "no known allergy" code were only a notice, and the record was
    imported as a negation: an active amoxicillin order raised nothing against an allergy its
    words named. Neither reading is safe to guess, as for a code that says both."""
    files = read(bundle_file(tmp_path, allergy, IBUPROFEN_CODED_AS_AMOXICILLIN))
    assert [type(item.event.payload) for item in files.submitted] == [MedicationPrescribed]
    assert [(e.origin, e.reason, e.message) for e in files.errors] == [
        (
            "bundle.json#entry[0]",
            "invalid_value",
            f"AllergyIntolerance/a2: code says both that there is no known allergy and that "
            f"there is one: {says}; one record cannot be both, so neither an allergy nor a "
            "negation is recorded: correct it at the source",
        )
    ]
    assert not any("AllergyIntolerance/a2" in line for line in differing(files))


def test_a_no_known_allergy_code_with_words_that_say_the_same_is_imported(tmp_path: Path) -> None:
    files = read(bundle_file(tmp_path, nka_coded("No known allergies"), nka_coded("NKA")))
    assert files.errors == []
    payloads = [item.event.payload for item in files.submitted]
    assert [isinstance(p, AllergyRecorded) and p.negated for p in payloads] == [True, True]
