"""Shapes of real EHR exports that lost or misfiled records: a drug given under a request that
is no prescription (a proposal, an option, a draft, a doNotPerform); an allergy or an order
whose own text (not its note) is larger than the event size limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from projections.gate import DEFAULT_MAX_EVENT_BYTES
from rules.batch import SubjectResult
from schemas.events import AllergyRecorded, MedicationPrescribed, MedicationStopped
from schemas.severity import Severity
from streams.fhir_files import FhirFiles, read_fhir_files
from tests.unit.fhir.test_clinical_scenarios import (
    ACTOR,
    DRUG_ALLERGY,
    FALLBACK,
    TENANT,
    drug_allergy_alerts,
    fold,
    subject,
)
from tests.unit.fhir.test_references import penicillin_allergy, run
from tests.unit.fhir.test_therapies import GIVEN_KINDS, _given, folded, raised, request

_ORDER_FIELDS = {
    "MedicationDispense": "authorizingPrescription",
    "MedicationAdministration": "request",
    "MedicationStatement": "basedOn",
}
_NOT_PRESCRIBED = [
    pytest.param(
        {"intent": "proposal"},
        "MedicationRequest intent proposal is not a prescription",
        id="proposal",
    ),
    pytest.param(
        {"intent": "option"}, "MedicationRequest intent option is not a prescription", id="option"
    ),
    pytest.param(
        {"status": "draft"}, "MedicationRequest status draft is not yet a prescription", id="draft"
    ),
    pytest.param(
        {"doNotPerform": True},
        "MedicationRequest doNotPerform: an instruction not to give the drug",
        id="doNotPerform",
    ),
]


@pytest.mark.parametrize(("fields", "why"), _NOT_PRESCRIBED)
@pytest.mark.parametrize("kind", GIVEN_KINDS)
def test_a_drug_given_under_a_request_that_is_no_prescription_is_a_course_of_its_own(
    kind: str, fields: dict[str, Any], why: str
) -> None:
    """The request is skipped, so nothing prescribed the drug: the record is its own course,
    with a line. It was filed under the request's id, as news of a prescription that does not
    exist, and a single dose or fill stayed an active medication with nothing to end it."""
    not_prescribed = request("r1", "order") | fields
    given = _given(kind, "2024-05-03")
    result = run(not_prescribed, given)
    assert {event.source_ref for _, event in result.events} == {f"{kind}/g1"}
    assert {
        event.payload.prescription_id
        for _, event in result.events
        if isinstance(event.payload, MedicationPrescribed | MedicationStopped)
    } == {f"{kind}/g1"}
    assert [line.detail for line in result.passed_over if line.source_ref == f"{kind}/g1"] == [
        f"{_ORDER_FIELDS[kind]} names MedicationRequest/r1, which is not imported as a "
        f"prescription ({why}): the record is read as a course of its own, not as news of that "
        "order"
    ]
    checked = folded(penicillin_allergy("Patient/p1"), not_prescribed, given)
    assert raised(checked, DRUG_ALLERGY) == [("allergy:a1", f"medication:{kind}/g1")]
    assert {alert.severity.value for alert in drug_allergy_alerts(checked)} == {"critical"}


def test_a_dispense_under_a_proposal_is_one_fill_checked_once() -> None:
    """A fill named by no prescription is raised, then resolved: it no longer stays active."""
    result = run(request("r1", "proposal"), _given("MedicationDispense", "2024-05-03"))
    assert [type(event.payload) for _, event in result.events] == [
        MedicationPrescribed,
        MedicationStopped,
    ]


def _read(tmp_path: Path, *resources: dict[str, Any]) -> FhirFiles:
    path = tmp_path / "export.ndjson"
    path.write_text("".join(f"{json.dumps(r)}\n" for r in resources), encoding="utf-8")
    return read_fhir_files([path], tenant_id=TENANT, actor=ACTOR, fallback_time=FALLBACK)


def _checked(files: FhirFiles) -> SubjectResult:
    assert files.errors == []
    result = subject(fold(files.submitted), "p1")
    assert result.rejections == []
    return result


def _allergy(text: str) -> dict[str, Any]:
    return penicillin_allergy("Patient/p1") | {"code": {"text": text}}


def _order(drug: str) -> dict[str, Any]:
    return request("r1", "order", medicationCodeableConcept={"text": drug})


HISTORY = "Patient reports a rash after the drug in 1999; " * 2_000


def test_an_allergy_whose_text_is_over_the_size_limit_is_kept_with_its_text_shortened(
    tmp_path: Path,
) -> None:
    """The gate refused the whole allergy as oversize: the penicillin allergy was lost and
    amoxicillin raised nothing. Its text is cut, the cut marked, and one line says so."""
    files = _read(tmp_path, _allergy(f"Penicillin. {HISTORY}"), _order("amoxicillin 500 mg"))
    result = _checked(files)
    assert [a.severity for a in drug_allergy_alerts(result)] == [Severity.CRITICAL]
    [line] = [note.message() for note in files.notes]
    assert "the allergen text of AllergyIntolerance/a1 was shortened to its first" in line
    [recorded] = [
        item.event.payload
        for item in files.submitted
        if isinstance(item.event.payload, AllergyRecorded)
    ]
    assert isinstance(recorded, AllergyRecorded)
    assert recorded.substance.startswith("Penicillin. Patient reports")
    assert "[allergen text shortened at import: " in recorded.substance


def test_a_text_cut_more_than_once_to_fit_is_one_line_counted_from_the_whole_text(
    tmp_path: Path,
) -> None:
    """A 300,000-character reaction was cut twice to fit: two lines, the second saying 121
    characters of a 65,312-character text were dropped, and its marker cut off the first."""
    reaction = {"manifestation": [{"text": f"Hives. {HISTORY * 3}"}]}
    files = _read(tmp_path, penicillin_allergy("Patient/p1") | {"reaction": [reaction]})
    [line] = [note.message() for note in files.notes]
    [recorded] = [item.event.payload for item in files.submitted]
    assert isinstance(recorded, AllergyRecorded)
    text = recorded.reactions[0].manifestation
    whole = len(reaction["manifestation"][0]["text"].strip())
    kept = len(text.split(" [manifestation of reaction 1 shortened at import: ")[0])
    assert f"shortened to its first {kept:,} characters ({whole - kept:,} dropped)" in line
    assert text.endswith(
        f"[manifestation of reaction 1 shortened at import: {whole - kept:,} of its {whole:,}"
        " characters dropped to fit the event size limit]"
    )
    assert max(item.encoded_size for item in files.submitted) <= DEFAULT_MAX_EVENT_BYTES


def test_what_a_shortened_allergen_text_dropped_is_checked_by_hand_not_lost(
    tmp_path: Path,
) -> None:
    """Sulfa named only after the cut: the judgement against Bactrim is unverified (checked
    by hand), never a silent "no conflict"."""
    text = f"{HISTORY} Sulfa drugs"
    files = _read(tmp_path, _allergy(text), _order("sulfamethoxazole 800 mg / trimethoprim 160 mg"))
    result = _checked(files)
    assert [a.drug_allergy.level for a in drug_allergy_alerts(result) if a.drug_allergy] == [
        "unverified"
    ]


def test_an_order_whose_drug_text_is_over_the_size_limit_is_kept_with_it_shortened(
    tmp_path: Path,
) -> None:
    drug = f"amoxicillin 500 mg capsule {'y' * 100_000}"
    files = _read(tmp_path, penicillin_allergy("Patient/p1"), _order(drug))
    result = _checked(files)
    assert [a.severity for a in drug_allergy_alerts(result)] == [Severity.CRITICAL]
    assert [note.message().split(" was ")[0] for note in files.notes] == [
        "export.ndjson:2: the drug text of MedicationRequest/r1"
    ]


@pytest.mark.parametrize(
    ("fields", "line"),
    [
        pytest.param(
            {"recordedDate": "2031-01-01"},
            "recordedDate 2031-01-01T00:00:00+00:00 is after the record was made",
            id="recordedDate typed in the future",
        ),
        pytest.param(
            {"recordedDate": None, "onsetDateTime": "2030-06-01"},
            "onsetDateTime 2030-06-01T00:00:00+00:00 is after the record was made",
            id="only an onset in the future",
        ),
        pytest.param(
            {"recordedDate": None, "onsetPeriod": {"start": "2031-01-01"}},
            "onsetPeriod.start 2031-01-01T00:00:00+00:00 is after the record was made",
            id="only an onset period starting in the future",
        ),
    ],
)
def test_an_allergy_dated_after_it_was_made_is_kept_dated_when_it_was_made(
    tmp_path: Path, fields: dict[str, Any], line: str
) -> None:
    """The gate refused it as occurring in the future, and the allergy was lost: amoxicillin
    raised nothing. It is dated when the record was made (the later of its meta.lastUpdated and
    its file's time), with a line."""
    allergy = (
        penicillin_allergy("Patient/p1")
        | fields
        | {"meta": {"lastUpdated": "2025-01-01T00:00:00Z"}}
    )
    allergy = {key: value for key, value in allergy.items() if value is not None}
    files = _read(tmp_path, allergy, _order("amoxicillin 500 mg"))
    result = _checked(files)
    assert [a.severity for a in drug_allergy_alerts(result)] == [Severity.CRITICAL]
    assert [note.message() for note in files.notes] == [
        f"export.ndjson:1: AllergyIntolerance/a1: {line} (2025-09-17T00:00:00+00:00): the allergy "
        "is dated no later than that (imported without it)"
    ]


NOT_STATED = (
    "verificationStatus is not given: the allergy is imported as an allergy whose verification "
    "is not stated, which UaC records as confirmed (the default of its events), not as "
    "unconfirmed, which the source did not say; check at the source whether it was verified"
)
_NO_VERIFICATION = [
    pytest.param(None, id="absent"),
    pytest.param(
        {
            "extension": [
                {
                    "url": "http://hl7.org/fhir/StructureDefinition/data-absent-reason",
                    "valueCode": "unknown",
                }
            ]
        },
        id="a data-absent-reason alone",
    ),
]


@pytest.mark.parametrize("verification", _NO_VERIFICATION)
def test_a_low_criticality_allergy_without_a_verification_status_is_not_lowered(
    tmp_path: Path, verification: dict[str, Any] | None
) -> None:
    """FHIR says nothing when verificationStatus is absent. Read as "unconfirmed", a
    low-criticality penicillin allergy gave amoxicillin a warning instead of a critical alert
    and the state called it unconfirmed; a data-absent-reason alone was an error and the
    allergy was lost. Now: the contract's default (a producer that states none), and a line."""
    allergy = penicillin_allergy("Patient/p1") | {"criticality": "low"}
    allergy.pop("verificationStatus")
    if verification is not None:
        allergy["verificationStatus"] = verification
    files = _read(tmp_path, allergy, _order("amoxicillin 500 mg"))
    result = _checked(files)
    assert [a.severity for a in drug_allergy_alerts(result)] == [Severity.CRITICAL]
    assert [note.message() for note in files.notes] == [
        f"export.ndjson:1: AllergyIntolerance/a1: {NOT_STATED}"
    ]


def test_a_low_criticality_allergy_said_unconfirmed_is_still_lowered(tmp_path: Path) -> None:
    allergy = penicillin_allergy("Patient/p1") | {
        "criticality": "low",
        "verificationStatus": {"coding": [{"code": "unconfirmed"}]},
    }
    result = _checked(_read(tmp_path, allergy, _order("amoxicillin 500 mg")))
    assert [a.severity for a in drug_allergy_alerts(result)] == [Severity.WARNING]


def test_a_reaction_recorded_on_an_immunization_is_named_in_a_line(tmp_path: Path) -> None:
    """Anaphylaxis after a vaccine was dropped without a word: allergies are read from
    AllergyIntolerance only, so the line asks for one, and the dose is still imported."""
    immunization = {
        "resourceType": "Immunization",
        "id": "i1",
        "status": "completed",
        "patient": {"reference": "Patient/p1"},
        "vaccineCode": {"coding": [{"system": "http://hl7.org/fhir/sid/cvx", "code": "03"}]},
        "occurrenceDateTime": "2024-05-01",
        "reaction": [{"date": "2024-05-01", "detail": {"display": "Anaphylaxis"}}],
    }
    files = _read(tmp_path, immunization)
    assert files.errors == []
    assert [item.event.source_ref for item in files.submitted] == ["Immunization/i1"] * 2
    assert [note.message() for note in files.notes] == [
        "export.ndjson:1: Immunization/i1: reaction[0] (date '2024-05-01', detail 'Anaphylaxis') "
        "is not read: a reaction to a vaccine is not recorded as an allergy; if it was one "
        "(anaphylaxis to the vaccine or a component), send an AllergyIntolerance, so later doses "
        "are checked (imported without it)"
    ]


def _inverted(status: str) -> dict[str, Any]:
    bounds = {"start": "2025-05-10", "end": "2024-05-12"}
    return request("r1", "order", status=status) | {
        "dosageInstruction": [{"timing": {"repeat": {"boundsPeriod": bounds}}}]
    }


def test_a_course_whose_bounds_end_before_they_start_stays_active_with_a_line() -> None:
    """A year typed wrong (2024 for 2025): the course ended at that end, after the order was
    written but before the bounds began, and its critical alert was resolved without a word.
    Now the end is left out, reported, and the course is checked until it is stopped."""
    result = run(_inverted("active"))
    [prescribed] = [event for _, event in result.events]
    assert prescribed.valid_until is None
    [line] = [line.detail for line in result.passed_over]
    assert line.startswith(
        "dosageInstruction[0].timing.repeat.boundsPeriod.end ends at 2024-05-13T00:00:00+00:00, "
        "not after its own start (2025-05-10T00:00:00+00:00)"
    )
    checked = folded(penicillin_allergy("Patient/p1"), _inverted("active"))
    assert raised(checked, DRUG_ALLERGY) == [("allergy:a1", "medication:r1")]
    assert [alert.status.value for alert in drug_allergy_alerts(checked)] == ["raised"]


def test_a_completed_order_whose_bounds_end_before_they_start_is_still_imported() -> None:
    result = run(_inverted("completed"))
    assert result.errors == []
    assert [type(event.payload) for _, event in result.events] == [
        MedicationPrescribed,
        MedicationStopped,
    ]


@pytest.mark.parametrize("onset", ["2010-00-00", "2010-01-01T10:00:00", "childhood"])
def test_an_onset_that_cannot_be_read_is_left_out_when_the_recorded_date_dates_the_allergy(
    tmp_path: Path, onset: str
) -> None:
    """It was an error, and the penicillin allergy was lost for a date it did not need."""
    allergy = penicillin_allergy("Patient/p1") | {"onsetDateTime": onset}
    files = _read(tmp_path, allergy, _order("amoxicillin 500 mg"))
    result = _checked(files)
    assert [a.severity for a in drug_allergy_alerts(result)] == [Severity.CRITICAL]
    [line] = [note.message() for note in files.notes]
    assert line.startswith(f"export.ndjson:1: AllergyIntolerance/a1: onsetDateTime {onset!r} ")
    assert line.endswith(" (imported without it)")


def test_an_onset_that_cannot_be_read_is_still_an_error_when_it_is_the_only_date(
    tmp_path: Path,
) -> None:
    allergy = penicillin_allergy("Patient/p1") | {"onsetDateTime": "2010-00-00"}
    del allergy["recordedDate"]
    files = _read(tmp_path, allergy)
    assert [error.reason for error in files.errors] == ["invalid_value"]


def test_an_order_written_after_it_was_made_is_kept_dated_when_it_was_made(tmp_path: Path) -> None:
    """authoredOn typed in the future: the gate refused the order as occurring in the future
    and amoxicillin was never checked against the penicillin allergy."""
    future = request(
        "r1",
        "order",
        authored="2031-01-01",
        medicationCodeableConcept={"text": "amoxicillin 500 mg"},
    )
    files = _read(tmp_path, penicillin_allergy("Patient/p1"), future)
    result = _checked(files)
    assert [a.severity for a in drug_allergy_alerts(result)] == [Severity.CRITICAL]
    assert [note.message() for note in files.notes] == [
        "export.ndjson:2: MedicationRequest/r1: authoredOn 2031-01-01T00:00:00+00:00 is after "
        "the record was made (2025-09-17T00:00:00+00:00): the order is dated no later than that "
        "(imported without it)"
    ]
