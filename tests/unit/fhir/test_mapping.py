"""FHIR R4 resources -> UaC events: every mapping rule, and every input accounted for."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from schemas.events import (
    AllergyCategory,
    AllergyRecorded,
    AllergyStatusChanged,
    AllergyType,
    ClinicalStatus,
    Coding,
    Criticality,
    Event,
    EventType,
    FactAsserted,
    MedicationPrescribed,
    MedicationStopped,
    Origin,
    Reaction,
    ReactionSeverity,
    Sensitivity,
    VerificationStatus,
)
from schemas.fhir.inputs import CLAIM_TYPES, ParsedInput, conditional_identifier
from schemas.fhir.json_access import Unmappable, duration_of, parse_fhir_period_end
from schemas.fhir.mapping import (
    MAPPED_TYPES,
    FhirImport,
    ImportContext,
    combine,
    country_code,
    import_fhir,
    parse_fhir_datetime,
    parse_json_document,
    parse_ndjson,
    unpack,
    without_unmapped,
)
from schemas.fhir.sources import JUST_AFTER, version_offset

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "fhir"
EXAMPLES = FIXTURES / "fhir-r4-examples"
SYNTHEA = FIXTURES / "synthea-10-patients"
FALLBACK = datetime(2025, 9, 17, tzinfo=UTC)
CONTEXT = ImportContext(tenant_id="clinic-a", actor="fhir-import", fallback_time=FALLBACK)
RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"
SNOMED = "http://snomed.info/sct"
NDC = "http://hl7.org/fhir/sid/ndc"


def example(name: str) -> dict[str, Any]:
    resource: dict[str, Any] = json.loads((EXAMPLES / f"{name}.json").read_text(encoding="utf-8"))
    return resource


def synthea(resource_type: str, resource_id: str) -> dict[str, Any]:
    with (SYNTHEA / f"{resource_type}.000.ndjson").open(encoding="utf-8") as lines:
        for line in lines:
            resource: dict[str, Any] = json.loads(line)
            if resource["id"] == resource_id:
                return resource
    raise LookupError(resource_id)


def changed(resource: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A deep copy with top-level fields replaced (None removes the field)."""
    result = copy.deepcopy(resource)
    for name, value in fields.items():
        if value is None:
            result.pop(name, None)
        else:
            result[name] = value
    return result


def run(*resources: Any, context: ImportContext = CONTEXT) -> FhirImport:
    """Import resources as one input set; origins are `test#<n>`."""
    return import_fhir(combine(unpack(r, f"test#{n}") for n, r in enumerate(resources)), context)


def events_of(*resources: Any) -> list[Event]:
    result = run(*resources)
    assert result.errors == []
    return [event for _, event in result.events]


def only_payload(*resources: Any) -> Any:
    (event,) = events_of(*resources)
    return event.payload


def prescription_of(event: Event) -> str:
    assert isinstance(event.payload, MedicationPrescribed | MedicationStopped)
    return event.payload.prescription_id


def allergy_of(event: Event) -> str:
    assert isinstance(event.payload, AllergyRecorded | AllergyStatusChanged)
    return event.payload.allergy_id


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


HL7_VERIFICATION = "http://terminology.hl7.org/CodeSystem/allergyintolerance-verification"
HL7_CLINICAL = "http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical"


def rxnorm(code: str) -> dict[str, str]:
    return {"system": RXNORM, "code": code}


GENERAL_CODE_WITH_AGENT = {
    "code": {"coding": [{"system": SNOMED, "code": "416098002"}], "text": "Drug allergy"},
    "reaction": [
        {
            "substance": {"coding": [rxnorm("723")], "text": "amoxicillin"},
            "manifestation": [{"text": "hives"}],
        }
    ],
}
"""A general allergy code ("Drug allergy") whose reaction names the specific agent."""


def local_coding_first(local: str, system: str, code: str) -> dict[str, Any]:
    """A status concept whose hospital-local coding comes before the HL7 one."""
    return {
        "coding": [
            {"system": "http://hospital.example/status", "code": local},
            {"system": system, "code": code},
        ]
    }


def status(code: str) -> dict[str, Any]:
    return {"coding": [{"code": code}]}


# AllergyIntolerance


def test_given_the_official_penicillin_allergy_when_imported_then_every_field_is_mapped() -> None:
    (event,) = events_of(example("AllergyIntolerance-medication"))
    assert event.payload == AllergyRecorded(
        allergy_id="medication",
        substance="Penicillin G",
        codes=(Coding(system=RXNORM, code="7980", display="Penicillin G"),),
        categories=(AllergyCategory.MEDICATION,),
        criticality=Criticality.HIGH,
        verification_status=VerificationStatus.UNCONFIRMED,
        clinical_status=ClinicalStatus.ACTIVE,
        reactions=(Reaction(manifestation="Hives"),),
    )
    assert (event.tenant_id, event.subject_id, event.actor) == (
        "clinic-a",
        "example",
        "fhir-import",
    )
    assert (event.type, event.origin, event.source_ref) == (
        EventType.ALLERGY_RECORDED,
        Origin.IMPORTED,
        "AllergyIntolerance/medication",
    )
    assert (event.confidence, event.sensitivity, event.purpose, event.scope) == (
        1.0,
        Sensitivity.SPECIAL_CATEGORY,
        "care",
        "subject",
    )
    assert event.occurred_at == event.recorded_at == utc(2010, 3, 1)


def test_given_reactions_and_notes_when_imported_then_manifestations_severities_and_notes_kept() -> (
    None
):
    payload = only_payload(example("AllergyIntolerance-example"))
    assert payload.allergy_type is AllergyType.ALLERGY
    assert payload.reactions == (
        Reaction(
            manifestation="Anaphylactic reaction (Challenge Protocol. Severe reaction to "
            "subcutaneous cashew extract. Epinephrine administered)",
            severity=ReactionSeverity.SEVERE,
        ),
        Reaction(manifestation="Urticaria", severity=ReactionSeverity.MODERATE),
    )
    assert payload.note is not None
    assert payload.note.startswith("The criticality is high")


PENICILLIN = example("AllergyIntolerance-medication")


def test_given_r5_style_type_category_and_manifestations_then_the_allergy_is_kept_whole() -> None:
    r5_type = {
        "coding": [
            {"system": "http://hl7.org/fhir/allergy-intolerance-type", "code": "intolerance"}
        ]
    }
    reaction = {"manifestation": [{"concept": {"text": "skin rash"}}], "severity": "mild"}
    payload = only_payload(
        changed(PENICILLIN, type=r5_type, category="medication", reaction=[reaction])
    )
    assert payload.allergy_type is AllergyType.INTOLERANCE
    assert payload.categories == (AllergyCategory.MEDICATION,)
    assert payload.reactions == (
        Reaction(manifestation="skin rash", severity=ReactionSeverity.MILD),
    )


@pytest.mark.parametrize(
    ("fields", "attribute", "expected"),
    [
        pytest.param(
            {"criticality": "unable-to-assess"},
            "criticality",
            Criticality.UNABLE_TO_ASSESS,
            id="given criticality unable-to-assess when imported then the enum value",
        ),
        pytest.param(
            {"criticality": None},
            "criticality",
            None,
            id="given no criticality when imported then none",
        ),
        pytest.param(
            {"verificationStatus": None},
            "verification_status",
            VerificationStatus.CONFIRMED,
            id="given no verificationStatus when imported then the contract's default, not unconfirmed",
        ),
        pytest.param(
            {"verificationStatus": status("presumed")},
            "verification_status",
            VerificationStatus.UNCONFIRMED,
            id="given the R5 code presumed when imported then unconfirmed",
        ),
        pytest.param(
            {"verificationStatus": status("confirmed")},
            "verification_status",
            VerificationStatus.CONFIRMED,
            id="given confirmed when imported then confirmed",
        ),
        pytest.param(
            {"verificationStatus": status("refuted")},
            "verification_status",
            VerificationStatus.REFUTED,
            id="given refuted when imported then refuted",
        ),
        pytest.param(
            {"verificationStatus": status("entered-in-error")},
            "verification_status",
            VerificationStatus.ENTERED_IN_ERROR,
            id="given entered-in-error when imported then entered in error",
        ),
        pytest.param(
            {"clinicalStatus": status("resolved")},
            "clinical_status",
            ClinicalStatus.RESOLVED,
            id="given clinicalStatus resolved when imported then resolved",
        ),
        pytest.param(
            {"clinicalStatus": None},
            "clinical_status",
            None,
            id="given no clinicalStatus when imported then none",
        ),
        pytest.param(
            {"verificationStatus": {"text": "Entered in error"}},
            "verification_status",
            VerificationStatus.ENTERED_IN_ERROR,
            id="given a verificationStatus with only a text spelling a code then that code",
        ),
        pytest.param(
            {"clinicalStatus": {"coding": [{"display": "Resolved"}], "text": " RESOLVED "}},
            "clinical_status",
            ClinicalStatus.RESOLVED,
            id="given a clinicalStatus coding without a code and a text then the text's code",
        ),
        pytest.param(
            {"verificationStatus": local_coding_first("C", HL7_VERIFICATION, "refuted")},
            "verification_status",
            VerificationStatus.REFUTED,
            id="given a local verificationStatus coding before the HL7 one then the HL7 code",
        ),
        pytest.param(
            {"clinicalStatus": local_coding_first("A", HL7_CLINICAL, "resolved")},
            "clinical_status",
            ClinicalStatus.RESOLVED,
            id="given a local clinicalStatus coding before the HL7 one then the HL7 code",
        ),
        pytest.param(
            {"type": "intolerance"},
            "allergy_type",
            AllergyType.INTOLERANCE,
            id="given type intolerance when imported then an intolerance",
        ),
        pytest.param(
            {"category": ["food", "biologic"]},
            "categories",
            (AllergyCategory.FOOD, AllergyCategory.BIOLOGIC),
            id="given two categories when imported then both, in order",
        ),
        pytest.param(
            {"code": {"coding": [{"system": RXNORM, "code": "7980"}]}},
            "substance",
            "7980",
            id="given a code without text or display when imported then the code is the substance",
        ),
        pytest.param(
            {"code": {"text": "penicillin", "coding": [{"code": "7980"}]}},
            "codes",
            (),
            id="given a coding without a system when imported then it is not kept as a code",
        ),
        pytest.param(
            {
                "code": None,
                "reaction": [
                    {"manifestation": [{"text": "hives"}]},
                    {
                        "substance": {"coding": [{"system": RXNORM, "code": "7980"}]},
                        "manifestation": [{"text": "hives"}],
                    },
                ],
            },
            "codes",
            (Coding(system=RXNORM, code="7980"),),
            id="given no code (R4: 0..1) when a reaction names the substance then it is the "
            "allergy's substance",
        ),
        pytest.param(
            GENERAL_CODE_WITH_AGENT,
            "substance",
            "Drug allergy (amoxicillin)",
            id="given a general code and a reaction naming the agent then the label names both",
        ),
        pytest.param(
            GENERAL_CODE_WITH_AGENT,
            "codes",
            (Coding(system=SNOMED, code="416098002"), Coding(system=RXNORM, code="723")),
            id="given a general code and a reaction naming the agent then both are its codes",
        ),
        pytest.param(
            {
                "reaction": [
                    {"substance": "amoxicillin", "manifestation": [{"text": "hives"}]},
                    {"substance": {"text": ""}, "manifestation": [{"text": "rash"}]},
                ]
            },
            "substance",
            "Penicillin G",
            id="given reaction substances that name nothing then the allergy stands on its code",
        ),
    ],
)
def test_allergy_fields(fields: dict[str, Any], attribute: str, expected: Any) -> None:
    assert getattr(only_payload(changed(PENICILLIN, **fields)), attribute) == expected


