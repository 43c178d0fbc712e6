"""Pure mappers from the worker's output records to ClickHouse rows (no I/O, no clock).

Each table's column names live here next to the mapper that fills them, in the order of the
tuples the mappers return; `deploy/clickhouse/001_tables.sql` and `002_governance.sql` define the
same columns. The sink opens and decodes the Kafka records, calls these mappers and inserts the
rows column-wise, after dropping the rows of erased subjects (`rows_of_living_subjects`).

Rows are tuples of Python values as clickhouse-connect inserts them: `UUID` for UUID columns,
tz-aware UTC datetimes for DateTime64 columns, plain strings for enums, JSON text (canonical
encoding, see `projections.document.canonical_json`) for nested records.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final
from uuid import UUID

from projections.document import canonical_json
from schemas.alerts import Alert
from schemas.checkpoint import StateCheckpoint
from schemas.decisions import GateDecision, GateOutcome
from schemas.erasures import ErasureRecorded, ReadAudited

Row = tuple[Any, ...]

DECISION_ID_HEADER: Final = "uac-decision-id"
SOURCE_HEADER: Final = "uac-source"
DECIDED_AT_HEADER: Final = "uac-decided-at"
UNKNOWN_TENANT: Final = ""
"""`tenant_id` of a decision about a message whose tenant could not be read (a sort key, so
never NULL). Tenant-scoped queries never see these rows; operators read them directly."""

EVENT_COLUMNS: Final = (
    "tenant_id",
    "subject_id",
    "event_id",
    "type",
    "actor",
    "occurred_at",
    "recorded_at",
    "origin",
    "source_ref",
    "confidence",
    "sensitivity",
    "purpose",
    "scope",
    "valid_from",
    "valid_until",
    "supersedes",
    "payload",
    "decision_id",
    "decided_at",
    "source_topic",
    "source_partition",
    "source_offset",
    "accepted_partition",
    "accepted_offset",
    "ingested_at",
)
DECISION_COLUMNS: Final = (
    "tenant_id",
    "decision_id",
    "outcome",
    "reasons",
    "detail",
    "event_id",
    "subject_id",
    "actor",
    "event_type",
    "message_sha256",
    "source_topic",
    "source_partition",
    "source_offset",
    "decided_at",
    "ingested_at",
)
ALERT_COLUMNS: Final = (
    "tenant_id",
    "alert_id",
    "lifecycle_id",
    "subject_id",
    "rule_id",
    "rule_version",
    "status",
    "severity",
    "title",
    "detail",
    "cause",
    "evidence",
    "drug_allergy",
    "duplicate_therapy",
    "trigger_event_id",
    "occurred_at",
    "reason",
    "purpose",
    "source_topic",
    "source_partition",
    "source_offset",
    "ingested_at",
)
CHECKPOINT_COLUMNS: Final = (
    "tenant_id",
    "subject_id",
    "version",
    "state_hash",
    "last_event_id",
    "as_of",
    "erased",
    "state_json",
    "source_topic",
    "source_partition",
    "source_offset",
    "ingested_at",
)

AUDIT_COLUMNS: Final = (
    "audit_id",
    "tenant_id",
    "subject_ref",
    "actor",
    "purpose",
    "action",
    "detail",
    "read_at",
    "ingested_at",
)
RECEIPT_COLUMNS: Final = (
    "erasure_id",
    "tenant_id",
    "subject_ref",
    "requested_at",
    "recorded_at",
    "completed_at",
    "requested_by",
    "key_destroyed",
    "removed_rows",
    "verified",
)

EVENTS: Final = "events"
GATE_DECISIONS: Final = "gate_decisions"
ALERTS: Final = "alerts"
STATE_CHECKPOINTS: Final = "state_checkpoints"
AUDIT_READS: Final = "audit_reads"
ERASURES: Final = "erasures"
COLUMNS: Final[dict[str, tuple[str, ...]]] = {
    EVENTS: EVENT_COLUMNS,
    GATE_DECISIONS: DECISION_COLUMNS,
    ALERTS: ALERT_COLUMNS,
    STATE_CHECKPOINTS: CHECKPOINT_COLUMNS,
    AUDIT_READS: AUDIT_COLUMNS,
    ERASURES: RECEIPT_COLUMNS,
}
"""Every table UaC writes, with its columns in row order."""

SUBJECT_TABLES: Final = (EVENTS, GATE_DECISIONS, ALERTS, STATE_CHECKPOINTS)
"""The tables whose rows carry a subject id (`tenant_id`, `subject_id`): what an erasure deletes
from and what the sink filters against the erasure ledger. `audit_reads` and `erasures` name a
subject only by its `subject_ref` and are kept."""

ErasedCheck = Callable[[str, str], bool]
"""`erased(tenant_id, subject_id)`: whether the subject was erased."""


class RowMappingError(ValueError):
    """A record that decoded but cannot become a row (e.g. the worker's headers are missing)."""


@dataclass(frozen=True)
class Coordinates:
    """Where a record sits in Kafka."""

    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.topic}/{self.partition}/{self.offset}"


