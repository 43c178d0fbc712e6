"""FHIR references across an input set: which patient, which Medication version, which drug.

Each case is one an EHR export produces and where a wrong reading would move an allergy or a
drug to the wrong patient or the wrong substance without a word."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.events import AllergyRecorded, MedicationPrescribed
from schemas.fhir.mapping import FhirImport, ImportContext, combine, import_fhir, unpack
from tests.unit.fhir.test_mapping import CONTEXT, RXNORM, SNOMED

PATIENT_UUID = "7d5e1c8a-1111-4c2b-9a6e-0000000000aa"


def run(*documents: Any, context: ImportContext = CONTEXT) -> FhirImport:
    return import_fhir(combine(unpack(d, f"file{n}") for n, d in enumerate(documents)), context)


def entry(resource: dict[str, Any], full_url: str | None = None) -> dict[str, Any]:
    return (
        {"resource": resource} if full_url is None else {"fullUrl": full_url, "resource": resource}
    )


def bundle(*entries: dict[str, Any], kind: str = "collection") -> dict[str, Any]:
    return {"resourceType": "Bundle", "type": kind, "entry": list(entries)}


def patient(identifier: str) -> dict[str, Any]:
    return {"resourceType": "Patient", "id": identifier}


def penicillin_allergy(patient_reference: str, allergy_id: str = "a1") -> dict[str, Any]:
    return {
        "resourceType": "AllergyIntolerance",
        "id": allergy_id,
        "patient": {"reference": patient_reference},
        "code": {"coding": [{"system": RXNORM, "code": "7980", "display": "Penicillin G"}]},
        "verificationStatus": {"coding": [{"code": "confirmed"}]},
        "recordedDate": "2024-03-01",
    }


def order(patient_reference: str, order_id: str = "rx1", **medication: Any) -> dict[str, Any]:
    return {
        "resourceType": "MedicationRequest",
        "id": order_id,
        "status": "active",
        "intent": "order",
        "subject": {"reference": patient_reference},
        "authoredOn": "2024-05-01",
        **medication,
    }


def medication(
    medication_id: str, text: str, version: str | None = None, **fields: Any
) -> dict[str, Any]:
    resource: dict[str, Any] = {
        "resourceType": "Medication",
        "id": medication_id,
        "code": {"text": text},
    }
    if version is not None:
        resource["meta"] = {"versionId": version, "lastUpdated": "2024-04-01T00:00:00Z"}
    return {**resource, **fields}


def drugs(result: FhirImport) -> list[str]:
    return [
        event.payload.drug
        for _, event in result.events
        if isinstance(event.payload, MedicationPrescribed)
    ]


def subjects(result: FhirImport) -> set[str]:
    return {event.subject_id for _, event in result.events}


def test_an_upper_case_urn_uuid_names_the_same_patient_as_the_lower_case_one() -> None:
    result = run(
        bundle(
            entry(patient(PATIENT_UUID), f"urn:uuid:{PATIENT_UUID}"),
            entry(penicillin_allergy(f"urn:uuid:{PATIENT_UUID.upper()}")),
            entry(
                order(f"urn:uuid:{PATIENT_UUID}", medicationCodeableConcept={"text": "amoxicillin"})
            ),
        )
    )
    assert result.errors == []
    assert subjects(result) == {PATIENT_UUID}


@pytest.mark.parametrize(
    "reference",
    [
        pytest.param(f"urn:uuid:{PATIENT_UUID}", id="a urn:uuid"),
        pytest.param(f"urn:uuid:{PATIENT_UUID.upper()}", id="an upper-case urn:uuid"),
        pytest.param("urn:oid:1.2.840.99.7", id="a urn:oid"),
    ],
)
def test_a_urn_that_is_the_full_url_of_no_patient_entry_is_unresolved_not_a_new_subject(
    reference: str,
) -> None:
    result = run(
        bundle(
            entry(patient("p1"), f"urn:uuid:{PATIENT_UUID.replace('aa', 'bb')}"),
            entry(penicillin_allergy(reference)),
            entry(
                order(reference, medicationCodeableConcept={"text": "amoxicillin"}),
                "urn:uuid:5a0e9c1e-2222-4c2b-9a6e-0000000000cc",
            ),
            kind="transaction",
        )
    )
    assert result.events == []
    assert [error.reason for error in result.errors] == ["unresolved_reference"] * 2
    allergy_error, order_error = (error.message for error in result.errors)
    assert allergy_error.startswith(f"AllergyIntolerance/a1: patient.reference '{reference}'")
    assert order_error.startswith(f"MedicationRequest/rx1: subject.reference '{reference}'")
    assert "is the fullUrl of no Patient entry of the input set" in allergy_error


def test_a_urn_uuid_names_the_patient_whose_entry_another_file_of_the_set_holds() -> None:
    result = run(
        bundle(entry(patient("p7"), f"urn:uuid:{PATIENT_UUID}")),
        bundle(entry(penicillin_allergy(f"urn:uuid:{PATIENT_UUID}")), kind="transaction"),
    )
    assert result.errors == []
    assert subjects(result) == {"p7"}


def test_a_urn_uuid_names_a_patient_entry_without_an_id_by_its_uuid() -> None:
    nameless = {"resourceType": "Patient"}
    result = run(
        bundle(
            entry(nameless, f"urn:uuid:{PATIENT_UUID}"),
            entry(penicillin_allergy(f"urn:uuid:{PATIENT_UUID}")),
            kind="transaction",
        )
    )
    assert subjects(result) == {PATIENT_UUID}


def test_a_patient_id_that_is_no_fhir_id_is_an_error_never_merged_with_another() -> None:
    result = run(
        penicillin_allergy("Patient/a:b"),
        order("Patient/a-b", medicationCodeableConcept={"text": "amoxicillin"}),
    )
    assert [error.origin for error in result.errors] == ["file0"]
    assert "'Patient/a:b' names no valid Patient id" in result.errors[0].message
    assert subjects(result) == {"a-b"}
    assert not any(isinstance(e.payload, AllergyRecorded) for _, e in result.events)


@pytest.mark.parametrize("patient_id", ["x y", "p\u200b1", "x" * 65])
def test_patient_references_outside_the_fhir_id_shape_are_errors(patient_id: str) -> None:
    result = run(penicillin_allergy(f"Patient/{patient_id}"))
    assert result.events == []
    assert [error.reason for error in result.errors] == ["invalid_value"]
    assert "AllergyIntolerance/a1" in result.errors[0].message


@pytest.mark.parametrize("resource_id", ["a/1", "r 1", "x" * 65])
def test_a_record_whose_own_id_is_no_fhir_id_is_an_error_naming_it(resource_id: str) -> None:
    result = run(penicillin_allergy("Patient/p1", allergy_id=resource_id))
    assert result.events == []
    assert [error.reason for error in result.errors] == ["invalid_value"]
    assert f"AllergyIntolerance/{resource_id}" in result.errors[0].message


def test_a_medication_reference_names_the_newest_version_in_a_history_bundle() -> None:
    history = bundle(
        entry(medication("123", "Amoxicillin 500 MG Oral Capsule", version="2")),
        entry(medication("123", "Acetaminophen 325 MG Oral Tablet", version="1")),
        kind="history",
    )
    result = run(history, order("Patient/p1", medicationReference={"reference": "Medication/123"}))
    assert drugs(result) == ["Amoxicillin 500 MG Oral Capsule"]


TWO_VERSIONS = bundle(
    entry(medication("123", "Amoxicillin 500 MG Oral Capsule", version="2")),
    entry(medication("123", "Acetaminophen 325 MG Oral Tablet", version="1")),
    kind="history",
)


@pytest.mark.parametrize(
    "reference",
    [
        pytest.param("Medication/123/_history/1", id="given a relative reference to version 1"),
        pytest.param(
            "https://ehr.example/fhir/Medication/123/_history/1",
            id="given an absolute reference to version 1",
        ),
    ],
)
def test_a_reference_pinned_to_a_version_names_that_version_not_the_newest(reference: str) -> None:
    """The order was written for version 1's drug: reading version 2 checked another drug."""
    result = run(TWO_VERSIONS, order("Patient/p1", medicationReference={"reference": reference}))
    assert (result.errors, result.passed_over) == ([], [])
    assert drugs(result) == ["Acetaminophen 325 MG Oral Tablet"]


