"""Shapes of real EHR exports probed in one session: a DSTU2 allergy (its `substance` and its
single `status`), a dispense naming its order by identifier only, a patient named by a
reference and an identifier that disagree, a coding displayed by a number, and a drug name
spelled with a letter of another script."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.events import (
    AllergyRecorded,
    Criticality,
    MedicationPrescribed,
    VerificationStatus,
)
from tests.unit.fhir.test_clinical_scenarios import (
    drug_allergy_alerts,
    fold,
    subject,
    submitted_from,
)
from tests.unit.fhir.test_error_paths import messages, run

PATIENT = {"reference": "Patient/p1"}
RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"
PENICILLIN = {"coding": [{"system": RXNORM, "code": "7980", "display": "Penicillin G"}]}
ORDER: dict[str, Any] = {
    "resourceType": "MedicationRequest",
    "id": "r1",
    "status": "active",
    "intent": "order",
    "medicationCodeableConcept": {
        "coding": [{"system": RXNORM, "code": "723", "display": "Amoxicillin"}],
        "text": "Amoxicillin 500 mg",
    },
    "subject": PATIENT,
    "authoredOn": "2024-02-01",
}


def dstu2_allergy(status: str) -> dict[str, Any]:
    return {
        "resourceType": "AllergyIntolerance",
        "id": "a1",
        "patient": PATIENT,
        "substance": PENICILLIN,
        "status": status,
        "criticality": "CRITH",
        "category": "medication",
        "recordedDate": "2023-06-01T00:00:00Z",
    }


def allergy_of(resources: list[dict[str, Any]]) -> AllergyRecorded:
    result = run(*resources)
    assert result.errors == []
    (payload,) = [e.payload for _, e in result.events if isinstance(e.payload, AllergyRecorded)]
    return payload


@pytest.mark.parametrize("status", ["refuted", "entered-in-error", "resolved", "inactive"])
def test_a_dstu2_allergy_whose_status_says_it_does_not_hold_raises_no_alert(status: str) -> None:
    """DSTU2 says refuted (and the rest) in one `status`: read past, a refuted penicillin
    allergy still raised a critical alert on amoxicillin."""
    resources = [dstu2_allergy(status), ORDER]
    payload = allergy_of(resources)
    assert status.replace("-", "_") in (payload.verification_status, payload.clinical_status)
    assert drug_allergy_alerts(subject(fold(submitted_from(resources)), "p1")) == []


def test_a_dstu2_allergy_confirmed_is_read_by_its_substance_and_alerts() -> None:
    """DSTU2 names the allergen in `substance` (R4's `code`): it was an error, and the allergy
    was lost."""
    resources = [dstu2_allergy("confirmed"), ORDER]
    payload = allergy_of(resources)
    assert payload.verification_status == VerificationStatus.CONFIRMED
    assert payload.criticality == Criticality.HIGH
    (alert,) = drug_allergy_alerts(subject(fold(submitted_from(resources)), "p1"))
    assert alert.severity == "critical"


def test_a_dstu2_status_beside_an_r4_one_that_says_otherwise_is_reported() -> None:
    allergy = {
        **dstu2_allergy("refuted"),
        "verificationStatus": {"coding": [{"code": "confirmed"}]},
    }
    result = run(allergy)
    assert messages(result) == [
        "AllergyIntolerance/a1: status 'refuted' (DSTU2) says otherwise than verificationStatus "
        "'confirmed': the verificationStatus is read"
    ]


RX_SYSTEM = "http://hospital.example/rx"


def dispense_of(value: str) -> dict[str, Any]:
    return {
        "resourceType": "MedicationDispense",
        "id": "d1",
        "status": "completed",
        "medicationCodeableConcept": ORDER["medicationCodeableConcept"],
        "subject": PATIENT,
        "authorizingPrescription": [{"identifier": {"system": RX_SYSTEM, "value": value}}],
        "whenHandedOver": "2024-02-02T10:00:00Z",
    }


ALLERGY: dict[str, Any] = {
    "resourceType": "AllergyIntolerance",
    "id": "a1",
    "patient": PATIENT,
    "code": PENICILLIN,
    "verificationStatus": {"coding": [{"code": "confirmed"}]},
    "recordedDate": "2023-06-01",
}
IDENTIFIED_ORDER: dict[str, Any] = {**ORDER, "identifier": [{"system": RX_SYSTEM, "value": "RX-1"}]}


def test_a_dispense_naming_its_order_by_identifier_is_news_of_that_order() -> None:
    """A dispense whose authorizingPrescription gives the order's identifier only started a
    course of its own: two critical alerts and a duplicate-therapy warning for one
    prescription."""
    resources = [ALLERGY, IDENTIFIED_ORDER, dispense_of("RX-1")]
    result = run(*resources)
    assert messages(result) == []
    alerts = drug_allergy_alerts(subject(fold(submitted_from(resources)), "p1"))
    assert [
        (alert.status, alert.drug_allergy and alert.drug_allergy.prescription_id)
        for alert in alerts
    ] == [("raised", "r1")]


def test_a_dispense_naming_an_order_identifier_no_order_carries_says_so() -> None:
    result = run(ALLERGY, IDENTIFIED_ORDER, dispense_of("RX-2"))
    assert messages(result) == [
        "MedicationDispense/d1: authorizingPrescription names its order by identifier "
        "http://hospital.example/rx|RX-2, which no MedicationRequest of the input set carries: "
        "the record is read as a course of its own (send the order with it, or name it "
        "MedicationRequest/<id>)"
    ]


def test_a_dispense_naming_an_identifier_two_orders_carry_says_so() -> None:
    second = {**IDENTIFIED_ORDER, "id": "r2"}
    result = run(IDENTIFIED_ORDER, second, dispense_of("RX-1"))
    assert messages(result) == [
        "MedicationDispense/d1: authorizingPrescription names its order by identifier "
        "http://hospital.example/rx|RX-1, which more than one MedicationRequest of the input "
        "set carries: which is meant cannot be told, so the record is read as a course of its "
        "own"
    ]


MRN = "http://hospital.example/mrn"


def patient_with(patient_id: str, mrn: str) -> dict[str, Any]:
    return {
        "resourceType": "Patient",
        "id": patient_id,
        "identifier": [{"system": MRN, "value": mrn}],
    }


def order_naming(value: str) -> dict[str, Any]:
    subject_of = {"reference": "Patient/p1", "identifier": {"system": MRN, "value": value}}
    return {**ORDER, "subject": subject_of}


def test_a_patient_reference_and_identifier_naming_two_patients_are_reported() -> None:
    """The order says Patient/p1 and p2's medical record number: filed under p1 without a
    word, though one of the two is wrong."""
    result = run(patient_with("p1", "MRN1"), patient_with("p2", "MRN2"), order_naming("MRN2"))
    prescribed = [e for _, e in result.events if isinstance(e.payload, MedicationPrescribed)]
    assert [event.subject_id for event in prescribed] == ["p1"]
    assert [m for m in messages(result) if "subject" in m] == [
        "MedicationRequest/r1: subject.reference 'Patient/p1' names Patient/p1, but its "
        "identifier http://hospital.example/mrn|MRN2 names another patient (Patient/p2 carries "
        "it): the record is filed under Patient/p1, as the reference says; check at the source "
        "which patient is meant"
    ]


def test_an_identifier_the_referenced_patient_does_not_carry_is_reported() -> None:
    result = run(patient_with("p1", "MRN1"), order_naming("MRN9"))
    assert [m for m in messages(result) if "subject" in m] == [
        "MedicationRequest/r1: subject.reference 'Patient/p1' names Patient/p1, but its "
        "identifier http://hospital.example/mrn|MRN9 names another patient (Patient/p1 carries "
        "http://hospital.example/mrn|MRN1): the record is filed under Patient/p1, as the "
        "reference says; check at the source which patient is meant"
    ]


@pytest.mark.parametrize("value", ["MRN1", "MRN5"])
def test_a_patient_identifier_that_agrees_or_cannot_be_checked_says_nothing(value: str) -> None:
    """MRN1 is p1's; MRN5 belongs to no patient of the input set, and p1 carries no MRN."""
    patient = (
        patient_with("p1", "MRN1")
        if value == "MRN1"
        else {**patient_with("p1", "x"), "identifier": []}
    )
    result = run(patient, order_naming(value))
    assert [m for m in messages(result) if "subject" in m] == []


NDC = "http://hl7.org/fhir/sid/ndc"


def test_a_coding_displayed_by_a_number_costs_its_display_not_the_order() -> None:
    """`"display": 500` in one coding made the whole order an error: the amoxicillin was never
    checked against the penicillin allergy."""
    concept = {
        "coding": [
            {"system": RXNORM, "code": "723", "display": "Amoxicillin"},
            {"system": NDC, "code": "0093-3109-01", "display": 500},
        ],
        "text": "Amoxicillin 500 mg",
    }
    resources = [ALLERGY, {**ORDER, "medicationCodeableConcept": concept}]
    result = run(*resources)
    assert result.errors == []
    assert messages(result) == [
        "MedicationRequest/r1: medicationCodeableConcept.coding[1].display is not text (500): "
        "the coding is read without its display"
    ]
    (alert,) = drug_allergy_alerts(subject(fold(submitted_from(resources)), "p1"))
    assert alert.severity == "critical"


def test_a_contained_medication_and_an_allergy_displayed_by_an_object_are_read_too() -> None:
    medication = {
        "resourceType": "Medication",
        "id": "m1",
        "code": {"coding": [{"system": RXNORM, "code": "723", "display": {"en": "x"}}]},
    }
    order = {**ORDER, "contained": [medication], "medicationReference": {"reference": "#m1"}}
    del order["medicationCodeableConcept"]
    allergy = {**ALLERGY, "code": {"coding": [{**PENICILLIN["coding"][0], "display": 7980}]}}
    result = run(allergy, order)
    assert result.errors == []
    assert messages(result) == [
        "AllergyIntolerance/a1: code.coding[0].display is not text (7980): the coding is read "
        "without its display",
        'MedicationRequest/r1: contained[0].code.coding[0].display is not text ({"en": "x"}): '
        "the coding is read without its display",
    ]


CYRILLIC_A = "\u0430"


def test_a_drug_name_with_a_cyrillic_lookalike_letter_is_reported() -> None:
    """A Cyrillic a in amoxicillin reads the same to a person, but the drug is not recognised:
    the alert was a warning that the drug cannot be checked, with nothing saying why."""
    order = {**ORDER, "medicationCodeableConcept": {"text": f"{CYRILLIC_A}moxicillin 500 mg"}}
    result = run(ALLERGY, order)
    assert result.errors == []
    assert messages(result) == [
        f"MedicationRequest/r1: medicationCodeableConcept.text '{CYRILLIC_A}moxicillin 500 mg': "
        f"the word '{CYRILLIC_A}moxicillin' mixes Latin letters with '{CYRILLIC_A}' (U+0430 "
        "CYRILLIC SMALL LETTER A), which looks like a Latin letter but is not read as one: the "
        "name may not be recognised, so the drug knowledge may not check it; check the spelling "
        "at the source"
    ]


def test_an_allergen_named_by_a_reference_display_with_a_greek_letter_is_reported() -> None:
    omicron = "\u03bf"
    allergy = {**ALLERGY, "code": {"text": f"Penicillin, amoxicillin{omicron}"}}
    order = {**ORDER, "medicationReference": {"display": f"Ib{omicron}profen"}}
    del order["medicationCodeableConcept"]
    result = run(allergy, order)
    assert [m.split(":", 2)[1].strip() for m in messages(result)] == [
        f"code.text 'Penicillin, amoxicillin{omicron}'",
        f"the drug's name 'Ib{omicron}profen'",
    ]


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            "\u0430\u043c\u043e\u043a\u0441\u0438\u0446\u0438\u043b\u043b\u0438\u043d",
            id="a name wholly in Cyrillic",
        ),
        pytest.param(
            "Amoxicillin 500 mg (\u0430\u043c\u043e\u043a\u0441\u0438\u0446\u0438\u043b\u043b\u0438\u043d)",
            id="two names, one per script",
        ),
        pytest.param("\u03b2-lactam antibiotic", id="a Greek letter beside a word, not in it"),
        pytest.param("cyanocobalamin 500\u03bcg tablet", id="a dose in micrograms"),
    ],
)
def test_a_name_whose_words_each_keep_to_one_script_says_nothing(name: str) -> None:
    order = {**ORDER, "medicationCodeableConcept": {"text": name}}
    assert messages(run(order)) == []


