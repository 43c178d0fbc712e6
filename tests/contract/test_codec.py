"""The Avro codec: golden bytes, round trips, and typed refusals instead of guesses."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_reader, schemaless_writer
from hypothesis import given

from schemas.alerts import Alert
from schemas.checkpoint import StateCheckpoint
from schemas.codec import (
    AvroCodec,
    alert_codec,
    checkpoint_codec,
    decision_codec,
    erasure_codec,
    event_codec,
    event_record,
    frame,
    read_audit_codec,
    unframe,
)
from schemas.compatibility import backward_problems, can_read
from schemas.decisions import GateDecision
from schemas.erasures import ErasureRecorded, ReadAudited
from schemas.errors import (
    BadFraming,
    IncompatibleSchema,
    InvalidRecord,
    MalformedAvro,
    UnknownSchemaId,
)
from schemas.events import Event
from schemas.registry import FileSchemaRegistry, bundled_registry, registered
from tests.factories import make_event
from tests.strategies import event_histories

GOLDEN = {
    version: json.loads((Path(__file__).parent / "golden" / f"v{version}.json").read_text("utf-8"))
    for version in (1, 2, 3, 4)
}
"""Golden bytes per schema version: `vN.json` holds the kinds whose schema has a version N."""
CODECS: dict[str, tuple[Any, Any]] = {
    "events": (event_codec(), Event),
    "alerts": (alert_codec(), Alert),
    "decisions": (decision_codec(), GateDecision),
    "checkpoints": (checkpoint_codec(), StateCheckpoint),
    "erasures": (erasure_codec(), ErasureRecorded),
    "read_audits": (read_audit_codec(), ReadAudited),
}
_GOLDEN_ENTRIES: list[tuple[str, int, int, dict[str, Any]]] = [
    (kind, version, index, case)
    for version, golden in GOLDEN.items()
    for kind in CODECS
    for index, case in enumerate(golden.get(kind, ()))
]
GOLDEN_CASES = [
    pytest.param(kind, version, case, id=f"{kind}-v{version}-{index}")
    for kind, version, index, case in _GOLDEN_ENTRIES
]
LATEST_GOLDEN = [
    pytest.param(kind, version, case, id=f"{kind}-v{version}-{index}")
    for kind, version, index, case in _GOLDEN_ENTRIES
    if CODECS[kind][0].schema_version == version
]


@pytest.mark.parametrize(("kind", "version", "case"), LATEST_GOLDEN)
def test_given_a_record_when_encoded_then_the_golden_bytes_of_the_latest_version(
    kind: str, version: int, case: dict[str, Any]
) -> None:
    codec, model = CODECS[kind]
    assert codec.encode(model.model_validate(case["json"])).hex() == case["avro_hex"]


@pytest.mark.parametrize(("kind", "version", "case"), GOLDEN_CASES)
def test_given_committed_bytes_of_any_version_when_decoded_then_the_same_record(
    kind: str, version: int, case: dict[str, Any]
) -> None:
    """Bytes of every released version stay readable: v1 alerts read as v2 records whose
    `duplicate_therapy` is null."""
    codec, model = CODECS[kind]
    assert codec.decode(bytes.fromhex(case["avro_hex"])) == model.model_validate(case["json"])


def test_every_kind_has_golden_bytes_of_its_latest_version() -> None:
    assert {case.values[0] for case in LATEST_GOLDEN} == set(CODECS)


def test_golden_events_of_the_latest_version_cover_every_event_type() -> None:
    from schemas.events import EventType

    latest = GOLDEN[event_codec().schema_version]["events"]
    assert {case["json"]["type"] for case in latest} == {t.value for t in EventType}


@given(event_histories(max_size=8))
def test_given_any_event_when_round_tripped_then_identical(events: list[Event]) -> None:
    codec = event_codec()
    for event in events:
        assert codec.decode(codec.encode(event)) == event


@pytest.mark.parametrize(
    ("data", "error"),
    [
        pytest.param(b"", BadFraming, id="given no bytes then bad_framing"),
        pytest.param(
            b"\x01\x00\x00\x00\x01abc", BadFraming, id="given a wrong magic byte then bad_framing"
        ),
        pytest.param(
            b"\x00\x00\x00\x03\xe7" + b"x" * 20,
            UnknownSchemaId,
            id="given schema id 999 then unknown_schema_id",
        ),
        pytest.param(
            b"\x00\x00\x00\x00\x02" + b"x" * 20,
            IncompatibleSchema,
            id="given an Alert schema id on the events topic then incompatible_schema",
        ),
        pytest.param(
            b"\x00\x00\x00\x00\x01\x02",
            MalformedAvro,
            id="given a truncated body then malformed_avro",
        ),
    ],
)
def test_given_bad_bytes_when_decoded_then_a_typed_error(
    data: bytes, error: type[Exception]
) -> None:
    with pytest.raises(error):
        event_codec().decode(data)


def test_given_trailing_bytes_after_a_record_then_malformed_avro() -> None:
    valid = bytes.fromhex(GOLDEN[1]["events"][0]["avro_hex"])
    with pytest.raises(MalformedAvro):
        event_codec().decode(valid + b"\x00\x01")


def test_given_a_record_that_breaks_model_rules_then_invalid_record_without_values() -> None:
    case = copy.deepcopy(GOLDEN[1]["events"][0]["json"])
    record = event_record(Event.model_validate(case))
    record["confidence"] = 7.5
    record["tenant_id"] = "has:colon"
    body = io.BytesIO()
    latest = bundled_registry().latest("uac.Event")
    schemaless_writer(body, latest.parsed, record)
    with pytest.raises(InvalidRecord) as raised:
        event_codec().decode(frame(latest.schema_id, body.getvalue()))
    assert "confidence" in str(raised.value)
    assert "7.5" not in str(raised.value)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_given_a_fact_whose_avro_double_is_not_finite_then_invalid_record(value: float) -> None:
    """Avro carries NaN and infinity; no state could be checkpointed with them (canonical JSON
    has no such numbers), so the record is refused, never accepted to fail later."""
    fact = make_event("FactAsserted", "weight", payload={"key": "weight_kg", "value": 70.5})
    record = event_record(fact)
    record["payload"] = (record["payload"][0], record["payload"][1] | {"value": value})
    body = io.BytesIO()
    latest = bundled_registry().latest("uac.Event")
    schemaless_writer(body, latest.parsed, record)
    with pytest.raises(InvalidRecord) as raised:
        event_codec().decode(frame(latest.schema_id, body.getvalue()))
    assert "finite number" in str(raised.value)


def _event_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(bundled_registry().latest("uac.Event").schema_json)
    return schema


def test_given_a_writer_schema_incompatible_with_the_reader_then_refused_not_guessed() -> None:
    """A producer on a schema where `confidence` became a string: fastavro would mis-read the
    bytes as some double; the codec refuses because the registry says the schemas conflict."""
    old = _event_schema()
    next(f for f in old["fields"] if f["name"] == "confidence")["type"] = "string"
    registry = FileSchemaRegistry(
        (
            registered("uac.Event", 0, 90, json.dumps(old)),
            registered("uac.Event", 1, 1, bundled_registry().latest("uac.Event").schema_json),
        )
    )
    record = event_record(event_codec().decode(bytes.fromhex(GOLDEN[1]["events"][0]["avro_hex"])))
    record["confidence"] = "0.9"
    body = io.BytesIO()
    schemaless_writer(body, parse_schema(old), record)
    with pytest.raises(IncompatibleSchema):
        AvroCodec(registry, "uac.Event", Event, event_record).decode(frame(90, body.getvalue()))


def test_given_v1_bytes_when_read_by_a_v2_reader_with_a_new_optional_field_then_they_decode() -> (
    None
):
    """Deploying v2: the committed v1 bytes stay readable (BACKWARD), the new field defaults."""
    newer = _event_schema()
    newer["fields"].append({"name": "language", "type": ["null", "string"], "default": None})
    registry = FileSchemaRegistry(
        (
            registered("uac.Event", 1, 1, bundled_registry().by_id(1).schema_json),
            registered("uac.Event", 2, 7, json.dumps(newer)),
        )
    )
    assert backward_problems(registry, "uac.Event") == []

    class EventV2(Event):
        language: str | None = None

    for case in GOLDEN[1]["events"]:
        decoded = AvroCodec(registry, "uac.Event", EventV2, event_record).decode(
            bytes.fromhex(case["avro_hex"])
        )
        assert decoded.language is None
        assert decoded.event_id == Event.model_validate(case["json"]).event_id


@pytest.mark.parametrize("subject", bundled_registry().subjects())
def test_every_registered_version_reads_every_earlier_one(subject: str) -> None:
    assert backward_problems(bundled_registry(), subject) == []


def test_an_alert_consumer_still_on_v1_reads_v2_records() -> None:
    """Adding an optional field is compatible both ways: a consumer built on alert v1 (a
    Confluent deserializer resolves the writer's v2 to its v1) reads v2 records, without
    `duplicate_therapy`."""
    v1, v2, _ = bundled_registry().versions("uac.Alert")
    assert can_read(v1, v2) is None
    for case in GOLDEN[2]["alerts"]:
        schema_id, body = unframe(bytes.fromhex(case["avro_hex"]))
        assert schema_id == v2.schema_id
        record = schemaless_reader(io.BytesIO(body), v2.parsed, v1.parsed)
        assert isinstance(record, dict)
        assert "duplicate_therapy" not in record
        assert str(record["alert_id"]) == case["json"]["alert_id"]
        assert record["severity"] == case["json"]["severity"]


def test_an_alert_consumer_still_on_v2_reads_v3_records_without_their_purpose() -> None:
    """A consumer built on alert v2 resolves the writer's v3 to its v2 (the purpose is dropped);
    a v3 reader gives a v2 record the default purpose, care."""
    _, v2, v3 = bundled_registry().versions("uac.Alert")
    assert can_read(v2, v3) is None
    assert can_read(v3, v2) is None
    for case in GOLDEN[3]["alerts"]:
        schema_id, body = unframe(bytes.fromhex(case["avro_hex"]))
        assert schema_id == v3.schema_id
        record = schemaless_reader(io.BytesIO(body), v3.parsed, v2.parsed)
        assert isinstance(record, dict)
        assert "purpose" not in record
        assert str(record["alert_id"]) == case["json"]["alert_id"]
    assert {case["json"]["purpose"] for case in GOLDEN[3]["alerts"]} == {"care", "research"}
    for case in GOLDEN[2]["alerts"]:
        assert alert_codec().decode(bytes.fromhex(case["avro_hex"])).purpose == "care"


def test_an_event_consumer_still_on_v2_reads_v3_records_without_the_new_field() -> None:
    """A consumer built on event v2 resolves the writer's v3 to its v2: a stop entered in error
    reads as a plain stop (the new field is dropped), every other record as it was."""
    _, v2, v3, _ = bundled_registry().versions("uac.Event")
    assert can_read(v2, v3) is None
    for case in GOLDEN[3]["events"]:
        schema_id, body = unframe(bytes.fromhex(case["avro_hex"]))
        assert schema_id == v3.schema_id
        record = schemaless_reader(io.BytesIO(body), v3.parsed, v2.parsed)
        assert isinstance(record, dict)
        assert str(record["event_id"]) == case["json"]["event_id"]
        payload = record["payload"]
        assert "entered_in_error" not in (payload[1] if isinstance(payload, tuple) else payload)


def test_an_event_consumer_still_on_v3_reads_v4_records_without_the_new_field() -> None:
    """A consumer built on event v3 resolves the writer's v4 to its v3: an acknowledgement that
    names its grade reads as one that does not (so it covers any grade there), every other
    record as it was."""
    *_, v3, v4 = bundled_registry().versions("uac.Event")
    assert can_read(v3, v4) is None
    for case in GOLDEN[4]["events"]:
        schema_id, body = unframe(bytes.fromhex(case["avro_hex"]))
        assert schema_id == v4.schema_id
        record = schemaless_reader(io.BytesIO(body), v4.parsed, v3.parsed)
        assert isinstance(record, dict)
        assert str(record["event_id"]) == case["json"]["event_id"]
        payload = record["payload"]
        assert "severity" not in (payload[1] if isinstance(payload, tuple) else payload)


def test_given_a_breaking_version_then_the_compatibility_check_names_it() -> None:
    broken = _event_schema()
    broken["fields"] = [f for f in broken["fields"] if f["name"] != "payload"] + [
        {"name": "payload", "type": "string"}
    ]
    registry = FileSchemaRegistry(
        (
            registered("uac.Event", 1, 1, bundled_registry().latest("uac.Event").schema_json),
            registered("uac.Event", 2, 8, json.dumps(broken)),
        )
    )
    (problem,) = backward_problems(registry, "uac.Event")
    assert "v2 cannot read v1" in problem


def test_manifest_ids_are_unique_and_fixed() -> None:
    ids = {
        s: [v.schema_id for v in bundled_registry().versions(s)]
        for s in bundled_registry().subjects()
    }
    assert ids == {
        "uac.Alert": [2, 7, 10],
        "uac.Event": [1, 8, 9, 11],
        "uac.GateDecision": [3],
        "uac.StateCheckpoint": [4],
        "uac.ErasureRecorded": [5],
        "uac.ReadAudited": [6],
    }
