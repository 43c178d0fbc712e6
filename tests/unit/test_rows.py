"""The sink's row mappers, table-driven: given a worker output record, when mapped, then the row
the ClickHouse table receives; the sink's batch bookkeeping (dedup tokens, commit offsets); how
it opens sealed records and drops the rows of erased subjects. No broker, no engine (the key
store is a temporary directory)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID, uuid5

import pytest
from aiokafka import TopicPartition
from hypothesis import given, settings

from projections.document import checkpoint_of
from projections.state import replay
from schemas.alerts import Alert, DrugAllergyFinding, Evidence
from schemas.codec import (
    alert_codec,
    checkpoint_codec,
    decision_codec,
    erasure_codec,
    event_codec,
    read_audit_codec,
)
from schemas.decisions import GateDecision
from schemas.erasures import ErasureRecorded, ReadAudited, subject_ref
from schemas.events import Event
from streams.keys import FileKeyStore
from streams.rows import (
    ALERT_COLUMNS,
    AUDIT_COLUMNS,
    CHECKPOINT_COLUMNS,
    COLUMNS,
    DECISION_COLUMNS,
    EVENT_COLUMNS,
    RECEIPT_COLUMNS,
    SUBJECT_TABLES,
    Coordinates,
    Row,
    RowMappingError,
    accepted_headers,
    accepted_rows,
    alert_row,
    audit_row,
    checkpoint_row,
    decision_row,
    json_text,
    receipt_row,
    rows_of_living_subjects,
)
from streams.sealing import Sealer
from streams.settings import Settings
from streams.sink import Sink
from streams.sink_batches import Batch
from tests.factories import T0, make_event
from tests.strategies import event_histories

INGESTED = datetime(2024, 6, 1, 12, 0, 0, 123000, tzinfo=UTC)
DECISION_ID = UUID("6f1c2b1e-1111-4c1e-8f00-000000000001")
ACCEPTED_AT = Coordinates("uac.events.accepted", 2, 41)
EVENT = make_event(
    "MedicationPrescribed",
    "rx",
    source_ref="fhir:MedicationRequest/1",
    valid_from=T0,
    supersedes="claim-0",
)
VALUE = event_codec().encode(EVENT)
RECORD = event_codec().decode_record(VALUE)
HEADERS = [
    ("uac-decision-id", str(DECISION_ID).encode()),
    ("uac-source", b"uac.events/2/17"),
    ("uac-decided-at", b"2024-06-01T11:59:59.500Z"),
]
SHA = "ab" * 32


def _by_name(columns: tuple[str, ...], row: Row) -> dict[str, Any]:
    assert len(columns) == len(row)
    return dict(zip(columns, row, strict=True))


def _accepted() -> tuple[dict[str, Any], dict[str, Any]]:
    event, decision = accepted_rows(RECORD, VALUE, HEADERS, ACCEPTED_AT, INGESTED)
    return _by_name(EVENT_COLUMNS, event), _by_name(DECISION_COLUMNS, decision)


def _decision(**fields: Any) -> GateDecision:
    defaults: dict[str, Any] = {
        "decision_id": UUID("00000000-0000-4000-8000-000000000009"),
        "outcome": "rejected",
        "reasons": ("bad_framing",),
        "detail": "first byte is 7, not the magic byte 0",
        "message_sha256": SHA,
        "source_topic": "uac.events",
        "source_partition": 0,
        "source_offset": 5,
        "decided_at": datetime(2024, 6, 1, 13, 0, tzinfo=UTC),
    }
    return GateDecision.model_validate(defaults | fields)


FINDING = DrugAllergyFinding(
    allergy_id="allergy-1",
    allergen="penicillin",
    prescription_id="rx-1",
    drug="amoxicillin",
    ingredients=("amoxicillin",),
    matched=("amoxicillin",),
    level="same_class",
    reason="penicillins",
    source="test",
    knowledge_version="1",
)


def _alert(**fields: Any) -> Alert:
    alert_id = uuid5(UUID(int=0), "alert")
    defaults: dict[str, Any] = {
        "lifecycle_id": uuid5(alert_id, "raised"),
        "alert_id": alert_id,
        "tenant_id": "clinic-a",
        "subject_id": "patient-1",
        "rule_id": "drug-allergy",
        "rule_version": 1,
        "status": "raised",
        "severity": "critical",
        "title": "Amoxicillin vs penicillin allergy",
        "detail": "same class",
        "cause": ("a", "b"),
        "evidence": (Evidence(event_id="e1", claim_id="a", role="allergy", description="d"),),
        "drug_allergy": None,
        "trigger_event_id": "e1",
        "occurred_at": T0,
    }
    return Alert.model_validate(defaults | fields)


ACCEPTED_EVENT_FIELDS = [
    pytest.param(
        "tenant_id", "clinic-a", id="given an accepted event then tenant_id is the event's"
    ),
    pytest.param(
        "event_id", UUID(EVENT.event_id), id="given an accepted event then event_id is a UUID"
    ),
    pytest.param(
        "type", "MedicationPrescribed", id="given an accepted event then type is plain text"
    ),
    pytest.param(
        "origin", "explicit_statement", id="given an accepted event then origin is plain text"
    ),
    pytest.param(
        "sensitivity", "normal", id="given an accepted event then sensitivity is plain text"
    ),
    pytest.param("source_ref", "fhir:MedicationRequest/1", id="given a source_ref then it is kept"),
    pytest.param("valid_from", T0, id="given valid_from then it is kept as a UTC time"),
    pytest.param("valid_until", None, id="given no valid_until then NULL"),
    pytest.param("supersedes", "claim-0", id="given supersedes then it is kept"),
    pytest.param(
        "payload",
        '{"codes":[],"dose":null,"drug":"amoxicillin","note":null,"prescription_id":"rx-1","route":null}',
        id="given a payload then it is canonical JSON with sorted keys",
    ),
    pytest.param("decision_id", DECISION_ID, id="given the decision header then decision_id"),
    pytest.param(
        "decided_at",
        datetime(2024, 6, 1, 11, 59, 59, 500000, tzinfo=UTC),
        id="given the decided-at header then decided_at in UTC",
    ),
    pytest.param("source_topic", "uac.events", id="given the source header then source_topic"),
    pytest.param("source_partition", 2, id="given the source header then source_partition"),
    pytest.param("source_offset", 17, id="given the source header then source_offset"),
    pytest.param(
        "accepted_partition", 2, id="given the record's partition then accepted_partition"
    ),
    pytest.param("accepted_offset", 41, id="given the record's offset then accepted_offset"),
    pytest.param("ingested_at", INGESTED, id="given the sink's clock then ingested_at"),
]


@pytest.mark.parametrize(("column", "expected"), ACCEPTED_EVENT_FIELDS)
def test_accepted_event_row(column: str, expected: Any) -> None:
    event, _ = _accepted()
    assert event[column] == expected


ACCEPTED_DECISION_FIELDS = [
    pytest.param("outcome", "accepted", id="given an accepted event then an accepted decision"),
    pytest.param("reasons", [], id="given an accepted event then no reason codes"),
    pytest.param("decision_id", DECISION_ID, id="given the decision header then the same id"),
    pytest.param("event_id", EVENT.event_id, id="given an accepted event then its event_id"),
    pytest.param("event_type", "MedicationPrescribed", id="given an accepted event then its type"),
    pytest.param(
        "message_sha256",
        hashlib.sha256(VALUE).hexdigest(),
        id="given the framed bytes then message_sha256 hashes them as the gate did",
    ),
    pytest.param("source_offset", 17, id="given the source header then the original offset"),
]


@pytest.mark.parametrize(("column", "expected"), ACCEPTED_DECISION_FIELDS)
def test_accepted_decision_row(column: str, expected: Any) -> None:
    _, decision = _accepted()
    assert decision[column] == expected


def _model_columns(event: Event) -> dict[str, Any]:
    """What the `events` and `gate_decisions` rows say about an event, read off its model."""
    return {
        "tenant_id": event.tenant_id,
        "subject_id": event.subject_id,
        "event_id": UUID(event.event_id),
        "type": event.type.value,
        "actor": event.actor,
        "occurred_at": event.occurred_at,
        "recorded_at": event.recorded_at,
        "origin": event.origin.value,
        "source_ref": event.source_ref,
        "confidence": event.confidence,
        "sensitivity": event.sensitivity.value,
        "purpose": event.purpose,
        "scope": event.scope,
        "valid_from": event.valid_from,
        "valid_until": event.valid_until,
        "supersedes": event.supersedes,
        "payload": json_text(event.payload),
    }


@settings(max_examples=60)
@given(event_histories(max_size=8))
def test_given_any_event_then_the_rows_of_its_avro_record_say_what_its_model_says(
    events: list[Event],
) -> None:
    codec = event_codec()
    for event in events:
        value = codec.encode(event)
        row, decision = accepted_rows(
            codec.decode_record(value), value, HEADERS, ACCEPTED_AT, INGESTED
        )
        expected = _model_columns(event)
        assert {name: _by_name(EVENT_COLUMNS, row)[name] for name in expected} == expected
        decided = _by_name(DECISION_COLUMNS, decision)
        assert (decided["event_id"], decided["event_type"], decided["actor"]) == (
            event.event_id,
            event.type.value,
            event.actor,
        )


BAD_HEADERS = [
    pytest.param(HEADERS[1:], "uac-decision-id", id="given no decision header then refused"),
    pytest.param([HEADERS[0], HEADERS[2]], "uac-source", id="given no source header then refused"),
    pytest.param(HEADERS[:2], "uac-decided-at", id="given no decided-at header then refused"),
    pytest.param(
        [("uac-decision-id", b"not-a-uuid"), *HEADERS[1:]],
        "unreadable",
        id="given a decision id that is not a UUID then refused",
    ),
    pytest.param(
        [HEADERS[0], ("uac-source", b"uac.events/x/1"), HEADERS[2]],
        "non-numeric",
        id="given a source with a non-numeric partition then refused",
    ),
    pytest.param(
        [HEADERS[0], ("uac-source", b"uac.events"), HEADERS[2]],
        "topic/partition/offset",
        id="given a source without coordinates then refused",
    ),
    pytest.param(
        [*HEADERS[:2], ("uac-decided-at", b"2024-06-01T12:00:00")],
        "no UTC offset",
        id="given a naive decided-at then refused",
    ),
    pytest.param(
        [*HEADERS[:2], ("uac-decided-at", b"yesterday")],
        "ISO 8601",
        id="given a decided-at that is not a time then refused",
    ),
]


@pytest.mark.parametrize(("headers", "message"), BAD_HEADERS)
def test_accepted_headers_refused(headers: list[tuple[str, bytes]], message: str) -> None:
    with pytest.raises(RowMappingError, match=message):
        accepted_rows(RECORD, VALUE, headers, ACCEPTED_AT, INGESTED)


def test_decided_at_with_an_offset_is_normalised_to_utc() -> None:
    headers = [*HEADERS[:2], ("uac-decided-at", b"2024-06-01T14:00:00.250+02:00")]
    parsed = accepted_headers(headers)
    assert parsed.decided_at == datetime(2024, 6, 1, 12, 0, 0, 250000, tzinfo=UTC)
    assert parsed.decided_at.tzinfo is UTC


QUARANTINE_CASES = [
    pytest.param(
        _decision(),
        {"tenant_id": "", "subject_id": None, "event_id": None, "reasons": ["bad_framing"]},
        id="given a rejection of unreadable bytes then tenant is empty and identity NULL",
    ),
    pytest.param(
        _decision(
            tenant_id="clinic-a",
            subject_id="patient-1",
            event_id=EVENT.event_id,
            actor="stranger",
            event_type="PreferenceStated",
            reasons=("actor_not_allowed", "secret_in_text"),
        ),
        {
            "tenant_id": "clinic-a",
            "subject_id": "patient-1",
            "event_id": EVENT.event_id,
            "actor": "stranger",
            "event_type": "PreferenceStated",
            "reasons": ["actor_not_allowed", "secret_in_text"],
        },
        id="given a rejected event then its identity and every reason code",
    ),
    pytest.param(
        _decision(),
        {
            "outcome": "rejected",
            "message_sha256": SHA,
            "source_topic": "uac.events",
            "source_partition": 0,
            "source_offset": 5,
            "decided_at": datetime(2024, 6, 1, 13, 0, tzinfo=UTC),
            "ingested_at": INGESTED,
        },
        id="given a rejection then outcome, hash, source coordinates and times",
    ),
]


@pytest.mark.parametrize(("decision", "expected"), QUARANTINE_CASES)
def test_quarantine_decision_row(decision: GateDecision, expected: dict[str, Any]) -> None:
    row = _by_name(DECISION_COLUMNS, decision_row(decision, INGESTED))
    assert {column: row[column] for column in expected} == expected


ALERT_AT = Coordinates("uac.alerts", 3, 9)
ALERT_CASES = [
    pytest.param(
        _alert(),
        {
            "status": "raised",
            "severity": "critical",
            "cause": ["a", "b"],
            "drug_allergy": None,
            "duplicate_therapy": None,
            "source_offset": 9,
            "occurred_at": T0,
        },
        id="given a raised alert without a finding then drug_allergy is NULL",
    ),
    pytest.param(
        _alert(drug_allergy=FINDING, status="resolved", reason="stopped"),
        {"status": "resolved", "reason": "stopped"},
        id="given a resolved alert then its status and reason",
    ),
]


@pytest.mark.parametrize(("alert", "expected"), ALERT_CASES)
def test_alert_row(alert: Alert, expected: dict[str, Any]) -> None:
    row = _by_name(ALERT_COLUMNS, alert_row(alert, ALERT_AT, INGESTED))
    assert {column: row[column] for column in expected} == expected


def test_alert_row_keeps_evidence_and_finding_as_json() -> None:
    row = _by_name(ALERT_COLUMNS, alert_row(_alert(drug_allergy=FINDING), ALERT_AT, INGESTED))
    assert json.loads(row["evidence"]) == [
        {"claim_id": "a", "description": "d", "event_id": "e1", "role": "allergy"}
    ]
    assert json.loads(row["drug_allergy"])["ingredients"] == ["amoxicillin"]
    assert row["alert_id"] == _alert().alert_id


def test_alert_row_keeps_a_duplicate_therapy_finding_as_json() -> None:
    finding = {
        "prescription_ids": ["rx-1", "rx-2"],
        "drugs": ["warfarin", "apixaban"],
        "shared_by": "therapeutic group",
        "shared": ["anticoagulants"],
        "knowledge_version": "uac-bundled-2026.12.2",
    }
    alert = _alert(rule_id="duplicate-therapy", duplicate_therapy=finding)
    row = _by_name(ALERT_COLUMNS, alert_row(alert, ALERT_AT, INGESTED))
    assert json.loads(row["duplicate_therapy"]) == finding
    assert row["drug_allergy"] is None


def test_checkpoint_row_keeps_the_state_document_verbatim() -> None:
    state = replay([make_event("FactAsserted", "home"), make_event("TravelRecorded", "trip")])
    checkpoint = checkpoint_of(state)
    row = _by_name(
        CHECKPOINT_COLUMNS, checkpoint_row(checkpoint, Coordinates("uac.state", 1, 2), INGESTED)
    )
    assert row["state_json"] == checkpoint.state_json
    assert (row["version"], row["state_hash"], row["erased"]) == (2, checkpoint.state_hash, False)
    assert (row["source_partition"], row["source_offset"]) == (1, 2)


AUDIT = ReadAudited(
    audit_id=UUID("00000000-0000-4000-8000-0000000000a1"),
    tenant_id="clinic-a",
    subject_ref=subject_ref("clinic-a", "patient-1"),
    actor="dr-who",
    purpose="care",
    action="state",
    detail="state document",
    read_at=datetime(2024, 6, 1, 12, 0, tzinfo=UTC),
)
ENTRY = ErasureRecorded(
    erasure_id=EVENT.event_id,
    tenant_id="clinic-a",
    subject_ref=subject_ref("clinic-a", "patient-1"),
    requested_at=T0,
    recorded_at=datetime(2024, 6, 1, 11, 0, tzinfo=UTC),
    requested_by="uac-cli",
    key_destroyed=True,
)
COMPLETED = datetime(2024, 6, 1, 11, 0, 1, tzinfo=UTC)


def _receipt(**removed: int) -> dict[str, Any]:
    return _by_name(RECEIPT_COLUMNS, receipt_row(ENTRY, removed, COMPLETED, verified=True))


def test_audit_row_copies_the_record_and_names_the_subject_by_reference() -> None:
    row = _by_name(AUDIT_COLUMNS, audit_row(AUDIT, INGESTED))
    assert row == {
        "audit_id": AUDIT.audit_id,
        "tenant_id": "clinic-a",
        "subject_ref": subject_ref("clinic-a", "patient-1"),
        "actor": "dr-who",
        "purpose": "care",
        "action": "state",
        "detail": "state document",
        "read_at": datetime(2024, 6, 1, 12, 0, tzinfo=UTC),
        "ingested_at": INGESTED,
    }


def test_receipt_row_records_what_was_removed_and_no_subject_id() -> None:
    row = _receipt(events=3, alerts=1)
    assert row["removed_rows"] == {"events": 3, "alerts": 1}
    assert (row["erasure_id"], row["tenant_id"]) == (EVENT.event_id, "clinic-a")
    assert (row["requested_by"], row["key_destroyed"], row["verified"]) == ("uac-cli", True, True)
    assert (row["requested_at"], row["recorded_at"], row["completed_at"]) == (
        T0,
        ENTRY.recorded_at,
        COMPLETED,
    )
    assert "patient-1" not in json.dumps(row, default=str)


ALL_ROWS = [
    pytest.param(
        "events", _accepted()[0], id="given an events row then its times are tz-aware UTC"
    ),
    pytest.param(
        "gate_decisions",
        _by_name(DECISION_COLUMNS, decision_row(_decision(), INGESTED)),
        id="given a gate_decisions row then its times are tz-aware UTC",
    ),
    pytest.param(
        "alerts",
        _by_name(ALERT_COLUMNS, alert_row(_alert(), ALERT_AT, INGESTED)),
        id="given an alerts row then its times are tz-aware UTC",
    ),
    pytest.param(
        "audit_reads",
        _by_name(AUDIT_COLUMNS, audit_row(AUDIT, INGESTED)),
        id="given an audit_reads row then its times are tz-aware UTC",
    ),
    pytest.param(
        "erasures", _receipt(), id="given an erasure receipt then its times are tz-aware UTC"
    ),
]


@pytest.mark.parametrize(("table", "row"), ALL_ROWS)
def test_every_time_is_utc(table: str, row: dict[str, Any]) -> None:
    assert tuple(row) == COLUMNS[table]
    times = [value for value in row.values() if isinstance(value, datetime)]
    assert times
    assert all(value.utcoffset() == timedelta(0) for value in times)


@dataclass(frozen=True)
class _Record:
    """The fields of an aiokafka ConsumerRecord a sink batch reads."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    value: bytes | None = b"x"