FORMULARY = "http://hospital.example/formulary"
AMOXICILLIN_MEDICATION: dict[str, Any] = {
    "resourceType": "Medication",
    "id": "m1",
    "identifier": [{"system": FORMULARY, "value": "F123"}],
    "code": {"coding": [{"system": RXNORM, "code": "723", "display": "amoxicillin"}]},
}


def order_of_medication(value: str) -> dict[str, Any]:
    order = {**ORDER, "medicationReference": {"identifier": {"system": FORMULARY, "value": value}}}
    del order["medicationCodeableConcept"]
    return order


def test_a_medication_named_by_identifier_is_the_one_the_input_set_holds() -> None:
    """The order names its Medication by the formulary identifier, and the Medication carrying
    it came in the same export: the order was an error and the amoxicillin never checked."""
    resources = [ALLERGY, AMOXICILLIN_MEDICATION, order_of_medication("F123")]
    assert run(*resources).errors == []
    (alert,) = drug_allergy_alerts(subject(fold(submitted_from(resources)), "p1"))
    assert alert.severity == "critical"


@pytest.mark.parametrize(
    ("held", "message"),
    [
        pytest.param(
            [AMOXICILLIN_MEDICATION],
            "MedicationRequest/r1: medicationReference has no reference: it names the Medication "
            "only by identifier, which no Medication of the input set carries, (give "
            "Medication/<id> with the Medication, or a medicationCodeableConcept)",
            id="given an identifier no Medication carries then the error says so",
        ),
        pytest.param(
            [AMOXICILLIN_MEDICATION, {**AMOXICILLIN_MEDICATION, "id": "m2"}],
            "MedicationRequest/r1: medicationReference.identifier "
            "http://hospital.example/formulary|F123 is carried by more than one Medication of "
            "the input set: which drug is meant cannot be told",
            id="given an identifier two Medications carry then the error says so",
        ),
    ],
)
def test_a_medication_identifier_that_names_no_one_medication_is_an_error(
    held: list[dict[str, Any]], message: str
) -> None:
    result = run(*held, order_of_medication("F999" if len(held) == 1 else "F123"))
    assert [error.message for error in result.errors] == [message]