@dataclass(frozen=True)
class AcceptedHeaders:
    """What the worker attaches to each accepted event: its decision and the original record."""

    decision_id: UUID
    source: Coordinates
    decided_at: datetime


def parse_coordinates(text: str) -> Coordinates:
    """`topic/partition/offset` (topic names never contain `/`)."""
    parts = text.split("/")
    if len(parts) != 3 or not parts[0]:
        raise RowMappingError(f"{text!r} is not topic/partition/offset")
    topic, partition, offset = parts
    if not (partition.isdigit() and offset.isdigit()):
        raise RowMappingError(f"{text!r} has a non-numeric partition or offset")
    return Coordinates(topic, int(partition), int(offset))


def parse_utc(text: str) -> datetime:
    """An ISO 8601 time with an offset (`Z` included), as a UTC datetime."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError as error:
        raise RowMappingError(f"{text!r} is not an ISO 8601 time") from error
    if value.tzinfo is None:
        raise RowMappingError(f"{text!r} has no UTC offset")
    return value.astimezone(UTC)


def accepted_headers(headers: Iterable[tuple[str, bytes]]) -> AcceptedHeaders:
    """Read the worker's headers of an accepted event; `RowMappingError` if any is missing."""
    found = dict(headers)
    missing = [
        name for name in (DECISION_ID_HEADER, SOURCE_HEADER, DECIDED_AT_HEADER) if name not in found
    ]
    if missing:
        raise RowMappingError(f"accepted event without header(s) {', '.join(missing)}")
    try:
        text = {name: value.decode("utf-8") for name, value in found.items()}
        decision = UUID(text[DECISION_ID_HEADER])
    except (UnicodeDecodeError, ValueError) as error:
        raise RowMappingError(f"unreadable accepted-event headers: {error}") from error
    return AcceptedHeaders(
        decision_id=decision,
        source=parse_coordinates(text[SOURCE_HEADER]),
        decided_at=parse_utc(text[DECIDED_AT_HEADER]),
    )


def json_text(value: Any) -> str:
    """The canonical JSON text of a value (sorted keys, UTC millisecond times)."""
    return canonical_json(value).decode("utf-8")


def event_row(
    event: Mapping[str, Any], headers: AcceptedHeaders, at: Coordinates, ingested_at: datetime
) -> Row:
    """One `events` row from an accepted event's Avro record (`AvroCodec.decode_record`): the
    envelope as typed columns, the payload as canonical JSON (the JSON of the event model's
    payload: the record carries the same fields and values)."""
    return (
        event["tenant_id"],
        event["subject_id"],
        event["event_id"],
        event["type"],
        event["actor"],
        event["occurred_at"],
        event["recorded_at"],
        event["origin"],
        event["source_ref"],
        event["confidence"],
        event["sensitivity"],
        event["purpose"],
        event["scope"],
        event["valid_from"],
        event["valid_until"],
        event["supersedes"],
        json_text(event["payload"]),
        headers.decision_id,
        headers.decided_at,
        headers.source.topic,
        headers.source.partition,
        headers.source.offset,
        at.partition,
        at.offset,
        ingested_at,
    )