def test_a_reference_pinned_to_a_version_the_set_lacks_reads_the_newest_and_says_so() -> None:
    pinned = {"reference": "Medication/123/_history/7"}
    result = run(TWO_VERSIONS, order("Patient/p1", medicationReference=pinned))
    assert drugs(result) == ["Amoxicillin 500 MG Oral Capsule"]
    assert [part.message for part in result.passed_over] == [
        "MedicationRequest/rx1: the Medication Medication/123/_history/7: version 7 is not in "
        "the input set: version 2, the newest it holds, was read instead"
    ]


def test_an_ingredient_reference_pinned_to_a_version_names_that_version() -> None:
    admixture = medication(
        "bag",
        "Sodium chloride 0.9% infusion",
        ingredient=[{"itemReference": {"reference": "Medication/123/_history/1"}}],
    )
    reference = {"reference": "Medication/bag"}
    result = run(TWO_VERSIONS, admixture, order("Patient/p1", medicationReference=reference))
    assert (result.errors, result.passed_over) == ([], [])
    assert drugs(result) == ["Sodium chloride 0.9% infusion (Acetaminophen 325 MG Oral Tablet)"]


@pytest.mark.parametrize("newest_first", [True, False])
def test_a_medication_in_two_files_resolves_to_the_newer_whatever_the_file_order(
    newest_first: bool,
) -> None:
    older = medication("123", "Acetaminophen 325 MG Oral Tablet", version="1")
    newer = medication("123", "Amoxicillin 500 MG Oral Capsule", version="2")
    files = [newer, older] if newest_first else [older, newer]
    reference = {"reference": "Medication/123"}
    result = run(*files, order("Patient/p1", medicationReference=reference))
    assert drugs(result) == ["Amoxicillin 500 MG Oral Capsule"]