@pytest.mark.parametrize(
    ("order", "line"),
    [
        pytest.param(
            {
                **ORDER,
                "medicationCodeableConcept": {
                    "coding": [{"system": RXNORM, "code": "723", "display": "amoxicillin"}],
                    "text": 500,
                },
            },
            "MedicationRequest/r1: medicationCodeableConcept.text is not text (500) (imported "
            "without it)",
            id="given a concept's text that is a number beside its codings",
        ),
        pytest.param(
            {
                **{
                    key: value for key, value in ORDER.items() if key != "medicationCodeableConcept"
                },
                "contained": [
                    {"resourceType": "Medication", "id": "m", "code": {"text": "amoxicillin"}}
                ],
                "medicationReference": {"reference": "#m", "display": 500},
            },
            "MedicationRequest/r1: medicationReference.display is not text (500) (imported "
            "without it)",
            id="given a reference's display that is a number",
        ),
    ],
)
def test_words_that_are_no_text_cost_those_words_not_the_order(
    order: dict[str, Any], line: str
) -> None:
    resources = [ALLERGY, order]
    result = run(*resources)
    assert messages(result) == [line]
    (alert,) = drug_allergy_alerts(subject(fold(submitted_from(resources)), "p1"))
    assert alert.severity == "critical"


def test_a_concept_with_no_coding_and_a_text_that_is_no_text_is_still_an_error() -> None:
    result = run({**ORDER, "medicationCodeableConcept": {"text": 500}})
    assert [error.message for error in result.errors] == [
        "MedicationRequest/r1: medicationCodeableConcept.text is not a string"
    ]