def accepted_decision_row(
    event: Mapping[str, Any], value: bytes, headers: AcceptedHeaders, ingested_at: datetime
) -> Row:
    """The `accepted` gate decision an accepted event (its Avro record) stands for (`value` is
    its framed bytes)."""
    return (
        event["tenant_id"],
        headers.decision_id,
        GateOutcome.ACCEPTED.value,
        [],
        "",
        str(event["event_id"]),
        event["subject_id"],
        event["actor"],
        event["type"],
        hashlib.sha256(value).hexdigest(),
        headers.source.topic,
        headers.source.partition,
        headers.source.offset,
        headers.decided_at,
        ingested_at,
    )


def accepted_rows(
    event: Mapping[str, Any],
    value: bytes,
    headers: Iterable[tuple[str, bytes]],
    at: Coordinates,
    ingested_at: datetime,
) -> tuple[Row, Row]:
    """An accepted event's `events` row and its `gate_decisions` row, from its Avro record
    (`AvroCodec.decode_record`; the sink does not build the event model: the worker validated
    the event before it wrote the record)."""
    parsed = accepted_headers(headers)
    return (
        event_row(event, parsed, at, ingested_at),
        accepted_decision_row(event, value, parsed, ingested_at),
    )


def decision_row(decision: GateDecision, ingested_at: datetime) -> Row:
    """One `gate_decisions` row from a quarantine record."""
    return (
        decision.tenant_id or UNKNOWN_TENANT,
        decision.decision_id,
        decision.outcome.value,
        list(decision.reasons),
        decision.detail,
        decision.event_id,
        decision.subject_id,
        decision.actor,
        decision.event_type,
        decision.message_sha256,
        decision.source_topic,
        decision.source_partition,
        decision.source_offset,
        decision.decided_at,
        ingested_at,
    )


def alert_row(alert: Alert, at: Coordinates, ingested_at: datetime) -> Row:
    """One `alerts` row per lifecycle record; evidence and finding kept as JSON text."""
    return (
        alert.tenant_id,
        alert.alert_id,
        alert.lifecycle_id,
        alert.subject_id,
        alert.rule_id,
        alert.rule_version,
        alert.status.value,
        alert.severity.value,
        alert.title,
        alert.detail,
        list(alert.cause),
        json_text(alert.evidence),
        None if alert.drug_allergy is None else json_text(alert.drug_allergy),
        None if alert.duplicate_therapy is None else json_text(alert.duplicate_therapy),
        alert.trigger_event_id,
        alert.occurred_at,
        alert.reason,
        alert.purpose,
        at.topic,
        at.partition,
        at.offset,
        ingested_at,
    )


def checkpoint_row(checkpoint: StateCheckpoint, at: Coordinates, ingested_at: datetime) -> Row:
    """One `state_checkpoints` row; `state_json` is kept exactly as the worker wrote it."""
    return (
        checkpoint.tenant_id,
        checkpoint.subject_id,
        checkpoint.version,
        checkpoint.state_hash,
        checkpoint.last_event_id,
        checkpoint.as_of,
        checkpoint.erased,
        checkpoint.state_json,
        at.topic,
        at.partition,
        at.offset,
        ingested_at,
    )


def audit_row(audit: ReadAudited, ingested_at: datetime) -> Row:
    """One `audit_reads` row from an audit record (it carries no personal data)."""
    return (
        audit.audit_id,
        audit.tenant_id,
        audit.subject_ref,
        audit.actor,
        audit.purpose,
        audit.action,
        audit.detail,
        audit.read_at,
        ingested_at,
    )


def receipt_row(
    entry: ErasureRecorded, removed: Mapping[str, int], completed_at: datetime, *, verified: bool
) -> Row:
    """The `erasures` receipt of a carried-out ledger entry: what was removed, no personal data."""
    return (
        entry.erasure_id,
        entry.tenant_id,
        entry.subject_ref,
        entry.requested_at,
        entry.recorded_at,
        completed_at,
        entry.requested_by,
        entry.key_destroyed,
        dict(removed),
        verified,
    )


def rows_of_living_subjects(table: str, rows: Sequence[Row], erased: ErasedCheck) -> list[Row]:
    """`rows` without those of erased subjects (rows that name no subject are kept)."""
    if table not in SUBJECT_TABLES:
        return list(rows)
    columns = COLUMNS[table]
    tenant_at, subject_at = columns.index("tenant_id"), columns.index("subject_id")
    return [
        row
        for row in rows
        if row[subject_at] is None or not erased(row[tenant_at], row[subject_at])
    ]