def test_two_different_medications_under_one_id_without_versions_are_an_error() -> None:
    result = run(
        medication("123", "Acetaminophen 325 MG Oral Tablet"),
        medication("123", "Amoxicillin 500 MG Oral Capsule"),
        order("Patient/p1", medicationReference={"reference": "Medication/123"}),
    )
    assert drugs(result) == []
    (error,) = result.errors
    assert error.reason == "unresolved_reference"
    assert "Medication/123" in error.message
    assert "cannot be told" in error.message


def test_two_medication_versions_that_nothing_orders_are_an_error_not_a_pick() -> None:
    """Same lastUpdated, versionIds that are not numbers: their text says nothing of which
    version is newer (it decided before, "abd" after "abc")."""
    result = run(
        medication("123", "Acetaminophen 325 MG Oral Tablet", version="abd"),
        medication("123", "Amoxicillin 500 MG Oral Capsule", version="abc"),
        order("Patient/p1", medicationReference={"reference": "Medication/123"}),
    )
    assert drugs(result) == []
    (error,) = result.errors
    assert error.reason == "unresolved_reference"
    assert "Medication/123 is given by two different resources" in error.message


def test_the_same_medication_given_twice_identically_is_no_ambiguity() -> None:
    copy = medication("123", "Amoxicillin 500 MG Oral Capsule")
    result = run(
        copy, dict(copy), order("Patient/p1", medicationReference={"reference": "Medication/123"})
    )
    assert result.errors == []
    assert drugs(result) == ["Amoxicillin 500 MG Oral Capsule"]