NO_KNOWN = example("AllergyIntolerance-nkda")
ALL_CATEGORIES = tuple(AllergyCategory)


def _coded(code: str) -> dict[str, Any]:
    return {"coding": [{"system": SNOMED, "code": code}]}


@pytest.mark.parametrize(
    ("resource", "categories"),
    [
        pytest.param(
            example("AllergyIntolerance-nka"),
            ALL_CATEGORIES,
            id="given the official NKA (716186003) when imported then negated for every category",
        ),
        pytest.param(
            example("AllergyIntolerance-nkda"),
            (AllergyCategory.MEDICATION,),
            id="given the official NKDA (409137002) when imported then a negated medication allergy",
        ),
        pytest.param(
            example("AllergyIntolerance-nkla"),
            (AllergyCategory.ENVIRONMENT,),
            id="given the official NKLA (716184000) when imported then a negated environment allergy",
        ),
        pytest.param(
            changed(NO_KNOWN, code=_coded("429625007")),
            (AllergyCategory.FOOD,),
            id="given SNOMED no known food allergy when imported then negated food",
        ),
        pytest.param(
            changed(NO_KNOWN, code=_coded("428607008")),
            (AllergyCategory.ENVIRONMENT,),
            id="given SNOMED no known environmental allergy when imported then negated environment",
        ),
        pytest.param(
            changed(
                NO_KNOWN,
                code={
                    "coding": [{"system": "urn:oid:2.16.840.1.113883.6.96", "code": "409137002"}]
                },
            ),
            (AllergyCategory.MEDICATION,),
            id="given NKDA with SNOMED named by its OID when imported then a negation",
        ),
        pytest.param(
            changed(NO_KNOWN, code={"text": "NKDA"}),
            (AllergyCategory.MEDICATION,),
            id="given a text-only NKDA when imported then a negated medication allergy",
        ),
        pytest.param(
            changed(
                NO_KNOWN,
                code={
                    "coding": [
                        {
                            "system": "http://hospital.example/allergy",
                            "code": "NKDA1",
                            "display": "No Known Drug Allergies",
                        }
                    ],
                    "text": "NKDA",
                },
            ),
            (AllergyCategory.MEDICATION,),
            id="given NKDA with a local code when imported then a negated medication allergy",
        ),
        pytest.param(
            changed(NO_KNOWN, code={"text": "No known  allergies"}),
            ALL_CATEGORIES,
            id="given text-only no known allergies when imported then negated for every category",
        ),
        pytest.param(
            changed(NO_KNOWN, code={"text": "Nil known drug allergies."}),
            (AllergyCategory.MEDICATION,),
            id="given text-only 'Nil known drug allergies.' when imported then negated",
        ),
        pytest.param(
            changed(NO_KNOWN, code={"text": "否认食物及药物过敏史"}),
            (AllergyCategory.FOOD, AllergyCategory.MEDICATION),
            id="given a Chinese denial of food and drug allergies then negated for both",
        ),
        pytest.param(
            changed(NO_KNOWN, verificationStatus=status("refuted")),
            (AllergyCategory.MEDICATION,),
            id="given a refuted NKDA when imported then still a negation, never an allergy",
        ),
        pytest.param(
            changed(
                NO_KNOWN,
                code={
                    "coding": [
                        {
                            "system": "http://hl7.org/fhir/uv/ips/CodeSystem/absent-unknown-uv-ips",
                            "code": "no-known-medication-allergies",
                        }
                    ]
                },
            ),
            (AllergyCategory.MEDICATION,),
            id="given the IPS no-known-medication-allergies code when imported then negated",
        ),
    ],
)
def test_no_known_allergy_statements_are_negations(
    resource: dict[str, Any], categories: tuple[AllergyCategory, ...]
) -> None:
    payload = only_payload(resource)
    assert payload.negated is True
    assert payload.categories == categories


def test_given_a_substance_named_like_a_negation_but_coded_when_imported_then_not_negated() -> None:
    coded = {
        "text": "NKA",
        "coding": [{"system": RXNORM, "code": "7980", "display": "Penicillin G"}],
    }
    assert only_payload(changed(PENICILLIN, code=coded)).negated is False


@pytest.mark.parametrize(
    "code",
    [
        pytest.param(
            {
                "text": "NKDA",
                "coding": [{"system": "http://hospital.example/allergy", "display": "Penicillin"}],
            },
            id="a local coding whose display names a substance",
        ),
        pytest.param(
            {
                "text": "NKDA",
                "coding": [
                    {"system": "http://hospital.example/allergy", "code": "NKDA1"},
                    {"system": SNOMED, "code": "764146007"},
                ],
            },
            id="a SNOMED substance coding next to a local one",
        ),
    ],
)
def test_given_words_of_a_negation_but_a_substance_named_then_not_negated(
    code: dict[str, Any],
) -> None:
    assert only_payload(changed(PENICILLIN, code=code)).negated is False


def test_given_ips_no_allergy_info_when_imported_then_skipped_as_neither_allergy_nor_negation() -> (
    None
):
    unknown = {
        "coding": [
            {
                "system": "http://hl7.org/fhir/uv/ips/CodeSystem/absent-unknown-uv-ips",
                "code": "no-allergy-info",
            }
        ]
    }
    result = run(changed(NO_KNOWN, code=unknown))
    assert (result.events, result.errors) == ([], [])
    assert [s.reason for s in result.skipped] == [
        "allergy status unknown (no information): neither allergy nor negation"
    ]


# Times


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("2015", utc(2015, 1, 1), id="given a year when parsed then 1 January, UTC"),
        pytest.param("2015-02", utc(2015, 2, 1), id="given a month when parsed then its 1st, UTC"),
        pytest.param(
            "2015-01-15", utc(2015, 1, 15), id="given a date when parsed then midnight UTC"
        ),
        pytest.param(
            "2015-08-06T15:37:31-06:00",
            datetime(2015, 8, 6, 15, 37, 31, tzinfo=timezone(timedelta(hours=-6))),
            id="given an offset when parsed then the same instant",
        ),
        pytest.param(
            "2015-08-06T15:37:31.123456789Z",
            datetime(2015, 8, 6, 15, 37, 31, 123456, tzinfo=UTC),
            id="given nanoseconds when parsed then truncated to microseconds",
        ),
        pytest.param(
            "2016-12-31T23:59:60Z",
            utc(2016, 12, 31, 23, 59, 59),
            id="given a leap second when parsed then the second before",
        ),
    ],
)
def test_fhir_dates(text: str, expected: datetime) -> None:
    assert parse_fhir_datetime(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("2015", utc(2016, 1, 1), id="given a year then the end of that year"),
        pytest.param("2015-02", utc(2015, 3, 1), id="given a month then the end of that month"),
        pytest.param("2016-02", utc(2016, 3, 1), id="given February of a leap year then 1 March"),
        pytest.param("2015-12", utc(2016, 1, 1), id="given December then the next year"),
        pytest.param("2015-01-31", utc(2015, 2, 1), id="given a day then the end of that day"),
        pytest.param(
            "2015-08-06T15:37:31-06:00",
            datetime(2015, 8, 6, 15, 37, 31, tzinfo=timezone(timedelta(hours=-6))),
            id="given a time then that instant",
        ),
    ],
)
def test_a_period_end_of_reduced_precision_includes_the_whole_of_it(
    text: str, expected: datetime
) -> None:
    assert parse_fhir_period_end(text) == expected


def test_a_period_end_on_the_last_day_of_the_calendar_is_refused_with_its_reason() -> None:
    with pytest.raises(ValueError, match="'9999-12-31' ends at the end of the range of dates"):
        parse_fhir_period_end("9999-12-31")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("2015-08-06T15:37:31", id="given a time without a zone then refused"),
        pytest.param("15/01/2015", id="given a non-FHIR date then refused"),
        pytest.param("2015-13-01", id="given month 13 then refused"),
    ],
)
def test_invalid_fhir_dates(text: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(text))):
        parse_fhir_datetime(text)


