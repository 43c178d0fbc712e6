"""Patients merged at the source (`Patient.link`): the records naming a patient that another
replaces are filed under the patient replacing it, with one line per replaced patient, and a
replacement that cannot be followed makes its records errors rather than filed under a patient
guessed. Before, a replaced patient kept its allergy while its successor got the order, and
no alert was raised."""

from __future__ import annotations

from itertools import permutations
from typing import Any

import pytest

from schemas.events import AllergyRecorded, MedicationPrescribed
from schemas.fhir.mapping import FhirImport
from tests.unit.fhir.test_clinical_scenarios import (
    drug_allergy_alerts,
    fold,
    subject,
    submitted_from,
)
from tests.unit.fhir.test_references import (
    bundle,
    entry,
    order,
    patient,
    penicillin_allergy,
    run,
    subjects,
)

AMOXICILLIN = {"text": "amoxicillin 500 mg"}


def linked(identifier: str, *links: tuple[str, str], active: bool = True) -> dict[str, Any]:
    return {
        **patient(identifier),
        "active": active,
        "link": [{"other": {"reference": other}, "type": kind} for kind, other in links],
    }


def amoxicillin_order(patient_reference: str, order_id: str = "rx1") -> dict[str, Any]:
    return order(patient_reference, order_id, medicationCodeableConcept=AMOXICILLIN)


def notices(result: FhirImport) -> list[tuple[str, str, str]]:
    return [(line.origin, line.source_ref, line.detail) for line in result.passed_over]


OLD = linked("old", ("replaced-by", "Patient/new"), active=False)
NEW = linked("new", ("replaces", "Patient/old"))


def test_a_replaced_patients_allergy_meets_the_order_of_the_patient_replacing_it() -> None:
    resources = [OLD, NEW, penicillin_allergy("Patient/old"), amoxicillin_order("Patient/new")]
    result = run(*resources)
    assert result.errors == []
    assert subjects(result) == {"new"}
    assert notices(result) == [
        (
            "file0",
            "Patient/old",
            "replaced by Patient/new at the source (Patient.link): its 1 record(s) are filed "
            "under Patient/new (AllergyIntolerance/a1)",
        )
    ]
    assert {skip.resource_id: skip.reason for skip in result.skipped} == {
        "old": "Patient replaced by another at the source (Patient.link): no longer used, the "
        "records naming it are filed under the patient replacing it",
        "new": "Patient without an address country: no home_country fact (the records naming it "
        "are still imported)",
    }
    (alert,) = drug_allergy_alerts(subject(fold(submitted_from(resources)), "new"))
    assert alert.drug_allergy is not None
    assert (alert.drug_allergy.allergy_id, alert.drug_allergy.prescription_id) == ("a1", "rx1")


@pytest.mark.parametrize(
    "patients",
    [
        pytest.param([OLD], id="given only the replaced patient's replaced-by link"),
        pytest.param([NEW], id="given only the replacing patient's replaces link"),
    ],
)
def test_either_side_of_the_link_merges_the_patients(patients: list[dict[str, Any]]) -> None:
    result = run(*patients, penicillin_allergy("Patient/old"), amoxicillin_order("Patient/new"))
    assert result.errors == []
    assert subjects(result) == {"new"}
    (line,) = notices(result)
    assert line[1:] == (
        "Patient/old",
        "replaced by Patient/new at the source (Patient.link): its 1 record(s) are filed under "
        "Patient/new (AllergyIntolerance/a1)",
    )


def test_a_chain_of_replacements_is_followed_to_its_end_whatever_the_order_of_the_files() -> None:
    chain = [
        linked("old", ("replaced-by", "Patient/mid")),
        linked("mid", ("replaced-by", "Patient/new"), ("replaces", "Patient/old")),
        linked("new", ("replaces", "Patient/mid")),
        penicillin_allergy("Patient/old"),
        amoxicillin_order("Patient/mid"),
        amoxicillin_order("Patient/new", "rx2"),
    ]
    outcomes = set()
    for ordered in permutations(chain):
        result = run(*ordered)
        assert result.errors == []
        outcomes.add(
            (
                frozenset(subjects(result)),
                frozenset(detail for _, _, detail in notices(result)),
            )
        )
    assert outcomes == {
        (
            frozenset({"new"}),
            frozenset(
                {
                    "replaced by Patient/mid, then Patient/new at the source (Patient.link): its "
                    "1 record(s) are filed under Patient/new (AllergyIntolerance/a1)",
                    "replaced by Patient/new at the source (Patient.link): its 1 record(s) are "
                    "filed under Patient/new (MedicationRequest/rx1)",
                }
            ),
        )
    }