def test_both_medication_choices_in_one_order_are_an_error_not_a_silent_pick() -> None:
    result = run(
        medication("both", "Amoxicillin 500 MG Oral Capsule"),
        order(
            "Patient/p1",
            medicationCodeableConcept={"text": "Acetaminophen"},
            medicationReference={"reference": "Medication/both"},
        ),
    )
    assert drugs(result) == []
    (error,) = result.errors
    assert error.reason == "invalid_value"
    assert "medication[x] is given twice" in error.message


@pytest.mark.parametrize("value", ["true", 1, "false"])
def test_a_do_not_perform_that_is_not_a_boolean_is_an_error_never_an_order(value: object) -> None:
    resource = order("Patient/p1", medicationCodeableConcept={"text": "amoxicillin"})
    result = run({**resource, "doNotPerform": value})
    assert drugs(result) == []
    (error,) = result.errors
    assert error.reason == "invalid_value"
    assert "doNotPerform" in error.message


def test_an_ingredient_named_without_a_code_is_judged_with_the_medication_text() -> None:
    ward_stock = medication(
        "m1",
        "Ward stock suspension 5",
        ingredient=[{"itemCodeableConcept": {"text": "amoxicillin"}}],
    )
    result = run(
        ward_stock, order("Patient/p1", medicationReference={"reference": "Medication/m1"})
    )
    assert drugs(result) == ["Ward stock suspension 5 (amoxicillin)"]


def test_an_ingredient_the_text_already_names_is_not_repeated() -> None:
    named = medication(
        "m1",
        "Amoxicillin 250 mg/5 mL suspension",
        ingredient=[{"itemCodeableConcept": {"text": "amoxicillin"}}],
    )
    result = run(named, order("Patient/p1", medicationReference={"reference": "Medication/m1"}))
    assert drugs(result) == ["Amoxicillin 250 mg/5 mL suspension"]


def test_an_ingredient_given_by_reference_is_the_referenced_medication() -> None:
    amoxicillin = {
        "resourceType": "Medication",
        "id": "ing-amox",
        "code": {"coding": [{"system": RXNORM, "code": "723", "display": "amoxicillin"}]},
    }
    only_reference = {
        "resourceType": "Medication",
        "id": "m1",
        "ingredient": [{"itemReference": {"reference": "Medication/ing-amox"}}],
    }
    result = run(
        amoxicillin,
        only_reference,
        order("Patient/p1", medicationReference={"reference": "Medication/m1"}),
    )
    assert result.errors == []
    (event,) = [e for _, e in result.events if isinstance(e.payload, MedicationPrescribed)]
    assert isinstance(event.payload, MedicationPrescribed)
    assert event.payload.drug == "amoxicillin"
    assert [(c.system, c.code) for c in event.payload.codes] == [(RXNORM, "723")]


def test_a_no_known_allergy_code_next_to_a_substance_code_is_an_error_not_a_negation() -> None:
    allergy = penicillin_allergy("Patient/p1")
    allergy["code"]["coding"].insert(
        0, {"system": SNOMED, "code": "716186003", "display": "No known allergy"}
    )
    result = run(allergy)
    assert result.events == []
    (error,) = result.errors
    assert error.reason == "invalid_value"
    assert "Penicillin G" in error.message


def test_an_allergy_whose_patient_is_a_group_is_an_error() -> None:
    result = run(penicillin_allergy("Group/ward-3"))
    assert result.skipped == []
    (error,) = result.errors
    assert error.reason == "invalid_value"
    assert "Reference(Patient)" in error.message


def test_an_order_for_a_group_is_skipped_with_its_reason() -> None:
    result = run(order("Group/ward-3", medicationCodeableConcept={"text": "amoxicillin"}))
    assert result.errors == []
    assert [skip.reason for skip in result.skipped] == ["the subject is a Group, not a Patient"]


def test_a_resource_type_with_a_stray_space_is_an_error_with_the_type_meant() -> None:
    allergy = {**penicillin_allergy("Patient/p1"), "resourceType": "AllergyIntolerance "}
    result = run(allergy)
    assert result.skipped == []
    (error,) = result.errors
    assert "did you mean AllergyIntolerance?" in error.message