@pytest.mark.parametrize(
    ("duration", "length"),
    [
        pytest.param({"value": 7, "code": "d"}, timedelta(days=7), id="given UCUM d then days"),
        pytest.param({"value": 1.5, "code": "h"}, timedelta(minutes=90), id="given 1.5 h"),
        pytest.param(
            {"value": 1, "code": "mo"}, timedelta(days=30.4375), id="given mo then a mean month"
        ),
        pytest.param(
            {"value": 3, "unit": " Weeks "}, timedelta(weeks=3), id="given only unit text"
        ),
        pytest.param(
            {"value": 10, "unit": "days", "code": "tablet"},
            timedelta(days=10),
            id="given a code that is not a time then its unit text",
        ),
    ],
)
def test_durations(duration: dict[str, Any], length: timedelta) -> None:
    assert duration_of(duration) == length


@pytest.mark.parametrize(
    ("duration", "message"),
    [
        pytest.param({"value": 0, "code": "d"}, "value is not a positive length of time"),
        pytest.param({"value": True, "code": "d"}, "value is not a number"),
        pytest.param({"value": "7", "code": "d"}, "value is not a number"),
        pytest.param({"value": 7}, "code is missing"),
        pytest.param({"value": 7, "code": "mg"}, "code 'mg' is not a unit of time"),
        pytest.param({"value": 1e300, "code": "a"}, "value is too long a time"),
    ],
)
def test_invalid_durations(duration: dict[str, Any], message: str) -> None:
    with pytest.raises(Unmappable) as raised:
        duration_of(duration)
    assert raised.value.message.startswith(message)


@pytest.mark.parametrize(
    ("fields", "occurred", "recorded"),
    [
        pytest.param(
            {
                "recordedDate": "2010-03-01",
                "onsetDateTime": "2004",
                "meta": {"lastUpdated": "2016-05-01T10:00:00Z"},
            },
            utc(2010, 3, 1),
            utc(2016, 5, 1, 10),
            id="given recordedDate, onset and lastUpdated then recordedDate and lastUpdated",
        ),
        pytest.param(
            {"recordedDate": None, "onsetDateTime": "2004"},
            utc(2004, 1, 1),
            utc(2004, 1, 1),
            id="given only an onset then the onset for both times",
        ),
        pytest.param(
            {"recordedDate": None, "onsetPeriod": {"start": "2003-07"}},
            utc(2003, 7, 1),
            utc(2003, 7, 1),
            id="given only an onset period then its start",
        ),
        pytest.param(
            {"recordedDate": None, "meta": {"lastUpdated": "2016-05-01T10:00:00+02:00"}},
            utc(2016, 5, 1, 8),
            utc(2016, 5, 1, 8),
            id="given only meta.lastUpdated then lastUpdated",
        ),
        pytest.param(
            {"recordedDate": None},
            FALLBACK,
            FALLBACK,
            id="given no time at all then the caller's fallback time",
        ),
        pytest.param(
            {
                "verificationStatus": status("refuted"),
                "meta": {"lastUpdated": "2016-05-01T10:00:00Z"},
            },
            utc(2016, 5, 1, 10),
            utc(2016, 5, 1, 10),
            id="given a refuted record then lastUpdated, the time of the refutation, comes first",
        ),
        pytest.param(
            {"clinicalStatus": status("resolved")},
            utc(2010, 3, 1),
            utc(2010, 3, 1),
            id="given a resolved record without lastUpdated then recordedDate",
        ),
    ],
)
def test_allergy_times(fields: dict[str, Any], occurred: datetime, recorded: datetime) -> None:
    (event,) = events_of(changed(PENICILLIN, **fields))
    assert (event.occurred_at, event.recorded_at) == (occurred, recorded)


# MedicationRequest


def test_given_a_contained_medication_when_imported_then_its_code_and_the_dosage_text() -> None:
    payload = only_payload(example("MedicationRequest-medrx0302"))
    assert payload == MedicationPrescribed(
        prescription_id="medrx0302",
        drug="Azithromycin 250mg capsule (product)",
        codes=(
            Coding(system=SNOMED, code="324252006", display="Azithromycin 250mg capsule (product)"),
        ),
        dose="Two tablets at once",
        route="Oral Route",
        note="Patient told to take with food",
    )


@pytest.mark.parametrize(
    ("resources", "drug", "codes"),
    [
        pytest.param(
            [example("MedicationRequest-medrx0319")],
            "Zosyn (piperacillin/tazobactam) 4.5gm injection",
            ((NDC, "0206-8862-02"),),
            id="given a contained NDC-coded Medication when imported then its display and NDC code",
        ),
        pytest.param(
            [example("MedicationRequest-medrx002"), example("Medication-med0316")],
            "Chlorthalidone 50mg tablet (product)",
            ((SNOMED, "317935006"), (SNOMED, "387324004")),
            id="given Medication/id found in the input set when imported then that Medication "
            "and the code of the Substance it contains as its ingredient",
        ),
        pytest.param(
            [example("MedicationRequest-medrx0308")],
            "Vicodin 5/500 Oral Tablet",
            ((RXNORM, "856907"),),
            id="given an RxNorm medicationCodeableConcept when imported then its display and code",
        ),
        pytest.param(
            [example("MedicationRequest-medrx0322")],
            "Potassium Chloride / Sodium Chloride 0.9% injectable solution",
            ((RXNORM, "204520"), (RXNORM, "313002")),
            id="given a Medication with ingredients but no code when imported then their names "
            "and codes",
        ),
        pytest.param(
            [
                changed(
                    example("MedicationRequest-medrx0302"),
                    medicationReference=None,
                    medicationCodeableConcept={"text": "amoxicillin 500 mg"},
                )
            ],
            "amoxicillin 500 mg",
            (),
            id="given a text-only medication when imported then the text and no codes",
        ),
        pytest.param(
            [
                {
                    "resourceType": "Bundle",
                    "type": "transaction",
                    "entry": [
                        {
                            "fullUrl": "urn:uuid:6b1c0c3a-0000-4000-8000-000000000001",
                            "resource": changed(
                                example("Medication-med0316"), id="local-chlorthalidone"
                            ),
                        },
                        {
                            "fullUrl": "urn:uuid:6b1c0c3a-0000-4000-8000-000000000002",
                            "resource": changed(
                                example("MedicationRequest-medrx002"),
                                medicationReference={
                                    "reference": "urn:uuid:6b1c0c3a-0000-4000-8000-000000000001"
                                },
                            ),
                        },
                    ],
                }
            ],
            "Chlorthalidone 50mg tablet (product)",
            ((SNOMED, "317935006"), (SNOMED, "387324004")),
            id="given a urn:uuid reference to a bundle entry when imported then that Medication",
        ),
        pytest.param(
            [
                changed(
                    example("MedicationRequest-medrx0302"),
                    medicationReference={"reference": "#pip-taz"},
                    contained=[
                        {
                            "resourceType": "Medication",
                            "id": "pip-taz",
                            "ingredient": [
                                {"itemCodeableConcept": {"coding": [rxnorm("8339")]}},
                                {"itemCodeableConcept": {"coding": [rxnorm("37617")]}},
                            ],
                        }
                    ],
                )
            ],
            "8339 / 37617",
            ((RXNORM, "8339"), (RXNORM, "37617")),
            id="given a Medication of coded ingredients without names then their codes",
        ),
        pytest.param(
            [
                changed(
                    example("MedicationRequest-medrx0302"),
                    medicationReference={"reference": "#pip-taz"},
                    contained=[
                        {
                            "resourceType": "Medication",
                            "id": "pip-taz",
                            "code": {
                                "coding": [
                                    {
                                        "system": "http://hospital.example/formulary",
                                        "code": "PT45",
                                        "display": "PIP-TAZ 4.5 G IVPB",
                                    }
                                ]
                            },
                            "ingredient": [
                                {"itemCodeableConcept": {"coding": [rxnorm("8339")]}},
                                {"itemCodeableConcept": {"coding": [rxnorm("37617")]}},
                            ],
                        }
                    ],
                )
            ],
            "PIP-TAZ 4.5 G IVPB",
            (
                ("http://hospital.example/formulary", "PT45"),
                (RXNORM, "8339"),
                (RXNORM, "37617"),
            ),
            id="given a local Medication code and coded ingredients then every code",
        ),
    ],
)
def test_medication_sources(
    resources: list[dict[str, Any]], drug: str, codes: tuple[tuple[str, str], ...]
) -> None:
    prescribed = [
        e.payload for e in events_of(*resources) if isinstance(e.payload, MedicationPrescribed)
    ]
    assert [(p.drug, tuple((c.system, c.code) for c in p.codes)) for p in prescribed] == [
        (drug, codes)
    ]


ACTIVE_ORDER = example("MedicationRequest-medrx0332")
ORDERED = utc(2015, 1, 15)


