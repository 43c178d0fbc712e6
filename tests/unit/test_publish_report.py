"""`uac publish --json` accounts for every record of the input, one JSON document each."""

from __future__ import annotations

from rules.batch import Submitted
from schemas.fhir.inputs import Skipped
from streams.event_files import LineError
from streams.fhir_files import LeftOut
from streams.publish_report import ReadInputs, input_documents, sent_documents
from streams.publisher import NotSent, Published
from tests.factories import make_event

ALLERGY = Submitted("allergy.json", make_event("AllergyRecorded", "allergy"), 300)
ORDER = Submitted("orders.ndjson:2", make_event("MedicationPrescribed", "order"), 300)


def test_given_every_kind_of_outcome_then_one_document_each_inputs_first_then_sends_in_order() -> (
    None
):
    read = ReadInputs(
        submitted=[ALLERGY, ORDER],
        errors=[LineError("orders.ndjson:1", "malformed_json", "line 1 is not JSON")],
        skipped=[
            Skipped("bundle.json#entry[3]", "Observation", "obs-1", "unsupported resource type"),
            Skipped(
                "bundle.json#entry[4]", "Bundle.entry", None, "bundle entry without a resource"
            ),
        ],
        notices=[LeftOut("allergy.json", "AllergyIntolerance/a1", "onsetDateTime left out")],
    )
    results: list[Published | NotSent] = [
        Published("allergy.json", str(ALLERGY.event.event_id), partition=3, offset=41),
        NotSent("orders.ndjson:2", "subject_erased", "the subject was erased"),
    ]
    documents = [*input_documents(read), *sent_documents([ALLERGY, ORDER], results)]
    assert [(d["result"], d["origin"]) for d in documents] == [
        ("error", "orders.ndjson:1"),
        ("skipped", "bundle.json#entry[3]"),
        ("skipped", "bundle.json#entry[4]"),
        ("notice", "allergy.json"),
        ("sent", "allergy.json"),
        ("not_sent", "orders.ndjson:2"),
    ]
    error, observation, entry, notice, sent, refused = documents
    assert (error["reason"], error["message"]) == ("malformed_json", "line 1 is not JSON")
    assert (observation["resource"], entry["resource"]) == ("Observation/obs-1", "Bundle.entry")
    assert notice["source_ref"] == "AllergyIntolerance/a1"
    assert "onsetDateTime left out" in notice["message"]
    assert sent == {
        "result": "sent",
        "origin": "allergy.json",
        "event_id": str(ALLERGY.event.event_id),
        "type": "AllergyRecorded",
        "partition": 3,
        "offset": 41,
    }
    assert (refused["event_id"], refused["type"], refused["reason"]) == (
        str(ORDER.event.event_id),
        "MedicationPrescribed",
        "subject_erased",
    )