MRN = "urn:oid:1.2.36.146.595.217.0.1"


def test_a_conditional_patient_reference_of_a_transaction_names_the_patient_carrying_it() -> None:
    registered = {**patient("p1"), "identifier": [{"system": MRN, "value": "MRN-p1"}]}
    result = run(
        bundle(
            entry(registered),
            entry(penicillin_allergy(f"Patient?identifier={MRN}%7CMRN-p1")),
            kind="transaction",
        )
    )
    assert result.errors == []
    assert subjects(result) == {"p1"}


@pytest.mark.parametrize(
    ("reference", "says"),
    [
        (f"Patient?identifier={MRN}|MRN-unknown", "which no Patient of the input set carries"),
        ("Patient?name=Smith", "only Patient?identifier=system|value is resolved"),
    ],
)
def test_a_conditional_patient_reference_that_names_no_one_patient_is_an_error(
    reference: str, says: str
) -> None:
    result = run(penicillin_allergy(reference))
    assert result.events == []
    (error,) = result.errors
    assert error.reason == "unresolved_reference"
    assert says in error.message


def test_a_conditional_medication_reference_is_an_error_that_says_so() -> None:
    reference = {"reference": f"Medication?code={RXNORM}|308192"}
    result = run(
        medication("m1", "Amoxicillin 500 MG Oral Capsule"),
        order("Patient/p1", medicationReference=reference),
    )
    (error,) = result.errors
    assert "is a conditional reference" in error.message


@pytest.mark.parametrize("newest_last", [True, False])
def test_two_different_copies_of_an_old_version_do_not_hide_the_newest(newest_last: bool) -> None:
    copies = [
        medication("123", "Acetaminophen 325 MG Oral Tablet", version="1"),
        medication("123", "Ibuprofen 200 MG Oral Tablet", version="1"),
    ]
    newest = medication("123", "Amoxicillin 500 MG Oral Capsule", version="2")
    files = [*copies, newest] if newest_last else [newest, *copies]
    result = run(*files, order("Patient/p1", medicationReference={"reference": "Medication/123"}))
    assert result.errors == []
    assert drugs(result) == ["Amoxicillin 500 MG Oral Capsule"]


def test_a_contained_medication_whose_id_is_written_with_its_hash_is_found() -> None:
    contained = {
        "resourceType": "Medication",
        "id": "#m1",
        "code": {"text": "Amoxicillin 500 MG Oral Capsule"},
    }
    resource = order("Patient/p1", medicationReference={"reference": "#m1"})
    result = run({**resource, "contained": [contained]})
    assert result.errors == []
    assert drugs(result) == ["Amoxicillin 500 MG Oral Capsule"]


def test_a_version_id_of_thousands_of_digits_is_no_crash() -> None:
    huge = medication("123", "Amoxicillin 500 MG Oral Capsule", version="9" * 5000)
    result = run(huge, order("Patient/p1", medicationReference={"reference": "Medication/123"}))
    assert drugs(result) == ["Amoxicillin 500 MG Oral Capsule"]


HOSPITAL_A = "https://hospA.example/fhir"
HOSPITAL_B = "http://hospB.example/fhir"
AMOXICILLIN = {"coding": [{"system": RXNORM, "code": "723", "display": "Amoxicillin"}]}


def on_server(base: str, resource: dict[str, Any]) -> dict[str, Any]:
    return entry(resource, f"{base}/{resource['resourceType']}/{resource['id']}")


def error_reasons(result: FhirImport) -> list[tuple[str, str]]:
    return [(error.origin, error.reason) for error in result.errors]