@pytest.mark.parametrize(
    ("fields", "stop"),
    [
        pytest.param({"status": "active"}, None, id="given an active order then no stop"),
        pytest.param({"status": "on-hold"}, None, id="given an on-hold order then no stop"),
        pytest.param({"status": "unknown"}, None, id="given status unknown then no stop"),
        pytest.param(
            {"status": "stopped"},
            ("stopped", ORDERED + timedelta(milliseconds=1)),
            id="given stopped with no end time then a stop 1 ms after the order",
        ),
        pytest.param(
            {"status": "cancelled"},
            ("cancelled", ORDERED + timedelta(milliseconds=1)),
            id="given cancelled then a stop with reason cancelled",
        ),
        pytest.param(
            {"status": "completed", "meta": {"lastUpdated": "2015-02-01T00:00:00Z"}},
            ("completed", utc(2015, 2, 1)),
            id="given completed and lastUpdated then stopped at lastUpdated",
        ),
        pytest.param(
            {
                "status": "completed",
                "dispenseRequest": {"validityPeriod": {"start": "2015-01-15", "end": "2016-01-15"}},
            },
            ("completed", utc(2016, 1, 16)),
            id="given completed and a validity period ending on a date then stopped after that day",
        ),
        pytest.param(
            {
                "status": "completed",
                "dispenseRequest": {"validityPeriod": {"end": "2016-01-15"}},
                "meta": {"lastUpdated": "2015-03-01T00:00:00Z"},
            },
            ("completed", utc(2015, 3, 1)),
            id="given a validity end after lastUpdated then capped at lastUpdated",
        ),
        pytest.param(
            {
                "status": "completed",
                "dispenseRequest": {"validityPeriod": {"end": "2016-01-15"}},
                "dosageInstruction": [
                    {"timing": {"repeat": {"boundsPeriod": {"end": "2015-01-20"}}}},
                    {"timing": {"repeat": {"boundsPeriod": {"end": "2015-01-25"}}}},
                ],
            },
            ("completed", utc(2015, 1, 26)),
            id="given dosage bounds then the latest therapy end wins over the validity end",
        ),
        pytest.param(
            {"status": "completed", "dispenseRequest": {"validityPeriod": {"end": "2027-01-01"}}},
            ("completed", FALLBACK),
            id="given a validity end after the import and no lastUpdated then the fallback time",
        ),
        pytest.param(
            {"status": "stopped", "meta": {"lastUpdated": "2014-01-01T00:00:00Z"}},
            ("stopped", ORDERED + timedelta(milliseconds=1)),
            id="given a lastUpdated before the order then it is not a stop time",
        ),
        pytest.param(
            {"status": "stopped", "statusReason": {"text": "rash"}},
            ("stopped: rash", ORDERED + timedelta(milliseconds=1)),
            id="given a status reason then it is part of the stop reason",
        ),
    ],
)
def test_ended_requests_are_stopped_after_the_order(
    fields: dict[str, Any], stop: tuple[str, datetime] | None
) -> None:
    events = events_of(changed(ACTIVE_ORDER, **fields))
    assert isinstance(events[0].payload, MedicationPrescribed)
    assert events[0].payload.prescription_id == "medrx0332"
    assert events[0].occurred_at == ORDERED
    if stop is None:
        assert [e.type for e in events] == [EventType.MEDICATION_PRESCRIBED]
        return
    prescribed, stopped = events
    assert stopped.payload == MedicationStopped(prescription_id="medrx0332", reason=stop[0])
    assert stopped.occurred_at == stop[1]
    assert stopped.recorded_at >= prescribed.recorded_at
    assert (stopped.occurred_at, stopped.recorded_at) > (
        prescribed.occurred_at,
        prescribed.recorded_at,
    )
    assert stopped.source_ref == prescribed.source_ref == "MedicationRequest/medrx0332"


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        pytest.param(
            {"intent": "proposal"},
            "MedicationRequest intent proposal is not a prescription",
            id="given intent proposal then skipped as not a prescription",
        ),
        pytest.param(
            {"intent": "option"},
            "MedicationRequest intent option is not a prescription",
            id="given intent option then skipped as not a prescription",
        ),
        pytest.param(
            {"status": "draft"},
            "MedicationRequest status draft is not yet a prescription",
            id="given a draft then skipped as not yet a prescription",
        ),
        pytest.param(
            {"doNotPerform": True},
            "MedicationRequest doNotPerform: an instruction not to give the drug",
            id="given doNotPerform then skipped: it forbids the drug",
        ),
        pytest.param(
            {"subject": {"reference": "Group/ward-3"}},
            "the subject is a Group, not a Patient",
            id="given a Group subject then skipped",
        ),
    ],
)
def test_requests_that_are_not_prescriptions_are_skipped_with_a_reason(
    fields: dict[str, Any], reason: str
) -> None:
    result = run(changed(ACTIVE_ORDER, **fields))
    assert (result.events, result.errors) == ([], [])
    assert [(s.origin, s.resource_type, s.resource_id, s.reason) for s in result.skipped] == [
        ("test#0", "MedicationRequest", "medrx0332", reason)
    ]


def test_given_a_subject_reference_that_names_no_resource_type_then_an_error_not_a_skip() -> None:
    reference = "https://fhi.no/fhir/lmdi/pasient/12345678"
    result = run(changed(ACTIVE_ORDER, subject={"reference": reference}))
    assert (result.events, result.skipped) == ([], [])
    assert [(e.reason, reference in e.message) for e in result.errors] == [("invalid_value", True)]


@pytest.mark.parametrize("subject", ["Practitioner/dr-1", "Device/pump-2", "Location/ward-3"])
def test_given_a_subject_that_is_no_patient_nor_group_then_an_error_not_a_skip(
    subject: str,
) -> None:
    """R4's MedicationRequest.subject is Reference(Patient | Group): a Group is skipped (no one
    person), a Practitioner is a mistake of the sender, and the order is not lost silently."""
    result = run(changed(ACTIVE_ORDER, subject={"reference": subject}))
    assert (result.events, result.skipped) == ([], [])
    assert [(e.reason, e.message) for e in result.errors] == [
        (
            "invalid_value",
            f"MedicationRequest/medrx0332: subject.reference {subject!r} is not a Patient (the "
            "element is Reference(Patient | Group))",
        )
    ]


def test_given_a_drug_reference_that_names_another_resource_type_then_it_says_so() -> None:
    result = run(
        changed(ACTIVE_ORDER, medicationReference={"reference": "Patient/pat1"}),
        {"resourceType": "Patient", "id": "pat1"},
    )
    assert not any(isinstance(event.payload, MedicationPrescribed) for _, event in result.events)
    assert [(e.reason, e.message) for e in result.errors] == [
        (
            "invalid_value",
            "MedicationRequest/medrx0332: Patient/pat1 is not a Medication (the drug is a "
            "Reference(Medication)): which drug is meant cannot be told",
        )
    ]


@pytest.mark.parametrize(
    "intent",
    ["order", "original-order", "reflex-order", "filler-order", "instance-order", "plan"],
)
def test_given_a_prescribing_intent_when_imported_then_a_prescription(intent: str) -> None:
    assert [e.type for e in events_of(changed(ACTIVE_ORDER, intent=intent))] == [
        EventType.MEDICATION_PRESCRIBED
    ]


# An order that replaces an earlier one (priorPrescription)

REPLACED = changed(ACTIVE_ORDER, id="rx-old")
REPLACEMENT = changed(
    ACTIVE_ORDER,
    id="rx-new",
    authoredOn="2015-02-01",
    priorPrescription={"reference": "MedicationRequest/rx-old"},
)


def replacement_stops(*resources: Any) -> list[tuple[str, str | None, datetime]]:
    return [
        (event.payload.prescription_id, event.payload.reason, event.occurred_at)
        for event in events_of(*resources)
        if isinstance(event.payload, MedicationStopped)
        and event.payload.prescription_id == "rx-old"
        and event.source_ref == "MedicationRequest/rx-new"
    ]


@pytest.mark.parametrize(
    "resources",
    [
        pytest.param((REPLACED, REPLACEMENT), id="given the replaced order in the input set"),
        pytest.param((REPLACEMENT,), id="given only the replacement (the other imported before)"),
    ],
)
def test_given_an_order_that_replaces_another_then_that_one_stops_when_the_new_one_starts(
    resources: tuple[dict[str, Any], ...],
) -> None:
    assert replacement_stops(*resources) == [
        ("rx-old", "replaced by MedicationRequest/rx-new", utc(2015, 2, 1))
    ]


@pytest.mark.parametrize(
    "resources",
    [
        pytest.param(
            (REPLACED, changed(REPLACEMENT, status="cancelled")),
            id="given a cancelled replacement then it replaced nothing",
        ),
        pytest.param(
            (REPLACED, changed(REPLACEMENT, status="entered-in-error")),
            id="given a replacement entered in error then it replaced nothing",
        ),
        pytest.param(
            (changed(REPLACED, status="completed"), REPLACEMENT),
            id="given a replaced order that has ended then it keeps its own stop",
        ),
        pytest.param(
            (changed(REPLACEMENT, priorPrescription={"reference": "MedicationRequest/rx-new"}),),
            id="given an order that names itself then nothing",
        ),
        pytest.param(
            (
                REPLACED,
                changed(REPLACEMENT, meta={"versionId": "1"}),
                changed(REPLACEMENT, meta={"versionId": "2"}, status="entered-in-error"),
            ),
            id="given a replacement whose newer version is entered in error then nothing",
        ),
    ],
)
def test_given_an_order_that_replaced_nothing_in_force_then_no_replacement_stop(
    resources: tuple[dict[str, Any], ...],
) -> None:
    assert replacement_stops(*resources) == []


def test_given_a_replaced_order_dated_after_its_replacement_then_stopped_just_after_it() -> None:
    later = changed(REPLACED, authoredOn="2015-03-01")
    assert replacement_stops(later, REPLACEMENT) == [
        ("rx-old", "replaced by MedicationRequest/rx-new", utc(2015, 3, 1) + JUST_AFTER)
    ]


def test_given_a_prior_prescription_that_cannot_be_read_then_the_order_is_imported_without_it() -> (
    None
):
    result = run(changed(REPLACEMENT, priorPrescription={"reference": 42}))
    assert result.errors == []
    assert [event.type for _, event in result.events] == [EventType.MEDICATION_PRESCRIBED]
    assert [note.detail for note in result.passed_over] == [
        "priorPrescription.reference is not a string (imported without it)"
    ]


# MedicationStatement

STATEMENT: dict[str, Any] = {
    "resourceType": "MedicationStatement",
    "id": "ms-1",
    "status": "active",
    "medicationCodeableConcept": {
        "coding": [{"system": RXNORM, "code": "308182", "display": "amoxicillin 250 MG"}],
        "text": "Amoxicillin 250 mg capsule",
    },
    "subject": {"reference": "Patient/pat1"},
    "effectiveDateTime": "2024-03-01T08:00:00Z",
    "dateAsserted": "2024-03-05T10:00:00Z",
    "dosage": [{"text": "250 mg three times a day", "route": {"text": "Oral Route"}}],
    "note": [{"text": "reported by the patient"}],
}