def _batch(*records: _Record) -> Batch:
    batch = Batch()
    for record in records:
        batch.add(record, [])
    return batch


FIRST = _Record("uac.events.accepted", 0, 10, 1_000)
LAST = _Record("uac.events.accepted", 0, 12, 1_002)
OTHER = _Record("uac.alerts", 1, 3, 1_001)

TOKENS = [
    pytest.param(
        _batch(FIRST, LAST, OTHER),
        _batch(OTHER, FIRST, LAST),
        True,
        id="given the same records in another fetch order then the same token",
    ),
    pytest.param(
        _batch(FIRST, LAST),
        _batch(FIRST, _Record("uac.events.accepted", 0, 13, 1_003)),
        False,
        id="given a batch that ends one record later then another token",
    ),
    pytest.param(
        _batch(FIRST, LAST),
        _batch(replace(FIRST, timestamp=5_000), replace(LAST, timestamp=5_002)),
        False,
        id="given the same offsets of a recreated topic then another token",
    ),
]


@pytest.mark.parametrize(("one", "other", "same"), TOKENS)
def test_batch_tokens(one: Batch, other: Batch, same: bool) -> None:
    assert (one.token("events") == other.token("events")) is same


def test_each_table_of_a_batch_has_its_own_token() -> None:
    batch = _batch(FIRST, LAST)
    assert len({batch.token(table) for table in COLUMNS}) == len(COLUMNS)


