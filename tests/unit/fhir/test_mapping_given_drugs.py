"""FHIR records of drugs actually given: Immunization, MedicationAdministration, MedicationDispense.

A record that names its order (`request`, `authorizingPrescription`) is news of that
prescription: same prescription id, never a stop. One that names none is a course of its own,
`<ResourceType>/<id>`: a single dose (a vaccination, an administration at one time, a dispense)
is checked once and stops right after; an infusion stops at the end of its period."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest

from schemas.events import Coding, EventType, MedicationPrescribed, MedicationStopped
from tests.unit.fhir.test_mapping import EXAMPLES, changed, events_of, example, run, utc

JUST_AFTER = timedelta(milliseconds=1)
CVX = "http://hl7.org/fhir/sid/cvx"

VACCINATION = example("Immunization-example")
ZOSYN_GIVEN = example("MedicationAdministration-medadmin0304")
ZOSYN_DISPENSED = example("MedicationDispense-meddisp0304")


def kinds_and_ids(resource: dict[str, Any]) -> list[tuple[EventType, str]]:
    return [
        (event.type, getattr(event.payload, "prescription_id", "")) for event in events_of(resource)
    ]


def skip_reasons(resource: dict[str, Any]) -> list[str]:
    result = run(resource)
    assert (result.events, result.errors) == ([], [])
    return [skip.reason for skip in result.skipped]


# Immunization


def test_given_the_official_vaccination_then_a_single_dose_checked_once() -> None:
    prescribed, stopped = events_of(VACCINATION)
    assert prescribed.payload == MedicationPrescribed(
        prescription_id="Immunization/example",
        drug="Fluvax (Influenza)",
        codes=(Coding(system="urn:oid:1.2.36.1.2001.1005.17", code="FLUVAX"),),
        dose="5 mg",
        route="Injection, intramuscular",
        note="Notes on adminstration of vaccine",
    )
    assert (prescribed.subject_id, prescribed.occurred_at) == ("example", utc(2013, 1, 10))
    assert stopped.payload == MedicationStopped(
        prescription_id="Immunization/example", reason="completed: a single dose"
    )
    assert stopped.occurred_at == prescribed.occurred_at + JUST_AFTER


def test_given_a_vaccine_not_given_then_skipped_with_a_reason() -> None:
    assert skip_reasons(example("Immunization-notGiven")) == [
        "Immunization not-done: the vaccine was not given"
    ]


def test_given_a_vaccination_entered_in_error_then_only_its_stop() -> None:
    assert kinds_and_ids(changed(VACCINATION, status="entered-in-error")) == [
        (EventType.MEDICATION_STOPPED, "Immunization/example")
    ]


def test_given_an_ips_no_immunization_info_record_then_skipped_not_a_vaccine() -> None:
    vaccine = {
        "coding": [
            {
                "system": "http://hl7.org/fhir/uv/ips/CodeSystem/absent-unknown-uv-ips",
                "code": "no-immunization-info",
            }
        ]
    }
    assert skip_reasons(changed(VACCINATION, vaccineCode=vaccine)) == [
        "Immunization states that no immunization is known (or no info)"
    ]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        pytest.param({"status": "given"}, "status 'given'", id="given an unknown status"),
        pytest.param({"vaccineCode": None}, "vaccineCode", id="given no vaccine code"),
        pytest.param({"patient": None}, "patient", id="given no patient"),
    ],
)
def test_invalid_vaccinations_are_errors(fields: dict[str, Any], message: str) -> None:
    result = run(changed(VACCINATION, **fields))
    assert result.events == []
    assert [message in error.message for error in result.errors] == [True]


def test_given_a_cvx_coded_vaccination_then_its_code_is_kept() -> None:
    varicella = changed(
        VACCINATION, vaccineCode={"coding": [{"system": CVX, "code": "21", "display": "varicella"}]}
    )
    prescribed, _ = events_of(varicella)
    assert isinstance(prescribed.payload, MedicationPrescribed)
    assert (prescribed.payload.drug, prescribed.payload.codes) == (
        "varicella",
        (Coding(system=CVX, code="21", display="varicella"),),
    )


# MedicationAdministration

GIVEN_ALONE = changed(
    ZOSYN_GIVEN, id="adm-1", request=None, dosage={"dose": {"value": 4.5, "unit": "g"}}
)


def test_given_an_administration_of_an_order_then_news_of_that_prescription_without_a_stop() -> (
    None
):
    (event,) = events_of(ZOSYN_GIVEN)
    assert isinstance(event.payload, MedicationPrescribed)
    assert (event.payload.prescription_id, event.source_ref) == (
        "medrx0319",
        "MedicationAdministration/medadmin0304",
    )
    assert event.occurred_at == datetime.fromisoformat("2015-01-15T04:30:00+01:00")


def test_given_an_administration_of_an_order_entered_in_error_then_the_order_is_left_alone() -> (
    None
):
    assert skip_reasons(example("MedicationAdministration-medadmin0303")) == [
        "MedicationAdministration entered-in-error: MedicationRequest/medrx0319 is unchanged"
    ]


@pytest.mark.parametrize(
    ("fields", "stop"),
    [
        pytest.param(
            {},
            datetime.fromisoformat("2015-01-15T14:30:00+01:00"),
            id="given a period then its end",
        ),
        pytest.param(
            {"effectivePeriod": None, "effectiveDateTime": "2015-01-15T04:30:00+01:00"},
            datetime.fromisoformat("2015-01-15T04:30:00+01:00") + JUST_AFTER,
            id="given one time then a single dose",
        ),
        pytest.param(
            {"status": "stopped"},
            datetime.fromisoformat("2015-01-15T14:30:00+01:00"),
            id="given a stopped infusion then the end of its period",
        ),
    ],
)
def test_given_an_administration_of_no_order_then_a_course_of_its_own_that_ends(
    fields: dict[str, Any], stop: datetime
) -> None:
    prescribed, stopped = events_of(changed(GIVEN_ALONE, **fields))
    assert isinstance(prescribed.payload, MedicationPrescribed)
    assert prescribed.payload.prescription_id == "MedicationAdministration/adm-1"
    assert prescribed.payload.dose == "4.5 g"
    assert stopped.payload == MedicationStopped(
        prescription_id="MedicationAdministration/adm-1", reason=fields.get("status", "completed")
    )
    assert stopped.occurred_at == stop


@pytest.mark.parametrize("status", ["in-progress", "on-hold"])
def test_given_an_administration_under_way_then_it_does_not_stop(status: str) -> None:
    assert kinds_and_ids(changed(GIVEN_ALONE, status=status)) == [
        (EventType.MEDICATION_PRESCRIBED, "MedicationAdministration/adm-1")
    ]


def test_given_an_administration_not_done_then_skipped() -> None:
    assert skip_reasons(changed(ZOSYN_GIVEN, status="not-done")) == [
        "MedicationAdministration not-done: the drug was not given"
    ]


def test_given_an_administration_of_no_order_entered_in_error_then_only_its_stop() -> None:
    assert kinds_and_ids(changed(GIVEN_ALONE, status="entered-in-error")) == [
        (EventType.MEDICATION_STOPPED, "MedicationAdministration/adm-1")
    ]


# MedicationDispense

DISPENSED_ALONE = changed(ZOSYN_DISPENSED, id="disp-1", authorizingPrescription=None)


@pytest.mark.parametrize(
    "status", ["preparation", "in-progress", "completed", "on-hold", "stopped"]
)
def test_given_a_dispense_of_an_order_then_news_of_that_prescription_without_a_stop(
    status: str,
) -> None:
    (event,) = events_of(changed(ZOSYN_DISPENSED, status=status))
    assert isinstance(event.payload, MedicationPrescribed)
    assert (event.payload.prescription_id, event.payload.drug) == (
        "medrx0319",
        "Zosyn (piperacillin/tazobactam) 4.5gm injection",
    )
    assert event.occurred_at == datetime.fromisoformat("2015-06-26T07:13:00+05:00")


def test_given_a_dispense_of_no_order_then_checked_once_at_hand_over() -> None:
    prescribed, stopped = events_of(DISPENSED_ALONE)
    assert stopped.payload == MedicationStopped(
        prescription_id="MedicationDispense/disp-1",
        reason="completed: checked once (the dispense names no prescription)",
    )
    assert stopped.occurred_at == prescribed.occurred_at + JUST_AFTER


def test_given_a_dispense_not_yet_handed_over_then_dated_when_prepared() -> None:
    prepared = changed(DISPENSED_ALONE, whenHandedOver=None, whenPrepared="2015-06-25T10:00:00Z")
    prescribed, _ = events_of(prepared)
    assert prescribed.occurred_at == utc(2015, 6, 25, 10)


@pytest.mark.parametrize("status", ["cancelled", "declined"])
def test_given_nothing_dispensed_then_skipped(status: str) -> None:
    assert skip_reasons(changed(ZOSYN_DISPENSED, status=status)) == [
        f"MedicationDispense {status}: nothing was dispensed"
    ]


def test_given_a_dispense_entered_in_error_then_its_order_is_left_alone_else_only_a_stop() -> None:
    assert skip_reasons(changed(ZOSYN_DISPENSED, status="entered-in-error")) == [
        "MedicationDispense entered-in-error: MedicationRequest/medrx0319 is unchanged"
    ]
    assert kinds_and_ids(changed(DISPENSED_ALONE, status="entered-in-error")) == [
        (EventType.MEDICATION_STOPPED, "MedicationDispense/disp-1")
    ]


def test_given_the_official_document_bundle_then_its_urn_identified_resources_import() -> None:
    text = (EXAMPLES / "Bundle-father.json").read_text(encoding="utf-8")
    result = run(json.loads(text))
    assert result.errors == []
    sources = {event.source_ref for _, event in result.events}
    assert None not in sources
    refs = sorted(source for source in sources if source is not None)
    assert refs == [
        "AllergyIntolerance/47600e0f-b6b5-4308-84b5-5dec157f7637",
        "MedicationRequest/124a6916-5d84-4b8c-b250-10cefb8e6e86",
        "MedicationStatement/673f8db5-0ffd-4395-9657-6da00420bbc1",
    ]
    assert {event.subject_id for _, event in result.events} == {"d1"}


# Records of an order imported with them

ZOSYN_ORDER = example("MedicationRequest-medrx0319")
ORDER_ENDED_AT = datetime.fromisoformat("2015-01-15T00:00:00+00:00") + JUST_AFTER


def test_given_a_dispense_after_its_imported_order_ended_then_skipped_not_restarting_it() -> None:
    result = run(ZOSYN_ORDER, ZOSYN_DISPENSED)
    assert result.errors == []
    stops = [e for _, e in result.events if e.type == EventType.MEDICATION_STOPPED]
    assert [(e.source_ref, e.occurred_at) for e in stops] == [
        ("MedicationRequest/medrx0319", ORDER_ENDED_AT)
    ]
    assert [e.source_ref for _, e in result.events] == ["MedicationRequest/medrx0319"] * 2
    assert [s.reason for s in result.skipped] == [
        "MedicationDispense after MedicationRequest/medrx0319 ended (it would restart the order)"
    ]


def test_given_a_dispense_while_its_imported_order_runs_then_news_of_that_order() -> None:
    result = run(changed(ZOSYN_ORDER, status="active"), ZOSYN_DISPENSED)
    assert (result.skipped, result.errors) == ([], [])
    assert [
        (e.source_ref, getattr(e.payload, "prescription_id", None)) for _, e in result.events
    ] == [
        ("MedicationRequest/medrx0319", "medrx0319"),
        ("MedicationDispense/meddisp0304", "medrx0319"),
    ]


RUNNING_ZOSYN = changed(ZOSYN_ORDER, status="active", authoredOn="2015-01-10")
ZOSYN_REPLACEMENT = changed(
    ZOSYN_ORDER,
    id="medrx-next",
    status="active",
    authoredOn="2015-01-12",
    priorPrescription={"reference": "MedicationRequest/medrx0319"},
)


def test_given_a_dispense_of_an_order_after_an_order_replaced_it_then_skipped() -> None:
    result = run(RUNNING_ZOSYN, ZOSYN_REPLACEMENT, ZOSYN_DISPENSED)
    assert result.errors == []
    assert [s.reason for s in result.skipped] == [
        "MedicationDispense after MedicationRequest/medrx0319 ended (it would restart the order)"
    ]


def test_given_a_replacement_naming_its_order_by_bundle_entry_urn_then_that_order_ended() -> None:
    order_url = "urn:uuid:6b1d4c1e-0000-4000-8000-000000000319"
    bundle = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {"fullUrl": order_url, "resource": RUNNING_ZOSYN},
            {"resource": changed(ZOSYN_REPLACEMENT, priorPrescription={"reference": order_url})},
            {"resource": ZOSYN_DISPENSED},
        ],
    }
    result = run(bundle)
    assert result.errors == []
    assert [s.reason for s in result.skipped] == [
        "MedicationDispense after MedicationRequest/medrx0319 ended (it would restart the order)"
    ]


def test_given_a_dispense_of_the_order_that_replaced_another_then_news_of_that_order() -> None:
    dispensed = changed(
        ZOSYN_DISPENSED, authorizingPrescription=[{"reference": "MedicationRequest/medrx-next"}]
    )
    result = run(RUNNING_ZOSYN, ZOSYN_REPLACEMENT, dispensed)
    assert (result.skipped, result.errors) == ([], [])
    assert ("MedicationDispense/meddisp0304", "medrx-next") in [
        (e.source_ref, getattr(e.payload, "prescription_id", None)) for _, e in result.events
    ]


def test_given_an_order_referenced_by_its_bundle_entry_urn_then_its_id() -> None:
    order_url = "urn:uuid:6b1d4c1e-0000-4000-8000-000000000319"
    bundle = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {"fullUrl": order_url, "resource": changed(ZOSYN_ORDER, status="active")},
            {
                "fullUrl": "urn:uuid:6b1d4c1e-0000-4000-8000-000000000320",
                "resource": changed(
                    ZOSYN_DISPENSED, authorizingPrescription=[{"reference": order_url}]
                ),
            },
        ],
    }
    result = run(bundle)
    assert result.errors == []
    assert [getattr(e.payload, "prescription_id", None) for _, e in result.events] == [
        "medrx0319",
        "medrx0319",
    ]


@pytest.mark.parametrize("value", [1e400, -1e400])
def test_given_a_dose_beyond_the_range_of_numbers_then_it_is_left_out_not_shown_as_infinity(
    value: float,
) -> None:
    given = changed(GIVEN_ALONE, dosage={"dose": {"value": value, "unit": "mg"}})
    prescribed, _ = events_of(given)
    assert isinstance(prescribed.payload, MedicationPrescribed)
    assert prescribed.payload.dose is None