def test_given_a_statement_of_a_drug_taken_when_imported_then_a_prescription_with_its_fields() -> (
    None
):
    (event,) = events_of(STATEMENT)
    assert event.payload == MedicationPrescribed(
        prescription_id="MedicationStatement/ms-1",
        drug="Amoxicillin 250 mg capsule",
        codes=(Coding(system=RXNORM, code="308182", display="amoxicillin 250 MG"),),
        dose="250 mg three times a day",
        route="Oral Route",
        note="reported by the patient",
    )
    assert (event.occurred_at, event.source_ref, event.origin) == (
        utc(2024, 3, 1, 8),
        "MedicationStatement/ms-1",
        Origin.IMPORTED,
    )


@pytest.mark.parametrize(
    ("fields", "occurred"),
    [
        pytest.param({}, utc(2024, 3, 1, 8), id="given effectiveDateTime then it"),
        pytest.param(
            {"effectiveDateTime": None, "effectivePeriod": {"start": "2024-02-01"}},
            utc(2024, 2, 1),
            id="given an effective period then its start",
        ),
        pytest.param(
            {"effectiveDateTime": None},
            utc(2024, 3, 5, 10),
            id="given no effective time then dateAsserted",
        ),
        pytest.param(
            {
                "status": "intended",
                "effectiveDateTime": None,
                "effectivePeriod": {"start": "2024-04-01"},
            },
            utc(2024, 3, 5, 10),
            id="given a use planned to start after it was asserted then dateAsserted",
        ),
        pytest.param(
            {
                "dateAsserted": None,
                "effectiveDateTime": None,
                "effectivePeriod": {"start": "2099-04-01"},
                "meta": {"lastUpdated": "2024-03-07T09:00:00Z"},
            },
            utc(2024, 3, 7, 9),
            id="given a use planned to start after it was last updated then meta.lastUpdated",
        ),
        pytest.param(
            {"dateAsserted": None, "effectiveDateTime": "2099-04-01T08:00:00Z"},
            FALLBACK,
            id="given a use planned to start after the import's fallback time then that time",
        ),
    ],
)
def test_statement_times(fields: dict[str, Any], occurred: datetime) -> None:
    (event,) = events_of(changed(STATEMENT, **fields))
    assert event.occurred_at == occurred


@pytest.mark.parametrize("state", ["active", "intended", "on-hold", "unknown"])
def test_given_a_drug_being_taken_then_a_prescription_without_a_stop(state: str) -> None:
    assert [e.type for e in events_of(changed(STATEMENT, status=state))] == [
        EventType.MEDICATION_PRESCRIBED
    ]


@pytest.mark.parametrize(
    ("fields", "stop"),
    [
        pytest.param(
            {
                "status": "completed",
                "effectiveDateTime": None,
                "effectivePeriod": {"start": "2024-02-01", "end": "2024-02-10"},
            },
            ("completed", utc(2024, 2, 11)),
            id="given a completed course then stopped after the last day of its period",
        ),
        pytest.param(
            {"status": "stopped", "statusReason": [{"text": "rash"}]},
            ("stopped: rash", utc(2024, 3, 1, 8) + timedelta(milliseconds=1)),
            id="given stopped with a reason and no end then a stop just after the start",
        ),
    ],
)
def test_given_a_drug_no_longer_taken_then_a_prescription_and_its_stop(
    fields: dict[str, Any], stop: tuple[str, datetime]
) -> None:
    prescribed, stopped = events_of(changed(STATEMENT, **fields))
    assert stopped.payload == MedicationStopped(
        prescription_id="MedicationStatement/ms-1", reason=stop[0]
    )
    assert stopped.occurred_at == stop[1]
    assert stopped.occurred_at > prescribed.occurred_at


def test_given_a_statement_entered_in_error_then_only_a_stop() -> None:
    (event,) = events_of(changed(STATEMENT, status="entered-in-error"))
    assert event.type == EventType.MEDICATION_STOPPED


def test_given_a_statement_on_an_order_entered_in_error_then_the_order_is_left_alone() -> None:
    order = changed(ACTIVE_ORDER, subject={"reference": "Patient/pat1"})
    statement = changed(
        STATEMENT,
        status="entered-in-error",
        basedOn=[{"reference": "MedicationRequest/medrx0332"}],
    )
    result = run(order, statement)
    assert [event.type for _, event in result.events] == [EventType.MEDICATION_PRESCRIBED]
    assert [s.reason for s in result.skipped] == [
        "MedicationStatement entered-in-error: MedicationRequest/medrx0332 is unchanged"
    ]


def test_given_a_drug_not_taken_then_skipped_with_a_reason() -> None:
    result = run(changed(STATEMENT, status="not-taken"))
    assert (result.events, result.errors) == ([], [])
    assert [s.reason for s in result.skipped] == [
        "MedicationStatement not-taken: the patient does not take the drug"
    ]


IPS_ABSENT = "http://hl7.org/fhir/uv/ips/CodeSystem/absent-unknown-uv-ips"


@pytest.mark.parametrize(
    "medication",
    [
        pytest.param(
            {"coding": [{"system": IPS_ABSENT, "code": "no-known-medications"}]},
            id="given the IPS no-known-medications code",
        ),
        pytest.param(
            {"coding": [{"system": IPS_ABSENT, "code": "no-medication-info"}]},
            id="given the IPS no-medication-info code",
        ),
        pytest.param({"text": "No known medications"}, id="given that text without a code"),
    ],
)
def test_given_a_statement_that_no_medication_is_known_then_skipped_not_a_drug(
    medication: dict[str, Any],
) -> None:
    result = run(changed(STATEMENT, medicationCodeableConcept=medication))
    assert (result.events, result.errors) == ([], [])
    assert [s.reason for s in result.skipped] == [
        "MedicationStatement states that no medication is known (or no info)"
    ]


def test_given_an_invalid_status_then_an_error() -> None:
    result = run(changed(STATEMENT, status="taking"))
    assert [(e.reason, e.message) for e in result.errors] == [
        (
            "invalid_value",
            "MedicationStatement/ms-1: status 'taking' is not a statement status (one of active,"
            " completed, entered-in-error, intended, not-taken, on-hold, stopped, unknown)",
        )
    ]


def test_given_a_statement_based_on_an_order_then_it_reports_on_that_prescription() -> None:
    order = changed(ACTIVE_ORDER, subject={"reference": "Patient/pat1"})
    statement = changed(
        STATEMENT,
        status="completed",
        basedOn=[{"reference": "MedicationRequest/medrx0332"}],
        effectiveDateTime=None,
        effectivePeriod={"start": "2015-01-15", "end": "2015-02-15"},
    )
    events = events_of(order, statement)
    assert {prescription_of(e) for e in events} == {"medrx0332"}
    assert [e.type for e in events] == [
        EventType.MEDICATION_PRESCRIBED,
        EventType.MEDICATION_PRESCRIBED,
        EventType.MEDICATION_STOPPED,
    ]


# Subjects


@pytest.mark.parametrize(
    ("reference", "subject"),
    [
        pytest.param("Patient/pat1", "pat1", id="given Patient/id then the id"),
        pytest.param(
            "https://ehr.example/fhir/Patient/pat1/_history/3",
            "pat1",
            id="given an absolute versioned URL then the id",
        ),
    ],
)
def test_subject_references(reference: str, subject: str) -> None:
    (event,) = events_of(changed(ACTIVE_ORDER, subject={"reference": reference}))
    assert event.subject_id == subject


def test_given_a_urn_uuid_matching_a_patient_entry_when_imported_then_that_patients_id() -> None:
    bundle = {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [
            {
                "fullUrl": "urn:uuid:0f7a7a4e-1111-4222-8333-944444444444",
                "resource": {"resourceType": "Patient", "id": "pat-42"},
            },
            {
                "fullUrl": "urn:uuid:0f7a7a4e-1111-4222-8333-955555555555",
                "resource": changed(
                    PENICILLIN,
                    patient={"reference": "urn:uuid:0f7a7a4e-1111-4222-8333-944444444444"},
                ),
            },
        ],
    }
    result = run(bundle)
    assert [(origin, event.subject_id) for origin, event in result.events] == [
        ("test#0#entry[1]", "pat-42")
    ]


@pytest.mark.parametrize(
    ("full_url", "identity"),
    [
        pytest.param(
            "urn:uuid:47600e0f-b6b5-4308-84b5-5dec157f7637",
            "47600e0f-b6b5-4308-84b5-5dec157f7637",
            id="given a urn uuid then the uuid",
        ),
        pytest.param("urn:oid:1.2.3.4", "1.2.3.4", id="given a urn oid then the oid"),
        pytest.param(
            "https://fhir.example/r4/AllergyIntolerance/a-7/_history/2",
            "a-7",
            id="given a resource URL then its id",
        ),
    ],
)
def test_given_a_bundle_entry_without_an_id_then_its_full_url_identifies_it(
    full_url: str, identity: str
) -> None:
    bundle = {
        "resourceType": "Bundle",
        "type": "document",
        "entry": [{"fullUrl": full_url, "resource": changed(PENICILLIN, id=None)}],
    }
    first, second = run(bundle), run(bundle)
    assert first.errors == []
    assert [event.source_ref for _, event in first.events] == [f"AllergyIntolerance/{identity}"]
    assert [allergy_of(event) for _, event in first.events] == [identity]
    assert [event.id for _, event in first.events] == [event.id for _, event in second.events]