STU3_DISPENSE: dict[str, Any] = {
    "resourceType": "MedicationDispense",
    "id": "d1",
    "status": "completed",
    "medicationCodeableConcept": {"text": "amoxicillin"},
    "subject": PATIENT,
    "whenHandedOver": "2024-01-01T10:00:00Z",
}


def test_an_stu3_dispense_not_done_is_skipped_as_nothing_dispensed() -> None:
    """STU3's `notDone` is a modifier R4 says with a status: read past, the drug never handed
    over was checked as dispensed and alerted."""
    result = run(ALLERGY, {**STU3_DISPENSE, "notDone": True})
    assert result.errors == []
    assert [skip.reason for skip in result.skipped] == [
        "MedicationDispense notDone true (STU3), an earlier release's not-done: nothing was "
        "dispensed"
    ]
    assert not any(isinstance(e.payload, MedicationPrescribed) for _, e in result.events)


def test_an_stu3_dispense_done_is_read() -> None:
    result = run({**STU3_DISPENSE, "notDone": False})
    assert any(isinstance(e.payload, MedicationPrescribed) for _, e in result.events)


def test_an_earlier_releases_immunization_is_dated_by_its_date() -> None:
    """DSTU2 and STU3 date a vaccination by `date` (R4's `occurrenceDateTime`): read past, the
    dose was dated at the Bundle's time."""
    immunization = {
        "resourceType": "Immunization",
        "id": "i1",
        "status": "completed",
        "vaccineCode": {"coding": [{"system": "http://hl7.org/fhir/sid/cvx", "code": "140"}]},
        "patient": PATIENT,
        "date": "2023-10-10",
    }
    result = run(immunization)
    prescribed = [e for _, e in result.events if isinstance(e.payload, MedicationPrescribed)]
    assert [event.occurred_at.isoformat() for event in prescribed] == ["2023-10-10T00:00:00+00:00"]