def test_a_batch_commits_the_offset_after_its_last_record() -> None:
    batch = _batch(FIRST, OTHER, LAST)
    assert batch.next_offsets() == {
        TopicPartition("uac.events.accepted", 0): 13,
        TopicPartition("uac.alerts", 1): 4,
    }
    assert batch.size == 3


# ------------------------------------------------------------------------------------------------
# Erased subjects: rows dropped at flush time
# ------------------------------------------------------------------------------------------------

ERASED = {("clinic-a", "patient-1")}


def _erased(tenant: str, subject: str) -> bool:
    return (tenant, subject) in ERASED


def _rows_of(tenant: str, subject: str) -> dict[str, Row]:
    """One row per table that names a subject, for `tenant:subject`."""
    event = make_event("PreferenceStated", f"{tenant}/{subject}", tenant=tenant, subject=subject)
    record = event_codec().decode_record(event_codec().encode(event))
    event_row, decision = accepted_rows(record, VALUE, HEADERS, ACCEPTED_AT, INGESTED)
    checkpoint = checkpoint_of(replay([event]))
    return {
        "events": event_row,
        "gate_decisions": decision,
        "alerts": alert_row(_alert(tenant_id=tenant, subject_id=subject), ALERT_AT, INGESTED),
        "state_checkpoints": checkpoint_row(checkpoint, ALERT_AT, INGESTED),
    }