def test_one_allergy_id_on_two_servers_is_an_error_for_both_never_a_move() -> None:
    """Hospital B's AllergyIntolerance/1 (another patient's) read as a later version of
    hospital A's: A's patient lost a penicillin allergy as 'moved to another patient'."""
    hospital_a = bundle(
        on_server(HOSPITAL_A, patient("1")),
        on_server(HOSPITAL_A, penicillin_allergy("Patient/1", allergy_id="1")),
    )
    peanut = penicillin_allergy("Patient/2", allergy_id="1") | {"code": {"text": "Peanut"}}
    hospital_b = bundle(on_server(HOSPITAL_B, patient("2")), on_server(HOSPITAL_B, peanut))
    result = run(hospital_a, hospital_b)
    assert error_reasons(result) == [
        ("file0#entry[1]", "invalid_value"),
        ("file1#entry[1]", "invalid_value"),
    ]
    assert (
        "AllergyIntolerance/1 is in the input set from 2 servers (hospa.example/fhir, "
        "hospb.example/fhir, as resources or references): ids are unique per server only"
        in result.errors[0].message
    )
    assert not [e for _, e in result.events if isinstance(e.payload, AllergyRecorded)]


def test_one_patient_id_on_two_servers_never_becomes_one_subject() -> None:
    """A's allergy alerted on B's prescription: both patients were subject '1'."""
    result = run(
        bundle(
            on_server(HOSPITAL_A, patient("1")),
            on_server(HOSPITAL_B, patient("1")),
            on_server(HOSPITAL_A, penicillin_allergy(f"{HOSPITAL_A}/Patient/1")),
            on_server(
                HOSPITAL_B,
                order(f"{HOSPITAL_B}/Patient/1", medicationCodeableConcept=AMOXICILLIN),
            ),
        )
    )
    assert result.events == []
    assert [error.reason for error in result.errors] == [
        "invalid_value",
        "invalid_value",
        "unresolved_reference",
        "unresolved_reference",
    ]
    assert result.errors[2].message.startswith(
        "AllergyIntolerance/a1: Patient/1 is in the input set from 2 servers"
    )


def test_patients_named_by_url_on_two_servers_are_an_error_without_their_patients() -> None:
    result = run(
        bundle(
            entry(penicillin_allergy(f"{HOSPITAL_A}/Patient/1")),
            entry(order(f"{HOSPITAL_B}/Patient/1", medicationCodeableConcept=AMOXICILLIN)),
        )
    )
    assert result.events == []
    assert [error.reason for error in result.errors] == ["unresolved_reference"] * 2


def test_a_relative_medication_reference_names_the_medication_of_its_own_server() -> None:
    """Hospital A's order for Medication/1 was read with hospital B's newer Medication/1."""
    hospital_a = bundle(
        on_server(
            HOSPITAL_A, order("Patient/1", medicationReference={"reference": "Medication/1"})
        ),
        on_server(HOSPITAL_A, medication("1", "Amoxicillin", version="1")),
    )
    acetaminophen = medication("1", "Acetaminophen", version="1")
    acetaminophen["meta"]["lastUpdated"] = "2025-01-01T00:00:00Z"
    hospital_b = bundle(on_server(HOSPITAL_B, acetaminophen))
    for documents in ((hospital_a, hospital_b), (hospital_b, hospital_a)):
        assert drugs(run(*documents)) == ["Amoxicillin"]


def test_a_reference_from_no_known_server_to_an_id_on_two_servers_is_an_error() -> None:
    result = run(
        bundle(
            on_server(HOSPITAL_A, medication("1", "Amoxicillin")),
            on_server(HOSPITAL_B, medication("1", "Acetaminophen")),
        ),
        order("Patient/1", medicationReference={"reference": "Medication/1"}),
    )
    assert drugs(result) == []
    [error] = result.errors
    assert error.reason == "unresolved_reference"
    assert "Medication/1 is in the input set from 2 servers" in error.message