@pytest.mark.parametrize(
    "full_url",
    [
        pytest.param(None, id="given no fullUrl"),
        pytest.param("https://fhir.example/r4/Patient/p-1", id="given the URL of another type"),
    ],
)
def test_given_no_id_and_no_identifying_full_url_then_an_error(full_url: str | None) -> None:
    entry: dict[str, Any] = {"resource": changed(PENICILLIN, id=None)}
    if full_url is not None:
        entry["fullUrl"] = full_url
    result = run({"resourceType": "Bundle", "type": "transaction", "entry": [entry]})
    assert result.events == []
    assert [(error.reason, "id is missing" in error.message) for error in result.errors] == [
        ("missing_field", True)
    ]


@pytest.mark.parametrize(
    ("resource", "said"),
    [
        pytest.param(
            changed(PENICILLIN, recordedDate="0001-01-01T00:30:00+01:00"),
            "is out of the range of dates",
            id="given a date before year 1 in UTC",
        ),
        pytest.param(
            changed(
                ACTIVE_ORDER,
                status="completed",
                authoredOn="9999-12-31T23:59:59.999Z",
                meta={"lastUpdated": "9999-12-31T23:59:59.999Z"},
            ),
            "at the edge of the range of dates",
            id="given an ended order at the last instant of year 9999",
        ),
    ],
)
def test_given_a_date_at_the_edge_of_the_range_then_an_error_not_a_crash(
    resource: dict[str, Any], said: str
) -> None:
    result = run(resource)
    assert result.events == []
    assert [(e.reason, said in e.message) for e in result.errors] == [("invalid_value", True)]


def test_given_an_id_that_is_not_a_string_then_an_error_that_says_so() -> None:
    result = run(changed(PENICILLIN, id=123))
    assert result.events == []
    assert [(error.reason, error.message) for error in result.errors] == [
        ("invalid_value", "AllergyIntolerance: id is not a string: 123")
    ]


def patient_with(identifier_value: str, patient_id: str) -> dict[str, Any]:
    identifier = {"system": "urn:oid:1.2.36.146.595.217.0.1", "value": identifier_value}
    return {"resourceType": "Patient", "id": patient_id, "identifier": [identifier]}


BY_IDENTIFIER = {"identifier": {"system": "urn:oid:1.2.36.146.595.217.0.1", "value": "12345"}}


def test_given_a_patient_named_by_identifier_then_the_patient_of_the_input_set_carrying_it() -> (
    None
):
    result = run(patient_with("12345", "p-7"), changed(PENICILLIN, patient=BY_IDENTIFIER))
    assert result.errors == []
    assert [event.subject_id for _, event in result.events] == ["p-7"]


@pytest.mark.parametrize(
    ("patients", "said"),
    [
        pytest.param((), "which no Patient of the input set carries", id="given none carries it"),
        pytest.param(
            (patient_with("12345", "p-7"), patient_with("12345", "p-8")),
            "is carried by more than one Patient",
            id="given two patients carry it",
        ),
    ],
)
def test_given_an_identifier_no_single_patient_carries_then_an_unresolved_reference(
    patients: tuple[dict[str, Any], ...], said: str
) -> None:
    result = run(*patients, changed(PENICILLIN, patient=BY_IDENTIFIER))
    assert result.events == []
    assert [(error.reason, said in error.message) for error in result.errors] == [
        ("unresolved_reference", True)
    ]


# Patient -> home country


PATIENT = synthea("Patient", "cbc86e51-9eca-3855-76ec-c058f72c5761")
ASPIRIN_ALLERGY = "AllergyIntolerance/1b2ce4a9-9773-f40f-6692-cb4d1283a9ca"


@pytest.mark.parametrize(
    ("country", "code"),
    [
        pytest.param("US", "US", id="given an alpha-2 code then the code"),
        pytest.param("nl", "NL", id="given a lower-case alpha-2 code then upper case"),
        pytest.param("USA", "US", id="given an alpha-3 code then alpha-2"),
        pytest.param("U.S.A.", "US", id="given an abbreviation with dots then alpha-2"),
        pytest.param("United Kingdom", "GB", id="given an English name then alpha-2"),
        pytest.param("Atlantis", None, id="given an unknown name then no guess"),
        pytest.param("XK", None, id="given a code that is not ISO-assigned then no guess"),
    ],
)
def test_country_codes(country: str, code: str | None) -> None:
    assert country_code(country) == code


def test_given_a_synthea_patient_when_imported_then_a_home_country_fact_at_the_fallback_time() -> (
    None
):
    (event,) = events_of(PATIENT)
    assert event.payload == FactAsserted(key="home_country", value="US")
    assert (event.subject_id, event.source_ref) == (
        "cbc86e51-9eca-3855-76ec-c058f72c5761",
        "Patient/cbc86e51-9eca-3855-76ec-c058f72c5761",
    )
    assert (event.sensitivity, event.occurred_at) == (Sensitivity.NORMAL, FALLBACK)


def test_given_a_home_address_with_a_period_when_imported_then_the_fact_dates_from_its_start() -> (
    None
):
    addresses = [
        {"use": "work", "country": "DE"},
        {"use": "home", "country": "NL", "period": {"start": "2001-04-01"}},
    ]
    (event,) = events_of(changed(PATIENT, address=addresses))
    assert (event.payload, event.occurred_at) == (
        FactAsserted(key="home_country", value="NL"),
        utc(2001, 4, 1),
    )


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        pytest.param(
            None,
            "Patient without an address country: no home_country fact (the records naming it are still imported)",
            id="given no address then skipped with a reason",
        ),
        pytest.param(
            [{"city": "Olathe"}],
            "Patient without an address country: no home_country fact (the records naming it are still imported)",
            id="given an address without a country then skipped with a reason",
        ),
        pytest.param(
            [{"country": "Atlantis"}],
            "Patient address country 'Atlantis' is not an ISO 3166-1 code or name",
            id="given an unknown country then skipped with the value, never guessed",
        ),
    ],
)
def test_patients_without_a_usable_country(address: Any, reason: str) -> None:
    result = run(changed(PATIENT, address=address))
    assert (result.events, result.errors) == ([], [])
    assert [s.reason for s in result.skipped] == [reason]


# Deterministic ids


def test_given_the_same_input_twice_when_imported_then_the_same_event_ids() -> None:
    resources = [PENICILLIN, example("MedicationRequest-medrx0319"), PATIENT]
    first, second = events_of(*resources), events_of(*copy.deepcopy(resources))
    assert [e.event_id for e in first] == [e.event_id for e in second]
    assert first == second
    assert len({e.event_id for e in first}) == len(first) == 4


@pytest.mark.parametrize(
    ("variant", "context"),
    [
        pytest.param(
            changed(PENICILLIN, meta={"versionId": "2"}),
            CONTEXT,
            id="given a new versionId then new ids",
        ),
        pytest.param(
            changed(PENICILLIN, meta={"lastUpdated": "2016-01-01T00:00:00Z"}),
            CONTEXT,
            id="given a new lastUpdated then new ids",
        ),
        pytest.param(
            PENICILLIN,
            ImportContext(tenant_id="clinic-b", actor="fhir-import", fallback_time=FALLBACK),
            id="given another tenant then new ids",
        ),
    ],
)
def test_event_ids_change_with_version_and_tenant(
    variant: dict[str, Any], context: ImportContext
) -> None:
    (original,) = events_of(PENICILLIN)
    ((_, changed_event),) = run(variant, context=context).events
    assert changed_event.event_id != original.event_id


def test_given_different_fallback_times_when_a_timeless_resource_is_imported_then_new_ids() -> None:
    later = ImportContext(
        tenant_id="clinic-a", actor="fhir-import", fallback_time=FALLBACK + timedelta(days=1)
    )
    ((_, first),), ((_, second),) = run(PATIENT).events, run(PATIENT, context=later).events
    assert first.event_id != second.event_id


def document(timestamp: str | None, *resources: Any, last_updated: str | None = None) -> Any:
    bundle: dict[str, Any] = {"resourceType": "Bundle", "type": "document"}
    if timestamp is not None:
        bundle["timestamp"] = timestamp
    if last_updated is not None:
        bundle["meta"] = {"lastUpdated": last_updated}
    bundle["entry"] = [{"resource": resource} for resource in resources]
    return bundle


@pytest.mark.parametrize(
    ("bundle", "expected"),
    [
        pytest.param(
            document("2020-12-11T14:30:00+01:00", PATIENT),
            utc(2020, 12, 11, 13, 30),
            id="given a Bundle timestamp then that time",
        ),
        pytest.param(
            document(None, PATIENT, last_updated="2021-03-04T05:06:07Z"),
            utc(2021, 3, 4, 5, 6, 7),
            id="given only the Bundle's meta.lastUpdated then that time",
        ),
        pytest.param(
            document("2020-12-11T14:30:00+01:00", document(None, PATIENT)),
            utc(2020, 12, 11, 13, 30),
            id="given a nested Bundle without a time then the enclosing Bundle's",
        ),
        pytest.param(
            document("yesterday", PATIENT),
            FALLBACK,
            id="given an invalid Bundle timestamp then the caller's fallback time",
        ),
    ],
)
def test_given_a_timeless_resource_in_a_bundle_then_it_is_dated_at_the_bundle_time(
    bundle: Any, expected: datetime
) -> None:
    (event,) = events_of(bundle)
    assert (event.occurred_at, event.recorded_at) == (expected, expected)


def test_given_a_document_imported_twice_then_its_timeless_resources_keep_their_ids() -> None:
    later = ImportContext(
        tenant_id="clinic-a", actor="fhir-import", fallback_time=FALLBACK + timedelta(days=1)
    )
    bundle = document("2020-12-11T14:30:00+01:00", PATIENT)
    ((_, first),), ((_, second),) = run(bundle).events, run(bundle, context=later).events
    ((_, newer),) = run(document("2021-01-05T09:00:00Z", PATIENT)).events
    assert first.event_id == second.event_id
    assert newer.event_id != first.event_id


# Unsupported and malformed input