LIVING = [
    pytest.param(
        table,
        [_rows_of("clinic-a", "patient-1")[table], _rows_of("clinic-a", "patient-2")[table]],
        1,
        id=f"given {table} rows of an erased and a living subject then only the living one's",
    )
    for table in SUBJECT_TABLES
] + [
    pytest.param(
        table,
        [_rows_of("clinic-b", "patient-1")[table]],
        1,
        id=f"given {table} rows of the same subject id in another tenant then they are kept",
    )
    for table in SUBJECT_TABLES
]


@pytest.mark.parametrize(("table", "rows", "kept"), LIVING)
def test_rows_of_erased_subjects_are_dropped(table: str, rows: list[Row], kept: int) -> None:
    living = rows_of_living_subjects(table, rows, _erased)
    assert len(living) == kept
    subject_at = COLUMNS[table].index("subject_id")
    assert all(row[subject_at] != "patient-1" or row[0] != "clinic-a" for row in living)


KEPT = [
    pytest.param(
        "gate_decisions",
        [decision_row(_decision(), INGESTED)],
        id="given a decision about an unreadable message (no subject) then it is kept",
    ),
    pytest.param(
        "audit_reads",
        [audit_row(AUDIT, INGESTED)],
        id="given an audit row of an erased subject (by reference only) then it is kept",
    ),
]