@pytest.mark.parametrize(
    ("full_url", "reference"),
    [
        pytest.param(
            "http://h.example/fhir",
            "http://h.example:80/fhir",
            id="given http with its default port 80 written then one server",
        ),
        pytest.param(
            "https://h.example:443/fhir",
            "https://h.example/fhir",
            id="given https with its default port 443 on the fullUrl then one server",
        ),
        pytest.param(
            "http://H.example:/fhir",
            "https://h.example:0443/fhir",
            id="given an empty port and a default port with a leading zero then one server",
        ),
    ],
)
def test_a_url_with_its_default_port_written_names_the_same_server(
    full_url: str, reference: str
) -> None:
    """RFC 3986: `h.example:80` over http is `h.example`; read as two servers, every record
    naming the patient was refused."""
    result = run(
        bundle(
            entry(patient("p1"), f"{full_url}/Patient/p1"),
            entry(
                penicillin_allergy(f"{reference}/Patient/p1"), f"{full_url}/AllergyIntolerance/a1"
            ),
            entry(
                order(
                    f"{reference}/Patient/p1",
                    medicationReference={"reference": f"{reference}/Medication/m1"},
                ),
                f"{full_url}/MedicationRequest/rx1",
            ),
            entry(medication("m1", "Amoxicillin"), f"{full_url}/Medication/m1"),
        )
    )
    assert result.errors == []
    assert subjects(result) == {"p1"}
    assert drugs(result) == ["Amoxicillin"]


def test_another_port_of_one_host_is_another_server() -> None:
    result = run(
        bundle(
            entry(patient("p1"), "http://h.example/fhir/Patient/p1"),
            entry(penicillin_allergy("http://h.example:8080/fhir/Patient/p1")),
        )
    )
    assert [error.reason for error in result.errors] == ["invalid_value", "unresolved_reference"]
    assert "(h.example/fhir, h.example:8080/fhir" in result.errors[1].message


def test_one_unversioned_record_id_for_two_patients_is_an_error_not_one_event_id() -> None:
    """Both patients got AllergyIntolerance/a1 under one event id."""
    result = run(
        bundle(entry(penicillin_allergy("Patient/p1")), entry(penicillin_allergy("Patient/p2")))
    )
    assert result.events == []
    assert error_reasons(result) == [
        ("file0#entry[0]", "invalid_value"),
        ("file0#entry[1]", "invalid_value"),
    ]
    assert "name different patients: nothing says which is the record" in result.errors[0].message


def _record_of_a_drug(resource_type: str, field_name: str, reference: object) -> dict[str, Any]:
    timing = {"MedicationDispense": {"whenHandedOver": "2024-05-02"}}.get(
        resource_type, {"effectiveDateTime": "2024-05-02"}
    )
    return {
        "resourceType": resource_type,
        "id": "given1",
        "status": "completed",
        "subject": {"reference": "Patient/p2"},
        field_name: reference,
        "medicationCodeableConcept": AMOXICILLIN,
        **timing,
    }


@pytest.mark.parametrize(
    ("resource_type", "field_name", "reference"),
    [
        pytest.param(
            "MedicationStatement",
            "basedOn",
            [{"reference": "MedicationRequest/rx1"}],
            id="given a statement of patient p2 based on patient p1's order",
        ),
        pytest.param(
            "MedicationAdministration",
            "request",
            {"reference": "MedicationRequest/rx1"},
            id="given an administration to patient p2 under patient p1's order",
        ),
        pytest.param(
            "MedicationDispense",
            "authorizingPrescription",
            [{"reference": "MedicationRequest/rx1"}],
            id="given a dispense to patient p2 under patient p1's order",
        ),
    ],
)
def test_a_record_naming_another_patients_order_is_reported_and_a_course_of_its_own(
    resource_type: str, field_name: str, reference: object
) -> None:
    """Patient p2's record created prescription 'rx1' under p2 without a word."""
    record = _record_of_a_drug(resource_type, field_name, reference)
    result = run(order("Patient/p1", medicationCodeableConcept=AMOXICILLIN), record)
    given = [
        (event.subject_id, event.payload.prescription_id)
        for _, event in result.events
        if isinstance(event.payload, MedicationPrescribed) and event.subject_id == "p2"
    ]
    assert given == [("p2", f"{resource_type}/given1")]
    assert [part.message for part in result.passed_over] == [
        f"{resource_type}/given1: {field_name} names MedicationRequest/rx1, an order for another "
        "patient: the record is read as a course of its own, not as news of that order"
    ]