def test_given_synthea_resources_of_other_types_when_imported_then_each_is_skipped_with_its_type() -> (
    None
):
    lines = []
    for resource_type in ("Encounter", "Condition"):
        with (SYNTHEA / f"{resource_type}.000.ndjson").open(encoding="utf-8") as source:
            lines.append(source.readline())
    result = import_fhir(parse_ndjson(lines, "mixed.ndjson"), CONTEXT)
    assert (result.events, result.errors) == ([], [])
    assert [(s.origin, s.resource_type, s.reason) for s in result.skipped] == [
        ("mixed.ndjson:1", "Encounter", "unsupported resource type Encounter"),
        ("mixed.ndjson:2", "Condition", "unsupported resource type Condition"),
    ]
    assert all(s.resource_id for s in result.skipped)


def test_given_unmapped_types_dropped_while_reading_then_the_same_import_and_skips() -> None:
    lines = []
    for resource_type in ("Encounter", "AllergyIntolerance", "Condition", "Patient"):
        with (SYNTHEA / f"{resource_type}.000.ndjson").open(encoding="utf-8") as source:
            lines.extend(source.readlines()[:3])
    slim = parse_ndjson(lines, "mixed.ndjson", each=without_unmapped)
    assert {item.resource_type for item in slim.resources} == {"AllergyIntolerance", "Patient"}
    whole = import_fhir(parse_ndjson(lines, "mixed.ndjson"), CONTEXT)
    result = import_fhir(slim, CONTEXT)
    assert result.events == whole.events
    assert sorted(result.skipped, key=lambda s: s.origin) == sorted(
        whole.skipped, key=lambda s: s.origin
    )
    assert result.skip_counts()["unsupported resource type Encounter"] == 3


@pytest.mark.parametrize(
    ("name", "reasons"),
    [
        pytest.param(
            "DetectedIssue-ddi",
            ["unsupported resource type DetectedIssue"],
            id="given a DetectedIssue then skipped as unsupported",
        ),
        pytest.param(
            "List-current-allergies",
            ["unsupported resource type List"],
            id="given a List then skipped as unsupported",
        ),
        pytest.param(
            "Medication-med0316",
            ["Medication: no event of its own (it resolves medication references)"],
            id="given a Medication then skipped: it only resolves references",
        ),
        pytest.param(
            "Patient-example",
            [
                "Patient without an address country: no home_country fact (the records naming it are still imported)"
            ],
            id="given a Patient without a country then skipped with a reason",
        ),
        pytest.param(
            "Bundle-bundle-request-medsallergies",
            ["bundle entry without a resource (request or response only)"] * 5,
            id="given a batch Bundle of requests only then each entry is skipped",
        ),
    ],
)
def test_official_examples_without_events_are_skipped_with_reasons(
    name: str, reasons: list[str]
) -> None:
    text = (EXAMPLES / f"{name}.json").read_text(encoding="utf-8")
    result = import_fhir(parse_json_document(text, f"{name}.json"), CONTEXT)
    assert (result.events, result.errors) == ([], [])
    assert [s.reason for s in result.skipped] == reasons


def test_given_a_bundle_when_skipped_then_origins_name_the_entry() -> None:
    text = (EXAMPLES / "Bundle-bundle-request-medsallergies.json").read_text(encoding="utf-8")
    result = import_fhir(parse_json_document(text, "b.json"), CONTEXT)
    assert [s.origin for s in result.skipped] == [f"b.json#entry[{n}]" for n in range(5)]


def test_given_a_missing_medication_reference_when_imported_then_an_error_not_a_prescription() -> (
    None
):
    result = import_fhir(
        parse_json_document(
            (EXAMPLES / "MedicationRequest-medrx002.json").read_text(encoding="utf-8"), "rx.json"
        ),
        CONTEXT,
    )
    assert (result.events, result.skipped) == ([], [])
    assert [(e.origin, e.reason, e.message) for e in result.errors] == [
        (
            "rx.json",
            "unresolved_reference",
            "MedicationRequest/medrx002: Medication/med0316 is not among the imported resources"
            " (pass the file that holds it in the same command: its codes decide the drug, so it"
            " is not guessed from a display)",
        )
    ]


def _without(resource: dict[str, Any], *path: str) -> dict[str, Any]:
    result = copy.deepcopy(resource)
    holder = result
    for key in path[:-1]:
        holder = holder[key]
    del holder[path[-1]]
    return result


@pytest.mark.parametrize(
    ("line", "reason", "message"),
    [
        pytest.param(
            "{not json", "malformed_json", "not JSON", id="given broken JSON then an error"
        ),
        pytest.param(
            json.dumps(changed(PENICILLIN, id="PLACEHOLDER")).replace('"PLACEHOLDER"', "NaN"),
            "malformed_json",
            "NaN is not a JSON number",
            id="given a NaN literal then an error",
        ),
        pytest.param(
            json.dumps(changed(PENICILLIN, id="PLACEHOLDER")).replace("PLACEHOLDER", "pen\\udc00"),
            "malformed_json",
            "unpaired surrogate",
            id="given an unpaired surrogate escape then an error",
        ),
        pytest.param(
            json.dumps(changed(PENICILLIN, id="PLACEHOLDER")).replace(
                '"PLACEHOLDER"', '"a1", "id": "a2"'
            ),
            "malformed_json",
            "the key 'id' appears twice in one object",
            id="given a key twice in one object then an error, not the last value",
        ),
        pytest.param(
            "[1, 2]", "not_a_resource", "resourceType", id="given a JSON array then not a resource"
        ),
        pytest.param(
            json.dumps({"id": "x"}),
            "not_a_resource",
            "resourceType",
            id="given an object without resourceType then not a resource",
        ),
        pytest.param(
            json.dumps(_without(PENICILLIN, "id")),
            "missing_field",
            "id is missing",
            id="given an allergy without an id then missing field",
        ),
        pytest.param(
            json.dumps(_without(PENICILLIN, "patient")),
            "missing_field",
            "AllergyIntolerance/medication: patient",
            id="given an allergy without a patient then missing field",
        ),
        pytest.param(
            json.dumps(_without(PENICILLIN, "code")),
            "missing_field",
            "AllergyIntolerance/medication: code",
            id="given an allergy without a substance code then missing field",
        ),
        pytest.param(
            json.dumps(changed(PENICILLIN, verificationStatus={"text": "probably"})),
            "invalid_value",
            "verificationStatus 'probably' is not one of confirmed, entered-in-error",
            id="given a status text that spells no code then invalid value naming the codes",
        ),
        pytest.param(
            json.dumps(changed(PENICILLIN, clinicalStatus={"coding": [{"display": "Active"}]})),
            "missing_field",
            "clinicalStatus.coding.code",
            id="given a status with neither a code nor a text then missing field",
        ),
        pytest.param(
            json.dumps(changed(PENICILLIN, recordedDate="2010-03-01T10:00:00")),
            "invalid_value",
            "recordedDate",
            id="given a time without a zone then invalid value",
        ),
        pytest.param(
            json.dumps(_without(ACTIVE_ORDER, "medicationReference")),
            "missing_field",
            "medication[x]",
            id="given a request without a medication then missing field",
        ),
        pytest.param(
            json.dumps(changed(ACTIVE_ORDER, medicationReference={"reference": "#nowhere"})),
            "unresolved_reference",
            "contained Medication #nowhere not found",
            id="given a missing contained medication then unresolved reference",
        ),
        pytest.param(
            json.dumps(
                changed(
                    ACTIVE_ORDER,
                    contained=[
                        *ACTIVE_ORDER["contained"],
                        {"resourceType": "Medication", "id": "med03499", "code": {"text": "x"}},
                    ],
                )
            ),
            "unresolved_reference",
            "#med03499 names 2 different contained resources",
            id="given two different contained resources under one id then unresolved reference",
        ),
        pytest.param(
            json.dumps(changed(ACTIVE_ORDER, status="paused")),
            "invalid_value",
            "status 'paused'",
            id="given an unknown request status then invalid value",
        ),
        pytest.param(
            json.dumps({"resourceType": "Bundle", "entry": {"resource": PENICILLIN}}),
            "invalid_value",
            "Bundle.entry is not a list",
            id="given a Bundle whose entry is not a list then invalid value",
        ),
        pytest.param(
            json.dumps(changed(PENICILLIN, patient={"reference": "Patient/ "})),
            "invalid_value",
            "patient.reference",
            id="given a reference without an id then invalid value",
        ),
        pytest.param(
            json.dumps(changed(PENICILLIN, patient={"reference": "p1", "type": "Patient"})),
            "invalid_value",
            "patient.reference 'p1' is not a reference to a patient (write it Patient/<id>",
            id="given a bare id as the reference then invalid value saying how to write it",
        ),
    ],
)
def test_malformed_input_is_an_error_with_its_origin(line: str, reason: str, message: str) -> None:
    good = json.dumps(PENICILLIN)
    result = import_fhir(parse_ndjson([good, "", line, good], "file.ndjson"), CONTEXT)
    assert [(e.origin, e.reason) for e in result.errors] == [("file.ndjson:3", reason)]
    assert message in result.errors[0].message
    assert [origin for origin, _ in result.events] == ["file.ndjson:1", "file.ndjson:4"]


def test_given_a_whole_synthea_file_when_imported_then_every_line_is_accounted_for() -> None:
    with (SYNTHEA / "AllergyIntolerance.000.ndjson").open(encoding="utf-8") as lines:
        result = import_fhir(parse_ndjson(lines, "AllergyIntolerance.000.ndjson"), CONTEXT)
    assert (result.skipped, result.errors) == ([], [])
    assert [origin for origin, _ in result.events] == [
        f"AllergyIntolerance.000.ndjson:{n}" for n in range(1, 12)
    ]
    aspirin = next(e for _, e in result.events if e.source_ref == ASPIRIN_ALLERGY)
    assert isinstance(aspirin.payload, AllergyRecorded)
    assert aspirin.payload.substance == "Aspirin"
    assert aspirin.occurred_at == utc(1996, 12, 27, 9, 21, 52)


