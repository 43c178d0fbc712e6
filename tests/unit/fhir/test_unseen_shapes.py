"""Shapes of FHIR input a tester may feed that earlier tests did not: each is imported as
what it says, or refused with an error that says why; never read as a plain record when it is
not one."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.events import EventType
from schemas.fhir.mapping import unpack
from tests.unit.fhir.test_error_paths import ALLERGY, MEDICATION, ORDER, PATIENT, run, with_value

MODIFIER = [{"url": "http://example.org/fhir/StructureDefinition/ruled-out", "valueBoolean": True}]
SUBSETTED = {
    "tag": [
        {"system": "http://terminology.hl7.org/CodeSystem/v3-ObservationValue", "code": "SUBSETTED"}
    ]
}
CONTAINED_ORDER = {
    **{key: value for key, value in ORDER.items() if key != "medicationReference"},
    "id": "rx2",
    "contained": [{"resourceType": "Medication", "id": "c1", "code": {"text": "amoxicillin"}}],
    "medicationReference": {"reference": "#c1"},
}


def event_types(resources: list[Any], source_ref: str) -> list[str]:
    return [
        event.type.value for _, event in run(*resources).events if event.source_ref == source_ref
    ]


@pytest.mark.parametrize(
    ("resource", "path", "value", "reason", "message"),
    [
        pytest.param(
            ALLERGY,
            ("modifierExtension",),
            MODIFIER,
            "modifier_not_understood",
            "AllergyIntolerance/a1: modifierExtension "
            "(http://example.org/fhir/StructureDefinition/ruled-out) is a modifier extension",
            id="given an allergy with a modifierExtension then an error, not an allergy",
        ),
        pytest.param(
            ALLERGY,
            ("reaction", 0, "modifierExtension"),
            MODIFIER,
            "modifier_not_understood",
            "AllergyIntolerance/a1: reaction[0].modifierExtension (",
            id="given a modifierExtension on a reaction then the error names the reaction",
        ),
        pytest.param(
            ORDER,
            ("dosageInstruction", 0, "modifierExtension"),
            MODIFIER,
            "modifier_not_understood",
            "MedicationRequest/rx1: dosageInstruction[0].modifierExtension (",
            id="given a modifierExtension on a dosage then the order is an error",
        ),
        pytest.param(
            CONTAINED_ORDER,
            ("contained", 0, "modifierExtension"),
            MODIFIER,
            "modifier_not_understood",
            "MedicationRequest/rx2: contained[0].modifierExtension (",
            id="given a modifierExtension on a contained Medication then the order is an error",
        ),
        pytest.param(
            MEDICATION,
            ("modifierExtension",),
            MODIFIER,
            "modifier_not_understood",
            "MedicationRequest/rx1: the Medication Medication/m1: modifierExtension (",
            id="given a referenced Medication with a modifierExtension then its order is an error",
        ),
        pytest.param(
            ALLERGY,
            ("implicitRules",),
            "http://example.org/local-rules",
            "modifier_not_understood",
            "AllergyIntolerance/a1: implicitRules (http://example.org/local-rules) says",
            id="given implicitRules then an error, not an allergy",
        ),
        pytest.param(
            {k: v for k, v in ALLERGY.items() if k != "verificationStatus"},
            ("meta",),
            SUBSETTED,
            "subsetted_resource",
            "AllergyIntolerance/a1: meta.tag[0] is SUBSETTED",
            id="given a SUBSETTED allergy without its verification status then an error",
        ),
        pytest.param(
            ORDER,
            ("meta",),
            SUBSETTED,
            "subsetted_resource",
            "MedicationRequest/rx1: meta.tag[0] is SUBSETTED",
            id="given a SUBSETTED order (doNotPerform may be left out) then an error",
        ),
    ],
)
def test_a_record_that_is_not_plain_is_an_error_that_says_why(
    resource: dict[str, Any],
    path: tuple[str | int, ...],
    value: Any,
    reason: str,
    message: str,
) -> None:
    """R4 Extensibility: a modifier extension the reader does not understand means the
    resource must not be processed as if it had none; a SUBSETTED resource lacks elements that
    decide whether it holds."""
    resources = [PATIENT, ALLERGY, ORDER, MEDICATION, CONTAINED_ORDER]
    if resource not in resources:
        resources = [resource if r is ALLERGY else r for r in resources]
    changed = [with_value(r, path, value) if r is resource else r for r in resources]
    result = run(*changed)
    refused = [error for error in result.errors if message in error.message]
    assert [error.reason for error in refused] == [reason], result.errors
    assert event_types(changed, message.split(":", maxsplit=1)[0]) == []


@pytest.mark.parametrize(
    ("path", "value"),
    [
        pytest.param(
            ("extension",),
            [{"url": "http://example.org/note", "valueString": "x"}],
            id="given a plain extension then the allergy is imported",
        ),
        pytest.param(
            ("meta",),
            {
                "security": [
                    {
                        "system": "http://terminology.hl7.org/CodeSystem/v3-Confidentiality",
                        "code": "R",
                    }
                ],
                "tag": [{"system": "http://example.org/tags", "code": "imported"}],
            },
            id="given security labels and a tag then the allergy is imported",
        ),
        pytest.param(
            ("modifierExtension",),
            [],
            id="given an empty modifierExtension list then the allergy is imported",
        ),
    ],
)
def test_plain_extensions_and_labels_do_not_stop_the_import(
    path: tuple[str, ...], value: Any
) -> None:
    allergy = with_value(ALLERGY, path, value)
    result = run(PATIENT, allergy)
    assert result.errors == []
    assert event_types([PATIENT, allergy], "AllergyIntolerance/a1") == [
        EventType.ALLERGY_RECORDED.value
    ]


AMOXICILLIN = {
    "coding": [
        {
            "system": "http://www.nlm.nih.gov/research/umls/rxnorm",
            "code": "723",
            "display": "amoxicillin",
        }
    ]
}
R4_ORDER = {key: value for key, value in ORDER.items() if key != "medicationReference"}


@pytest.mark.parametrize(
    ("medication", "drug", "codes"),
    [
        pytest.param(
            {"concept": AMOXICILLIN},
            "amoxicillin",
            ["723"],
            id="given R5 medication.concept then the drug is the concept",
        ),
        pytest.param(
            {"reference": {"reference": "Medication/m1"}},
            "amoxicillin 500 mg",
            [],
            id="given R5 medication.reference then the drug is the Medication it names",
        ),
    ],
)
def test_an_r5_medication_codeable_reference_is_read(
    medication: dict[str, Any], drug: str, codes: list[str]
) -> None:
    """R5 (and some R4 exports) write the drug as `medication`, a CodeableReference: it was
    reported as a missing medication[x] and the order was lost."""
    order = {**R4_ORDER, "medication": medication}
    result = run(PATIENT, MEDICATION, order)
    assert result.errors == []
    ((_, event),) = [(o, e) for o, e in result.events if e.source_ref == "MedicationRequest/rx1"]
    assert event.payload.drug == drug  # type: ignore[union-attr]
    assert [c.code for c in event.payload.codes] == codes  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("order", "message"),
    [
        pytest.param(
            {**ORDER, "medication": {"concept": AMOXICILLIN}},
            "the drug is given twice (R4 medication[x] and R5 medication)",
            id="given both R4 medication[x] and R5 medication then an error",
        ),
        pytest.param(
            {**R4_ORDER, "medication": {"concept": None}},
            "medication has neither concept nor reference",
            id="given an empty R5 medication then an error",
        ),
        pytest.param(
            {**R4_ORDER, "medicationReference": {"identifier": {"system": "urn:x", "value": "A"}}},
            "it names the Medication only by identifier",
            id="given a Medication named only by identifier then the error says so",
        ),
    ],
)
def test_a_drug_that_cannot_be_told_is_an_error_that_says_why(
    order: dict[str, Any], message: str
) -> None:
    result = run(PATIENT, MEDICATION, order)
    assert [e.message for e in result.errors if message in e.message], result.errors
    assert event_types([PATIENT, MEDICATION, order], "MedicationRequest/rx1") == []


PATCH_PARAMETERS = {
    "resourceType": "Parameters",
    "parameter": [{"name": "operation", "part": [{"name": "type", "valueCode": "replace"}]}],
}


def bundle(kind: str, *entries: dict[str, Any]) -> dict[str, Any]:
    return {"resourceType": "Bundle", "type": kind, "entry": list(entries)}


@pytest.mark.parametrize(
    ("url", "reasons", "skipped"),
    [
        pytest.param(
            "AllergyIntolerance/a1",
            ["patch_not_imported"],
            0,
            id="given a PATCH of an allergy then an error, not an unsupported Parameters",
        ),
        pytest.param(
            "https://srv/fhir/MedicationRequest/rx1",
            ["patch_not_imported"],
            0,
            id="given a PATCH of an order by URL then an error",
        ),
        pytest.param(
            "Encounter/e1",
            [],
            1,
            id="given a PATCH of an Encounter then a skip as before",
        ),
    ],
)
def test_a_patch_of_a_claim_is_an_error_not_a_skip(
    url: str, reasons: list[str], skipped: int
) -> None:
    """A transaction that refutes an allergy by a PATCH: the patch cannot be applied, and
    skipping it as "unsupported resource type Parameters" left the allergy's alert standing
    without saying that a change to it was lost."""
    entry = {"resource": PATCH_PARAMETERS, "request": {"method": "PATCH", "url": url}}
    result = run(bundle("transaction", {"resource": PATIENT}, entry))
    assert [e.reason for e in result.errors] == reasons
    assert len(result.skipped) == skipped
    if reasons:
        assert "is patched (Bundle.entry.request PATCH)" in result.errors[0].message


@pytest.mark.parametrize(
    ("response", "reasons", "skips"),
    [
        pytest.param(
            {
                "status": "404 Not Found",
                "outcome": {
                    "resourceType": "OperationOutcome",
                    "issue": [
                        {"severity": "error", "code": "not-found", "diagnostics": "rx9 is gone"}
                    ],
                },
            },
            ["source_reported_error"],
            [],
            id="given a failed entry with an outcome then the source's error is quoted",
        ),
        pytest.param(
            {"status": "500"},
            ["source_reported_error"],
            [],
            id="given a failed entry with a status only then an error naming the status",
        ),
        pytest.param(
            {"status": 503},
            ["source_reported_error"],
            [],
            id="given a failed status sent as a number then the failure is still reported",
        ),
        pytest.param(
            {"status": "200 OK"},
            [],
            ["bundle entry without a resource (request or response only)"],
            id="given a successful entry without a resource then a skip as before",
        ),
    ],
)
def test_a_failed_entry_of_a_batch_response_is_the_source_reporting_an_error(
    response: dict[str, Any], reasons: list[str], skips: list[str]
) -> None:
    """A batch-response (a client's batch of reads) whose entry failed lacks what that entry
    asked for: like a bulk export's OperationOutcome, the import says so."""
    result = run(
        bundle(
            "batch-response",
            {"resource": ALLERGY, "response": {"status": "200"}},
            {"response": response},
        )
    )
    assert [e.reason for e in result.errors] == reasons
    assert [s.reason for s in result.skipped] == skips
    if reasons:
        assert "the source reports that it failed" in result.errors[0].message
    assert event_types([ALLERGY], "AllergyIntolerance/a1") == [EventType.ALLERGY_RECORDED.value]


def test_a_history_deletion_of_an_encounter_with_status_gone_is_still_a_skip() -> None:
    entry = {"request": {"method": "DELETE", "url": "Encounter/e1"}, "response": {"status": "410"}}
    result = run(bundle("history", entry))
    assert result.errors == []
    assert len(result.skipped) == 1


def deleting(resource: dict[str, Any], method: str = "DELETE", **entry: Any) -> dict[str, Any]:
    url = f"{resource['resourceType']}/{resource['id']}"
    return {"resource": resource, "request": {"method": method, "url": url}, **entry}


def version(resource: dict[str, Any], number: str) -> dict[str, Any]:
    return {**resource, "meta": {"versionId": number}}


@pytest.mark.parametrize(
    ("document", "deleted"),
    [
        pytest.param(
            bundle("transaction", {"resource": PATIENT}, deleting(ALLERGY)),
            "AllergyIntolerance/a1",
            id="given a transaction deleting an allergy it carries then an error, no allergy",
        ),
        pytest.param(
            bundle(
                "batch",
                {"resource": PATIENT},
                {"resource": MEDICATION},
                deleting(ORDER),
            ),
            "MedicationRequest/rx1",
            id="given a batch deleting an order it carries then an error, no prescription",
        ),
        pytest.param(
            bundle("transaction", {"resource": PATIENT}, deleting(ALLERGY, method="delete")),
            "AllergyIntolerance/a1",
            id="given the method in small letters then the same error",
        ),
        pytest.param(
            bundle(
                "transaction",
                {"resource": PATIENT},
                {"resource": ALLERGY, "request": {"method": "DELETE", "url": "AllergyIntolerance"}},
            ),
            "AllergyIntolerance/a1",
            id="given a url naming no id then the error names the resource carried",
        ),
    ],
)
def test_a_deleting_entry_that_carries_its_resource_is_an_error_and_nothing_is_imported(
    document: dict[str, Any], deleted: str
) -> None:
    """The deleted allergy or order was imported as a plain version: a deleted order kept
    raising a critical alert, and nothing said that a deletion was lost."""
    result = run(document)
    assert [error.reason for error in result.errors] == ["deletion_not_imported"]
    assert result.errors[0].message.startswith(
        f"{deleted} is deleted (Bundle.entry.request DELETE): deletions are not imported, nor "
        "is the resource its entry carries"
    )
    assert event_types([document], deleted) == []


def test_a_history_whose_newest_version_is_a_deletion_carrying_it_keeps_the_earlier_one() -> None:
    """As a deletion without its resource: the error says the earlier version stays in force;
    the deleted version is not read as the newest one."""
    refuted = with_value(version(ALLERGY, "2"), ("verificationStatus",), {"text": "refuted"})
    history = bundle(
        "history",
        deleting(refuted, response={"etag": 'W/"2"'}),
        {"resource": version(ALLERGY, "1"), "request": {"method": "POST", "url": "x"}},
        {"resource": PATIENT},
    )
    result = run(history)
    assert [(e.origin, e.reason) for e in result.errors] == [
        ("test#0#entry[0]", "deletion_not_imported")
    ]
    assert "what its earlier versions recorded stays" in result.errors[0].message
    imported = [o for o, e in result.events if e.source_ref == "AllergyIntolerance/a1"]
    assert imported == ["test#0#entry[1]"]


def test_a_deleting_entry_carrying_a_medication_is_skipped_not_read() -> None:
    document = bundle(
        "transaction", {"resource": PATIENT}, {"resource": ORDER}, deleting(MEDICATION)
    )
    result = run(document)
    assert [skip.reason for skip in result.skipped] == [
        "deleted (Bundle.entry.request DELETE): the resource its entry carries is not read"
    ]
    assert [error.reason for error in result.errors] == ["unresolved_reference"]
    assert event_types([document], "MedicationRequest/rx1") == []


ENTRY_MODIFIER = [{"url": "http://example.org/ext/entry-cancelled", "valueBoolean": True}]
RECORDS = ("Patient/p1", "AllergyIntolerance/a1", "MedicationRequest/rx1")


def records_bundle(**modified: dict[str, Any]) -> dict[str, Any]:
    """A Bundle of the patient, allergy, order and Medication; `modified` adds fields to the
    entry of the record named by its keyword (`AllergyIntolerance`, ...)."""
    resources: list[dict[str, Any]] = [PATIENT, ALLERGY, ORDER, MEDICATION]
    entries = [
        {"resource": resource, **modified.get(resource["resourceType"], {})}
        for resource in resources
    ]
    return bundle("transaction", *entries)


@pytest.mark.parametrize(
    ("document", "path", "refused"),
    [
        pytest.param(
            records_bundle(AllergyIntolerance={"modifierExtension": ENTRY_MODIFIER}),
            "Bundle.entry.modifierExtension (http://example.org/ext/entry-cancelled)",
            ["AllergyIntolerance/a1"],
            id="given a modifierExtension on an allergy's entry then that allergy is refused",
        ),
        pytest.param(
            records_bundle(
                MedicationRequest={
                    "request": {
                        "method": "PUT",
                        "url": "MedicationRequest/rx1",
                        "modifierExtension": ENTRY_MODIFIER,
                    }
                }
            ),
            "Bundle.entry.request.modifierExtension (",
            ["MedicationRequest/rx1"],
            id="given a modifierExtension on an entry's request then that order is refused",
        ),
        pytest.param(
            records_bundle(
                AllergyIntolerance={
                    "response": {"status": "200", "modifierExtension": ENTRY_MODIFIER}
                }
            ),
            "Bundle.entry.response.modifierExtension (",
            ["AllergyIntolerance/a1"],
            id="given a modifierExtension on an entry's response then that allergy is refused",
        ),
        pytest.param(
            {**records_bundle(), "implicitRules": "http://example.org/rules/test-data-only"},
            "Bundle.implicitRules (http://example.org/rules/test-data-only) says",
            [*RECORDS, "Medication/m1"],
            id="given implicitRules on the Bundle then each of its records is refused",
        ),
        pytest.param(
            {**records_bundle(), "modifierExtension": ENTRY_MODIFIER},
            "Bundle.modifierExtension (",
            [*RECORDS, "Medication/m1"],
            id="given a modifierExtension on the Bundle (not R4) then its records are refused",
        ),
        pytest.param(
            bundle(
                "collection",
                {"resource": records_bundle(), "modifierExtension": ENTRY_MODIFIER},
            ),
            "Bundle.entry.modifierExtension (",
            [*RECORDS, "Medication/m1"],
            id="given a modifierExtension on a nested Bundle's entry then its records are refused",
        ),
    ],
)
def test_a_modifier_of_a_bundle_entry_or_bundle_refuses_the_records_it_holds(
    document: dict[str, Any], path: str, refused: list[str]
) -> None:
    """R4: a modifier extension on a Bundle entry (a BackboneElement) or on its request, or a
    Bundle's implicitRules, may change what the records mean; they were imported as plain
    records without a word."""
    result = run(document)
    assert {error.reason for error in result.errors} == {"modifier_not_understood"}
    assert [error.message.split(": ")[0] for error in result.errors] == refused
    assert all(path in error.message for error in result.errors), result.errors
    for record in RECORDS:
        assert bool(event_types([document], record)) == (record not in refused), record


def test_a_modifier_on_a_medications_entry_refuses_the_order_naming_it() -> None:
    """The Medication is not read, as one with a modifierExtension of its own is not."""
    document = records_bundle(Medication={"modifierExtension": ENTRY_MODIFIER})
    result = run(document)
    assert [(error.reason, error.message.split(": ")[0]) for error in result.errors] == [
        ("modifier_not_understood", "Medication/m1"),
        ("unresolved_reference", "MedicationRequest/rx1"),
    ]
    assert event_types([document], "MedicationRequest/rx1") == []
    assert event_types([document], "AllergyIntolerance/a1") != []


@pytest.mark.parametrize(
    ("resource", "entry"),
    [
        pytest.param(
            {"resourceType": "Observation", "id": "o1", "status": "final"},
            {"modifierExtension": ENTRY_MODIFIER},
            id="given a modifierExtension on the entry of a type not read then a plain skip",
        ),
        pytest.param(
            ALLERGY,
            {"modifierExtension": []},
            id="given an empty modifierExtension list on an entry then the allergy is imported",
        ),
    ],
)
def test_an_entry_modifier_that_changes_nothing_read_stops_nothing(
    resource: dict[str, Any], entry: dict[str, Any]
) -> None:
    result = run(bundle("collection", {"resource": PATIENT}, {"resource": resource, **entry}))
    assert result.errors == []
    assert [skip.resource_type for skip in result.skipped] == (
        [] if resource is ALLERGY else ["Observation"]
    )


SEARCH = "https://srv/fhir/AllergyIntolerance?patient=p1"


def search_page(number: int, *entries: Any, last: bool = False) -> dict[str, Any]:
    own = SEARCH if number == 1 else f"{SEARCH}&page={number}"
    links = [{"relation": "self", "url": own}]
    if not last:
        links.append({"relation": "next", "url": f"{SEARCH}&page={number + 1}"})
    return {**bundle("searchset", *entries), "id": f"page{number}", "total": 40, "link": links}


def test_a_page_of_search_results_with_a_next_page_says_the_other_pages_are_missing() -> None:
    """A searchset is often one page of many: importing it alone silently missed the records
    (a refutation, an allergy) on the other pages."""
    page = search_page(1, {"resource": ALLERGY, "search": {"mode": "match"}})
    result = run(page)
    assert result.errors == []
    ((skip),) = result.skipped
    assert (skip.resource_type, skip.resource_id) == ("Bundle", "page1")
    assert skip.reason.startswith(
        f"a page of search results with a next page ({SEARCH}&page=2) that is not in the input"
    )
    assert event_types([page], "AllergyIntolerance/a1") == [EventType.ALLERGY_RECORDED.value]
    assert run(search_page(1, {"resource": ALLERGY}, last=True)).skipped == []


def test_every_page_of_a_search_imported_together_gives_no_notice() -> None:
    pages = [search_page(1, {"resource": PATIENT}), search_page(2), search_page(3, last=True)]
    assert run(*pages).skipped == []
    assert run(*reversed(pages)).skipped == []


def test_a_page_missing_from_the_middle_of_a_search_is_named() -> None:
    ((skip),) = run(search_page(1), search_page(3, last=True)).skipped
    assert skip.resource_id == "page1"
    assert f"({SEARCH}&page=2)" in skip.reason


@pytest.mark.parametrize(
    ("links", "problem"),
    [
        pytest.param(
            [{"relation": ["next"], "url": f"{SEARCH}&page=2"}],
            "link[0].relation is not a string",
            id="given a link whose relation is a list then a notice, not a crash",
        ),
        pytest.param(
            [{"relation": {"code": "next"}, "url": f"{SEARCH}&page=2"}],
            "link[0].relation is not a string",
            id="given a link whose relation is an object then a notice, not a crash",
        ),
        pytest.param(
            [{"relation": "self", "url": SEARCH}, {"relation": "next", "url": [SEARCH]}],
            "link[1].url is not a string",
            id="given a next link whose url is a list then a notice naming it",
        ),
        pytest.param(
            ["next"],
            "link[0] is not a JSON object",
            id="given a link that is a string then a notice",
        ),
        pytest.param(
            {"relation": "next", "url": f"{SEARCH}&page=2"},
            "link is not a list",
            id="given the links as one object then a notice",
        ),
    ],
)
def test_a_bundle_link_that_cannot_be_read_is_a_notice_and_the_entries_are_imported(
    links: Any, problem: str
) -> None:
    page = {**bundle("searchset", {"resource": ALLERGY}), "id": "page1", "link": links}
    result = run(PATIENT, page)
    assert result.errors == []
    ((skip),) = result.skipped
    assert (skip.resource_type, skip.resource_id) == ("Bundle", "page1")
    assert skip.reason.startswith(f"a Bundle link that cannot be read ({problem}): if it names")
    assert event_types([PATIENT, page], "AllergyIntolerance/a1") == [
        EventType.ALLERGY_RECORDED.value
    ]


def test_a_json_array_of_resources_is_told_how_to_send_them() -> None:
    (error,) = unpack([PATIENT, ALLERGY], "array.json").errors
    assert error.reason == "not_a_resource"
    assert "this is a JSON array of 2 value(s): put the resources in a Bundle" in error.message


def test_a_modifier_nested_deep_in_extensions_is_found_and_named_briefly() -> None:
    allergy: dict[str, Any] = {**ALLERGY, "extension": []}
    holder = allergy["extension"]
    for _ in range(400):
        nested: dict[str, Any] = {"url": "http://example.org/x", "extension": []}
        holder.append(nested)
        holder = nested["extension"]
    holder.append({"url": "http://example.org/y", "modifierExtension": MODIFIER})
    (error,) = run(PATIENT, allergy).errors
    assert error.reason == "modifier_not_understood"
    assert "…" in error.message
    assert len(error.message) < 800


@pytest.mark.parametrize(
    ("resource", "written", "expected"),
    [
        pytest.param(ALLERGY, "subject", "patient", id="an allergy's patient written as subject"),
        pytest.param(ORDER, "patient", "subject", id="an order's subject written as patient"),
    ],
)
def test_a_patient_under_the_other_resource_types_name_is_named_as_such(
    resource: dict[str, Any], written: str, expected: str
) -> None:
    moved = {key: value for key, value in resource.items() if key != expected}
    (error,) = run(PATIENT, {**moved, written: resource[expected]}).errors
    assert error.reason == "missing_field"
    kind = resource["resourceType"]
    assert error.message.endswith(f"{expected} (given as {written}, which {kind} does not have)")


@pytest.mark.parametrize("contained", [[None], {"resourceType": "Medication"}, "text", 5])
@pytest.mark.parametrize(
    "holder",
    [
        pytest.param(PATIENT, id="patient"),
        pytest.param(ALLERGY, id="allergy"),
        pytest.param({"resourceType": "Observation", "id": "o1", "status": "final"}, id="skipped"),
        pytest.param({"resourceType": "Parameters", "id": "pp"}, id="parameters"),
    ],
)
def test_given_a_contained_that_is_no_list_of_objects_then_the_rest_is_still_imported(
    holder: dict[str, Any], contained: object
) -> None:
    """A malformed `contained` (or `parameter`) anywhere cost the whole input set: the import
    stopped with a traceback and printed nothing."""
    malformed = {**holder, "contained": contained, "parameter": contained}
    others = [r for r in (PATIENT, ALLERGY, ORDER, MEDICATION) if r["id"] != holder["id"]]
    result = run(malformed, *others)
    assert {"AllergyRecorded", "MedicationPrescribed"} <= {e.type.value for _, e in result.events}
    if holder["resourceType"] in ("Patient", "AllergyIntolerance"):
        (notice,) = [p.message for p in result.passed_over if "contained" in p.message]
        assert "contained is not a list of objects" in notice


def test_given_a_drug_that_names_a_contained_substance_then_the_error_says_what_it_is() -> None:
    """It said "contained Medication #s not found" though #s was there."""
    order = {
        **CONTAINED_ORDER,
        "contained": [{"resourceType": "Substance", "id": "s", "code": {"text": "amoxicillin"}}],
        "medicationReference": {"reference": "#s"},
    }
    (error,) = run(PATIENT, order).errors
    assert (error.reason, error.message) == (
        "invalid_value",
        "MedicationRequest/rx2: contained #s is a Substance, not a Medication (the drug is a "
        "Reference(Medication)): which drug is meant cannot be told",
    )


def test_given_a_no_known_allergy_record_whose_reaction_names_a_substance_then_an_error() -> None:
    """It was kept as a bare negation ("No known allergy (Penicillin)"), its substance
    dropped: an amoxicillin order raised nothing."""
    statement = {
        **ALLERGY,
        "code": {"coding": [{"system": "http://snomed.info/sct", "code": "716186003"}]},
        "reaction": [
            {
                "substance": {"text": "Penicillin"},
                "manifestation": [{"text": "Anaphylaxis"}],
                "severity": "severe",
            }
        ],
    }
    result = run(PATIENT, statement, ORDER, MEDICATION)
    (error,) = result.errors
    assert error.reason == "invalid_value"
    assert "says there is no known allergy, but reaction[0].substance names 'Penicillin'" in (
        error.message
    )
    assert "AllergyRecorded" not in {e.type.value for _, e in result.events}


def test_given_a_reaction_substance_sent_as_a_string_then_a_line_says_it_is_not_read() -> None:
    allergy = {**ALLERGY, "reaction": [{"substance": "amoxicillin", "manifestation": []}]}
    result = run(PATIENT, allergy)
    assert "reaction[0].substance is not a JSON object (imported without it)" in [
        part.detail for part in result.passed_over
    ]