def test_an_entry_whose_full_url_names_another_id_is_imported_under_neither() -> None:
    result = run(
        bundle(
            entry(penicillin_allergy("Patient/p1"), "http://s/fhir/AllergyIntolerance/a9"),
            entry(order("Patient/p1", medicationCodeableConcept={"text": "amoxicillin"})),
        )
    )
    assert [error.origin for error in result.errors] == ["file0#entry[0]"]
    assert "AllergyIntolerance/a9" in result.errors[0].message
    assert "AllergyIntolerance/a1" in result.errors[0].message
    assert not any(isinstance(e.payload, AllergyRecorded) for _, e in result.events)


def test_a_record_naming_a_patient_by_a_full_url_that_holds_another_patient_is_an_error() -> None:
    result = run(
        bundle(
            entry(patient("p1"), "http://s/fhir/Patient/p2"),
            entry(
                penicillin_allergy("http://s/fhir/Patient/p2"),
                "http://s/fhir/AllergyIntolerance/a1",
            ),
        )
    )
    assert result.events == []
    assert [error.reason for error in result.errors] == ["invalid_value", "unresolved_reference"]
    assert all("Patient/p1" in e.message and "Patient/p2" in e.message for e in result.errors)


def test_a_transaction_entry_putting_another_id_than_its_resource_is_imported_under_neither() -> (
    None
):
    put = {
        "resource": penicillin_allergy("Patient/p1"),
        "request": {"method": "PUT", "url": "AllergyIntolerance/a9"},
    }
    result = run(bundle(put, kind="transaction"))
    assert result.events == []
    assert len(result.errors) == 1
    assert "AllergyIntolerance/a9" in result.errors[0].message
    assert "AllergyIntolerance/a1" in result.errors[0].message


def test_a_patient_reference_with_a_fragment_names_no_patient() -> None:
    result = run(order("Patient/p1#frag", medicationCodeableConcept={"text": "amoxicillin"}))
    assert result.events == []
    assert [error.reason for error in result.errors] == ["unresolved_reference"]
    assert "Patient/p1#frag" in result.errors[0].message


def versioned_order(version: str, status: str) -> dict[str, Any]:
    return {
        **order("Patient/p1", medicationCodeableConcept={"text": "amoxicillin"}),
        "status": status,
        "meta": {"versionId": version, "lastUpdated": f"2024-05-0{version}T00:00:00Z"},
    }


def administration(request_reference: str) -> dict[str, Any]:
    return {
        "resourceType": "MedicationAdministration",
        "id": "ad1",
        "status": "in-progress",
        "subject": {"reference": "Patient/p1"},
        "medicationCodeableConcept": {"text": "amoxicillin"},
        "effectiveDateTime": "2024-05-01T08:00:00Z",
        "request": {"reference": request_reference},
    }


def test_a_record_naming_an_older_order_version_says_the_newest_is_read() -> None:
    result = run(
        bundle(
            entry(versioned_order("2", "active")),
            entry(versioned_order("1", "active")),
            kind="history",
        ),
        administration("MedicationRequest/rx1/_history/1"),
    )
    lines = [line.message for line in result.passed_over]
    assert lines == [
        "MedicationAdministration/ad1: request: MedicationRequest/rx1/_history/1 names version 1:"
        " the order is read as version 2, the newest the input set holds (its patient, status"
        " and end)"
    ]


def test_an_order_version_not_in_the_input_set_is_reported_with_the_version_read() -> None:
    replacing = {
        **order("Patient/p1", "rx2", medicationCodeableConcept={"text": "amoxicillin"}),
        "priorPrescription": {"reference": "MedicationRequest/rx1/_history/7"},
    }
    result = run(versioned_order("2", "active"), replacing)
    assert [line.message for line in result.passed_over] == [
        "MedicationRequest/rx2: priorPrescription: MedicationRequest/rx1/_history/7: version 7"
        " is not in the input set: version 2, the newest it holds, was read instead"
    ]