def test_given_an_order_entered_in_error_then_only_a_stop_and_never_a_prescription() -> None:
    """It never was a prescription (no alert is raised for it); the stop ends an earlier
    version of the same request."""
    events = events_of(changed(ACTIVE_ORDER, status="entered-in-error"))
    assert [e.payload for e in events] == [
        MedicationStopped(
            prescription_id="medrx0332", reason="entered-in-error", entered_in_error=True
        )
    ]
    assert events[0].occurred_at == ORDERED + timedelta(milliseconds=1)
    assert events[0].source_ref == "MedicationRequest/medrx0332"


@pytest.mark.parametrize(
    ("url", "named"),
    [
        pytest.param("AllergyIntolerance/penH", "AllergyIntolerance/penH", id="relative"),
        pytest.param(
            "https://ehr.example/fhir/MedicationRequest/rx1/_history/3",
            "MedicationRequest/rx1",
            id="absolute, with a version",
        ),
        pytest.param(
            "AllergyIntolerance?patient=p1", "AllergyIntolerance?patient=p1", id="conditional"
        ),
    ],
)
def test_given_a_bundle_entry_deleting_a_claim_then_an_error_names_it(url: str, named: str) -> None:
    """A history or transaction Bundle that deletes an allergy or an order: the deletion
    cannot be applied, so it is an error (the earlier versions' claims would otherwise stay
    active without a word), not a skipped entry."""
    bundle = {
        "resourceType": "Bundle",
        "type": "history",
        "entry": [
            {"request": {"method": "DELETE", "url": url}},
            {"request": {"method": "DELETE", "url": "Encounter/e1"}},
        ],
    }
    result = import_fhir(unpack(bundle, "history.json"), CONTEXT)
    assert [(e.origin, e.reason) for e in result.errors] == [
        ("history.json#entry[0]", "deletion_not_imported")
    ]
    assert f"{named} is deleted" in result.errors[0].message
    assert [s.origin for s in result.skipped] == ["history.json#entry[1]"]


def test_every_resource_type_that_becomes_claims_is_one_whose_deletion_is_refused() -> None:
    assert MAPPED_TYPES - {"Medication", "Substance"} == CLAIM_TYPES


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        pytest.param(
            '<AllergyIntolerance xmlns="http://hl7.org/fhir"/>',
            "this looks like FHIR XML",
            id="given FHIR XML then told only JSON is read",
        ),
        pytest.param(
            json.dumps(PENICILLIN) + "\n" + json.dumps(PENICILLIN),
            "read from a .ndjson file",
            id="given NDJSON in a .json file then told where a bulk export goes",
        ),
    ],
)
def test_given_a_document_that_is_not_one_json_value_then_the_error_says_what_it_looks_like(
    text: str, hint: str
) -> None:
    (error,) = parse_json_document(text, "upload.json").errors
    assert error.reason == "malformed_json"
    assert hint in error.message


@pytest.mark.parametrize("spelling", ["Allergyintolerance", "allergyintolerance"])
def test_given_a_resource_type_misspelt_in_case_then_an_error_not_an_unsupported_skip(
    spelling: str,
) -> None:
    """A letter in the wrong case must not turn an allergy into a skipped "unsupported"
    resource: the import fails for that resource and names the type meant."""
    parsed = unpack(changed(PENICILLIN, resourceType=spelling), "test#0")
    for result in (import_fhir(parsed, CONTEXT), import_fhir(without_unmapped(parsed), CONTEXT)):
        assert result.skipped == []
        (error,) = result.errors
        assert error.reason == "not_a_resource"
        assert "did you mean AllergyIntolerance?" in error.message


@pytest.mark.parametrize(
    ("request_", "identifier"),
    [
        pytest.param(
            {"method": "PUT", "url": "AllergyIntolerance?identifier=urn:h|123"},
            "urn:h|123",
            id="a conditional update",
        ),
        pytest.param(
            {"method": "PUT", "url": "AllergyIntolerance?identifier=http%3A%2F%2Fh.org%7C7"},
            "http://h.org|7",
            id="a conditional update, URL-encoded",
        ),
        pytest.param(
            {"method": "POST", "url": "AllergyIntolerance", "ifNoneExist": "identifier=urn:h|9"},
            "urn:h|9",
            id="a conditional create",
        ),
        pytest.param({"method": "PUT", "url": "AllergyIntolerance/a1"}, None, id="an update by id"),
        pytest.param(
            {"method": "PUT", "url": "AllergyIntolerance?identifier=a&identifier=b"},
            None,
            id="two identifiers",
        ),
        pytest.param({"method": "POST", "url": "AllergyIntolerance"}, None, id="a plain create"),
        pytest.param(None, None, id="no request"),
    ],
)
def test_conditional_identifiers(request_: Any, identifier: str | None) -> None:
    assert conditional_identifier(request_) == identifier


@pytest.mark.parametrize(
    ("version_id", "milliseconds"),
    [
        pytest.param("1", 1, id="version 1"),
        pytest.param("42", 42, id="version 42"),
        pytest.param("5000", 999, id="a version past the cap"),
        pytest.param("9" * 5_000, 999, id="a version too long to convert"),
        pytest.param("W-3", 0, id="a version that is not a number"),
        pytest.param(None, 0, id="no version"),
    ],
)
def test_version_offsets(version_id: str | None, milliseconds: int) -> None:
    assert version_offset(version_id) == timedelta(milliseconds=milliseconds)


@pytest.mark.parametrize(
    ("ingredient", "reported"),
    [
        pytest.param("piperacillin", "ingredient is not a list", id="ingredient not a list"),
        pytest.param([1], "ingredient[0] is not a JSON object", id="an ingredient not an object"),
        pytest.param(
            [{"itemCodeableConcept": {"coding": "8339"}}],
            "ingredient[0].itemCodeableConcept.coding is not a list of objects",
            id="codings not a list",
        ),
        pytest.param(
            [{"itemCodeableConcept": "tazobactam"}],
            "ingredient[0].itemCodeableConcept is not a JSON object",
            id="a concept that is not an object",
        ),
        pytest.param(
            [{"itemCodeableConcept": {}}],
            "ingredient[0].itemCodeableConcept names nothing (no text, display or code)",
            id="a concept that names nothing",
        ),
        pytest.param(
            [{"item": {}}],
            "ingredient[0] has no item (itemCodeableConcept or itemReference)",
            id="an R5 item that names nothing",
        ),
    ],
)
def test_given_an_unreadable_ingredient_then_reported_and_the_drug_marked_unresolved(
    ingredient: Any, reported: str
) -> None:
    """The product's code is no proof of what a bag holds (saline with an antibiotic added is
    still coded as saline), and the importer cannot tell whether the code names every
    ingredient: the drug is read as partly unresolved, so it is judged `unverified`."""
    order = example("MedicationRequest-medrx0319")
    order["contained"][0]["ingredient"] = ingredient
    result = run(order)
    [payload] = [
        event.payload
        for _, event in result.events
        if isinstance(event.payload, MedicationPrescribed)
    ]
    assert (
        payload.drug == "Zosyn (piperacillin/tazobactam) 4.5gm injection (ingredient not resolved)"
    )
    assert [c.code for c in payload.codes] == ["0206-8862-02"]
    assert [part.detail for part in result.passed_over] == [
        f"the Medication #med0302: {reported}: what the ingredient is cannot be checked "
        "(imported without it)"
    ]


def test_given_a_reaction_substance_with_unreadable_codings_then_the_allergy_stands_on_its_code() -> (
    None
):
    allergy = changed(
        PENICILLIN,
        reaction=[{"substance": {"coding": "7980"}, "manifestation": [{"text": "hives"}]}],
    )
    payload = only_payload(allergy)
    assert (payload.substance, [c.code for c in payload.codes]) == ("Penicillin G", ["7980"])


@pytest.mark.parametrize(
    ("response", "recorded"),
    [
        pytest.param(
            {"etag": 'W/"3"', "lastModified": "2020-02-02T00:00:00Z"},
            utc(2020, 2, 2) + timedelta(milliseconds=3),
            id="a history entry's etag and lastModified stand in for meta",
        ),
        pytest.param(
            {"etag": 'W/"3"', "lastModified": "yesterday"},
            utc(2010, 3, 1) + timedelta(milliseconds=3),
            id="a lastModified that is not an instant is passed over",
        ),
    ],
)
def test_history_entry_versions(response: dict[str, Any], recorded: datetime) -> None:
    entry = {"resource": PENICILLIN, "response": response}
    [event] = events_of({"resourceType": "Bundle", "type": "history", "entry": [entry]})
    assert event.recorded_at == recorded


@pytest.mark.parametrize(
    ("read", "message"),
    [
        pytest.param(
            lambda: parse_ndjson(['{"resourceType": "Patient" "id": "p1"}\n'], "bulk.ndjson"),
            "not JSON: Expecting ',' delimiter at column 28",
            id="given a bulk line then the column alone",
        ),
        pytest.param(
            lambda: parse_ndjson(['{"resourceType": "Patient",\n'], "bulk.ndjson"),
            "not JSON: the line ends before its JSON value is complete",
            id="given a bulk line cut short then that it ends too soon",
        ),
        pytest.param(
            lambda: parse_json_document('{\n  "resourceType": "Patient",\n  "id": "p1', "p.json"),
            "not JSON: Unterminated string starting at line 3 column 9",
            id="given a document then the line and the column, 'at' once",
        ),
        pytest.param(
            lambda: parse_json_document('{\n  "resourceType": "Patient",\n', "p.json"),
            "not JSON: the file ends before its JSON value is complete",
            id="given a document cut short then that it ends too soon",
        ),
    ],
)
def test_a_json_error_says_where_in_the_words_of_its_input(
    read: Callable[[], ParsedInput], message: str
) -> None:
    (error,) = read().errors
    assert (error.reason, error.message) == ("malformed_json", message)