def test_a_replaced_patient_named_by_identifier_or_urn_is_filed_under_its_successor() -> None:
    old = {
        **linked("old", ("replaced-by", "Patient/new")),
        "identifier": [{"system": "urn:mrn", "value": "123"}],
    }
    by_identifier = {
        **penicillin_allergy("Patient/x"),
        "patient": {"identifier": {"system": "urn:mrn", "value": "123"}},
    }
    result = run(
        bundle(entry(old, "urn:uuid:0a1b2c3d-0000-4000-8000-000000000001")),
        bundle(
            entry(by_identifier),
            entry(amoxicillin_order("urn:uuid:0a1b2c3d-0000-4000-8000-000000000001")),
            kind="transaction",
        ),
    )
    assert result.errors == []
    assert subjects(result) == {"new"}
    (line,) = notices(result)
    assert "its 2 record(s) are filed under Patient/new" in line[2]


def test_a_statement_of_the_successor_reports_on_the_replaced_patients_order() -> None:
    statement = {
        "resourceType": "MedicationStatement",
        "id": "ms1",
        "status": "active",
        "subject": {"reference": "Patient/new"},
        "basedOn": [{"reference": "MedicationRequest/rx1"}],
        "medicationCodeableConcept": AMOXICILLIN,
        "effectiveDateTime": "2024-06-01",
    }
    result = run(OLD, amoxicillin_order("Patient/old"), statement)
    assert [line.detail for line in result.passed_over] == [
        "replaced by Patient/new at the source (Patient.link): its 1 record(s) are filed under "
        "Patient/new (MedicationRequest/rx1)"
    ]
    prescriptions = {
        event.payload.prescription_id
        for _, event in result.events
        if isinstance(event.payload, MedicationPrescribed)
    }
    assert prescriptions == {"rx1"}


@pytest.mark.parametrize(
    ("patients", "why"),
    [
        pytest.param(
            [
                linked("old", ("replaced-by", "Patient/new")),
                linked("new", ("replaced-by", "Patient/old")),
            ],
            "is in a cycle of replacements at the source (Patient/old -> Patient/new -> "
            "Patient/old, Patient.link)",
            id="given a cycle then an error",
        ),
        pytest.param(
            [linked("old", ("replaced-by", "Patient/new"), ("replaced-by", "Patient/other"))],
            "is replaced by 2 patients at the source (Patient/new, Patient/other, Patient.link)",
            id="given two replaced-by targets then an error",
        ),
        pytest.param(
            [
                linked("old", ("replaced-by", "Patient/new")),
                linked("other", ("replaces", "Patient/old")),
            ],
            "is replaced by 2 patients at the source (Patient/new, Patient/other, Patient.link)",
            id="given a replaced-by and another patient's replaces then an error",
        ),
        pytest.param(
            [linked("old", ("replaced-by", "urn:uuid:0a1b2c3d-0000-4000-8000-00000000dead"))],
            "has a link that cannot be followed (link[0] (replaced-by): other.reference "
            "'urn:uuid:0a1b2c3d-0000-4000-8000-00000000dead' is the fullUrl of no Patient entry",
            id="given a replaced-by urn that is no entry then an error",
        ),
        pytest.param(
            [linked("old", ("replaced-by", "RelatedPerson/rp1"))],
            "has a link that cannot be followed (link[0] (replaced-by) names no Patient",
            id="given a replaced-by naming a RelatedPerson then an error",
        ),
        pytest.param(
            [
                linked("old", ("replaced-by", "Patient/mid")),
                linked("mid", ("replaced-by", "Patient/mid")),
            ],
            "is replaced by Patient/mid, whose replacement cannot be followed",
            id="given a chain through a patient replaced by itself then an error",
        ),
        pytest.param(
            [{**patient("old"), "link": [{"other": {"reference": "Patient/new"}}]}],
            "has a link that cannot be followed (link[0] type is missing)",
            id="given a link without a type then an error",
        ),
        pytest.param(
            [linked("old", ("merged-into", "Patient/new"))],
            "has a link that cannot be followed (link[0] type 'merged-into' is none of "
            "replaced-by, replaces, refer, seealso)",
            id="given a link type R4 does not have then an error",
        ),
    ],
)
def test_a_replacement_that_cannot_be_followed_makes_the_records_errors_naming_the_patient(
    patients: list[dict[str, Any]], why: str
) -> None:
    result = run(*patients, penicillin_allergy("Patient/old"))
    assert not any(isinstance(event.payload, AllergyRecorded) for _, event in result.events)
    errors = {error.origin: error for error in result.errors}
    allergy_error = errors[f"file{len(patients)}"]
    assert allergy_error.reason == "unresolved_reference"
    assert allergy_error.message.startswith(f"AllergyIntolerance/a1: Patient/old {why}")
    assert errors["file0"].message.startswith("Patient/old: Patient/old ")


def test_a_replacement_on_another_server_is_not_followed() -> None:
    old = linked("old", ("replaced-by", "https://other.example/fhir/Patient/new"))
    result = run(
        bundle(entry(old, "https://hospital.example/fhir/Patient/old")),
        bundle(
            entry(
                penicillin_allergy("Patient/old"),
                "https://hospital.example/fhir/AllergyIntolerance/a1",
            )
        ),
    )
    assert result.events == []
    assert "names a patient on another server (other.example/fhir)" in result.errors[-1].message