@pytest.mark.parametrize(("table", "rows"), KEPT)
def test_rows_without_a_subject_id_are_kept(table: str, rows: list[Row]) -> None:
    assert rows_of_living_subjects(table, rows, _erased) == rows


# ------------------------------------------------------------------------------------------------
# Opening sealed records in the sink
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Consumed:
    """The fields of an aiokafka ConsumerRecord the sink reads."""

    topic: str
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    partition: int = 0
    offset: int = 7
    timestamp: int = 1_000


@pytest.fixture
def sink(tmp_path: Path) -> Sink:
    """A sink that is not started: no broker, no engine, only its key store on disk."""
    return Sink(Settings(home=tmp_path, topic_prefix="uac."))


def _sealer(sink: Sink) -> Sealer:
    return Sealer(FileKeyStore(sink.settings.keys_dir))


def _skipped(sink: Sink, topic: str, reason: str) -> float:
    labels = {"topic": topic, "reason": reason}
    return sink.metrics.registry.get_sample_value("uac_sink_skipped_records_total", labels) or 0.0


def _undecodable(sink: Sink, topic: str) -> float:
    labels = {"topic": topic}
    value = sink.metrics.registry.get_sample_value("uac_sink_undecodable_records_total", labels)
    return value or 0.0


def _sealed_records(sink: Sink) -> list[_Consumed]:
    sealer, topics = _sealer(sink), sink.topics
    checkpoint = checkpoint_of(replay([EVENT]))
    return [
        _Consumed(topics.accepted, sealer.seal(EVENT.key, VALUE), HEADERS),
        _Consumed(topics.alerts, sealer.seal(EVENT.key, alert_codec().encode(_alert()))),
        _Consumed(topics.state, sealer.seal(EVENT.key, checkpoint_codec().encode(checkpoint))),
    ]


