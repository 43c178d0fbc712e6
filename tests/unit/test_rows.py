"""The sink's row mappers, table-driven: given a worker output record, when mapped, then the row
the ClickHouse table receives; and the sink's batch bookkeeping (dedup tokens, commit offsets).
Pure: no broker, no engine."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid5

import pytest
from aiokafka import TopicPartition

from projections.document import checkpoint_of
from projections.state import replay
from schemas.alerts import Alert, DrugAllergyFinding, Evidence
from schemas.codec import event_codec
from schemas.decisions import GateDecision
from streams.rows import (
    ALERT_COLUMNS,
    CHECKPOINT_COLUMNS,
    COLUMNS,
    DECISION_COLUMNS,
    EVENT_COLUMNS,
    Coordinates,
    Row,
    RowMappingError,
    accepted_headers,
    accepted_rows,
    alert_row,
    checkpoint_row,
    decision_row,
)
from streams.sink import Batch
from tests.factories import T0, make_event

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
    event, decision = accepted_rows(EVENT, VALUE, HEADERS, ACCEPTED_AT, INGESTED)
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
        accepted_rows(EVENT, VALUE, headers, ACCEPTED_AT, INGESTED)


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


def test_checkpoint_row_keeps_the_state_document_verbatim() -> None:
    state = replay([make_event("FactAsserted", "home"), make_event("TravelRecorded", "trip")])
    checkpoint = checkpoint_of(state)
    row = _by_name(
        CHECKPOINT_COLUMNS, checkpoint_row(checkpoint, Coordinates("uac.state", 1, 2), INGESTED)
    )
    assert row["state_json"] == checkpoint.state_json
    assert (row["version"], row["state_hash"], row["erased"]) == (2, checkpoint.state_hash, False)
    assert (row["source_partition"], row["source_offset"]) == (1, 2)


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