@pytest.mark.parametrize("kind", ["refer", "seealso"])
def test_refer_and_seealso_links_merge_nothing(kind: str) -> None:
    result = run(
        linked("old", (kind, "Patient/new")),
        penicillin_allergy("Patient/old"),
        amoxicillin_order("Patient/new"),
    )
    assert result.errors == []
    assert subjects(result) == {"old", "new"}
    assert result.passed_over == []


@pytest.mark.parametrize("kind", ["Replaced-By", "replaced_by", "REPLACED BY"])
def test_a_link_type_in_other_letters_merges_the_patients(kind: str) -> None:
    resources = [
        linked("old", (kind, "Patient/new")),
        patient("new"),
        penicillin_allergy("Patient/old"),
        amoxicillin_order("Patient/new"),
    ]
    result = run(*resources)
    assert result.errors == []
    assert subjects(result) == {"new"}
    assert len(drug_allergy_alerts(subject(fold(submitted_from(resources)), "new"))) == 1


def test_a_replaces_link_whose_patient_cannot_be_told_is_reported_and_read_past() -> None:
    new = linked("new", ("replaces", "urn:uuid:0a1b2c3d-0000-4000-8000-00000000beef"))
    result = run(new, amoxicillin_order("Patient/new"))
    assert result.errors == []
    assert subjects(result) == {"new"}
    ((origin, record, detail),) = notices(result)
    assert (origin, record) == ("file0", "Patient/new")
    assert detail.endswith("which patient it replaces cannot be told (read past)")


MRN = [{"system": "urn:oid:1.2.3.4", "value": "MRN123"}]


def test_two_patients_with_one_identifier_stay_two_subjects_and_are_named() -> None:
    """One MRN under two resource ids, unlinked: the ids decide (two subjects, the allergy of
    one does not meet the order of the other), and a notice names both so that the split is
    seen; the value is not repeated in it."""
    first, second = ({**patient(name), "identifier": MRN} for name in ("p1", "p2"))
    result = run(first, second, penicillin_allergy("Patient/p1"), amoxicillin_order("Patient/p2"))
    assert subjects(result) == {"p1", "p2"}
    assert notices(result) == [
        (
            "file0",
            "Patient/p1",
            "it carries an identifier of system 'urn:oid:1.2.3.4' with the value Patient/p2 "
            "carries: filed as 2 subjects, as their ids say; if they are one person, send one "
            "Patient id, a conditional create (ifNoneExist: identifier=system|value) or a "
            "Patient.link",
        )
    ]
    assert all("MRN123" not in line.detail for line in result.passed_over)


@pytest.mark.parametrize("identifiers", ["MRN123", {"value": "MRN123"}, [MRN[0], "MRN123"]])
def test_a_patient_whose_identifiers_cannot_be_read_is_imported_and_reported(
    identifiers: object,
) -> None:
    """Identifiers that are not a list of objects are not compared with the other Patients'
    (a line says so); the patient and its records are imported all the same."""
    result = run({**patient("p1"), "identifier": identifiers}, penicillin_allergy("Patient/p1"))
    assert result.errors == []
    assert subjects(result) == {"p1"}
    assert notices(result) == [
        (
            "file0",
            "Patient/p1",
            "identifier is not a list of objects: not compared with other Patients' identifiers",
        )
    ]


def test_a_replaced_patient_sharing_the_identifier_of_its_replacement_is_no_split() -> None:
    old, new = ({**linked_patient, "identifier": MRN} for linked_patient in (OLD, NEW))
    result = run(old, new, penicillin_allergy("Patient/old"))
    assert subjects(result) == {"new"}
    assert [line.source_ref for line in result.passed_over] == ["Patient/old"]


def test_a_record_naming_a_patient_id_in_other_letters_is_filed_as_named_and_reported() -> None:
    """`Patient/P1` beside Patient `p1`: ids are case-sensitive, so the allergy is P1's, but it
    stood apart from p1's order, with no alert, without a word."""
    result = run(patient("p1"), penicillin_allergy("Patient/P1"), amoxicillin_order("Patient/p1"))
    assert result.errors == []
    assert subjects(result) == {"P1", "p1"}
    assert notices(result) == [
        (
            "file1",
            "Patient/P1",
            "named by 1 record(s) (AllergyIntolerance/a1), while the input set holds no Patient "
            "of this id but Patient/p1, whose id differs in letter case only: FHIR ids are "
            "case-sensitive, so they are filed under the patient as named, apart from "
            "Patient/p1; check the references at the source",
        )
    ]


def test_a_record_naming_a_patient_the_input_set_lacks_altogether_gives_no_such_line() -> None:
    result = run(penicillin_allergy("Patient/P1"), amoxicillin_order("Patient/p1"))
    assert result.errors == []
    assert notices(result) == []