def test_sealed_records_are_opened_before_they_are_decoded(sink: Sink) -> None:
    rows = [sink._rows_of(record, INGESTED) for record in _sealed_records(sink)]
    assert [[table for table, _ in found] for found in rows] == [
        ["events", "gate_decisions"],
        ["alerts"],
        ["state_checkpoints"],
    ]
    event_row = _by_name(EVENT_COLUMNS, rows[0][0][1])
    assert (event_row["event_id"], event_row["subject_id"]) == (UUID(EVENT.event_id), "patient-1")


def test_the_accepted_decision_hashes_the_sealed_bytes_as_the_gate_did(sink: Sink) -> None:
    record = _sealed_records(sink)[0]
    decision = _by_name(DECISION_COLUMNS, sink._rows_of(record, INGESTED)[1][1])
    assert record.value is not None
    assert decision["message_sha256"] == hashlib.sha256(record.value).hexdigest()


def test_records_of_an_erased_subject_are_skipped_and_counted(sink: Sink) -> None:
    records = _sealed_records(sink)
    _sealer(sink).keys.destroy(EVENT.key)
    assert [sink._rows_of(record, INGESTED) for record in records] == [[], [], []]
    for record in records:
        assert _skipped(sink, record.topic, "erased_subject") == 1
        assert _undecodable(sink, record.topic) == 0