@pytest.mark.parametrize(
    "record",
    [
        pytest.param(
            {
                "resourceType": "MedicationStatement",
                "id": "s1",
                "status": "active",
                "effectiveDateTime": "2024-01-01",
            },
            id="a DSTU2 statement",
        ),
        pytest.param(
            {
                "resourceType": "MedicationAdministration",
                "id": "ad1",
                "status": "completed",
                "effectiveTimeDateTime": "2024-01-01T10:00:00Z",
            },
            id="a DSTU2 administration, dated by effectiveTime",
        ),
        pytest.param(
            {
                "resourceType": "MedicationDispense",
                "id": "d1",
                "status": "completed",
                "whenHandedOver": "2024-01-01T10:00:00Z",
            },
            id="a DSTU2 dispense",
        ),
    ],
)
def test_a_dstu2_record_naming_its_patient_in_patient_is_checked(record: dict[str, Any]) -> None:
    """DSTU2 names the patient of a drug taken, given or dispensed in `patient` (R4's
    `subject`): it was an error, and the amoxicillin never checked against the allergy."""
    resource = {**record, "patient": PATIENT, "medicationCodeableConcept": {"text": "amoxicillin"}}
    result = run(ALLERGY, resource)
    assert result.errors == []
    prescribed = [e for _, e in result.events if isinstance(e.payload, MedicationPrescribed)]
    assert [(e.subject_id, e.occurred_at.date().isoformat()) for e in prescribed] == [
        ("p1", "2024-01-01")
    ]
    (alert, *_) = drug_allergy_alerts(subject(fold(submitted_from([ALLERGY, resource])), "p1"))
    assert alert.severity == "critical"


@pytest.mark.parametrize(
    ("dated", "key"),
    [
        pytest.param("onset", "onset", id="a DSTU2 onset"),
        pytest.param("assertedDate", "assertedDate", id="an STU3 assertedDate"),
    ],
)
def test_an_earlier_releases_allergy_is_dated_by_its_own_date(dated: str, key: str) -> None:
    allergy = {**dstu2_allergy("confirmed"), key: "2019-04-05"}
    del allergy["recordedDate"]
    result = run(allergy)
    assert result.errors == []
    assert [e.occurred_at.date().isoformat() for _, e in result.events] == ["2019-04-05"]


def test_an_allergy_status_dstu2_does_not_define_is_passed_over_with_a_line() -> None:
    allergy = {**ALLERGY, "status": "final"}
    result = run(allergy)
    assert result.errors == []
    assert messages(result) == [
        "AllergyIntolerance/a1: status 'final' is none of DSTU2's allergy statuses (active, "
        "inactive, resolved, unconfirmed, confirmed, refuted, entered-in-error) (imported "
        "without it)"
    ]