def test_a_state_tombstone_is_skipped_and_counted(sink: Sink) -> None:
    assert sink._rows_of(_Consumed(sink.topics.state, None), INGESTED) == []
    assert _skipped(sink, sink.topics.state, "tombstone") == 1


def test_a_record_sealed_for_another_subject_is_refused(sink: Sink) -> None:
    other = _sealer(sink).seal("clinic-a:patient-2", VALUE)
    assert sink._rows_of(_Consumed(sink.topics.accepted, other, HEADERS), INGESTED) == []
    assert _undecodable(sink, sink.topics.accepted) == 1


def test_unsealed_decisions_and_audit_records_are_read_as_they_are(sink: Sink) -> None:
    decision = _Consumed(sink.topics.quarantine, decision_codec().encode(_decision()))
    audit = _Consumed(sink.topics.audit, read_audit_codec().encode(AUDIT))
    assert [table for table, _ in sink._rows_of(decision, INGESTED)] == ["gate_decisions"]
    assert sink._rows_of(audit, INGESTED) == [("audit_reads", audit_row(AUDIT, INGESTED))]


def test_a_ledger_entry_joins_the_ledger_and_the_batch_at_once(sink: Sink) -> None:
    record = _Consumed(sink.topics.erasures, erasure_codec().encode(ENTRY))
    sink._batch.add(record, [])
    sink._take_erasure(record)
    assert sink.ledger.is_erased("clinic-a:patient-1")
    assert not sink.ledger.is_erased("clinic-b:patient-1")
    assert sink._batch.erasures == [ENTRY]
    assert sink._batch.next_offsets() == {TopicPartition(sink.topics.erasures, 0): 8}
    assert sink._erased_check()("clinic-a", "patient-1")
