"""The sink's record mapping: each consumed record opened (if sealed), decoded and mapped to
the rows of its tables (`streams.rows`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from schemas.codec import (
    alert_codec,
    checkpoint_codec,
    decision_codec,
    event_codec,
    read_audit_codec,
)
from schemas.events import subject_key
from streams.rows import (
    ALERTS,
    AUDIT_READS,
    EVENTS,
    GATE_DECISIONS,
    STATE_CHECKPOINTS,
    Coordinates,
    Row,
    RowMappingError,
    accepted_rows,
    alert_row,
    audit_row,
    checkpoint_row,
    decision_row,
)
from streams.sealing import Sealer
from streams.topics import Topics


@dataclass(frozen=True)
class Received:
    """One consumed record, as the row mappers need it."""

    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    at: Coordinates
    ingested_at: datetime


class RecordRows:
    """Opens (sealed values), decodes and maps the records of each row topic to table rows."""

    def __init__(self, topics: Topics, sealer: Sealer) -> None:
        self._sealer = sealer
        self._events = event_codec()
        self._decisions = decision_codec()
        self._alerts = alert_codec()
        self._checkpoints = checkpoint_codec()
        self._audits = read_audit_codec()
        self._by_topic: dict[str, Callable[[Received], list[tuple[str, Row]]]] = {
            topics.accepted: self._accepted,
            topics.quarantine: self._quarantined,
            topics.alerts: self._alert,
            topics.state: self._checkpoint,
            topics.audit: self._audit,
        }

    @property
    def topics(self) -> list[str]:
        return list(self._by_topic)

    def rows(self, topic: str, received: Received) -> list[tuple[str, Row]]:
        """The rows of one record. Raises SubjectErased if its subject's key was destroyed,
        anything else if it does not open, decode or map."""
        return self._by_topic[topic](received)

    def _opened(self, received: Received) -> tuple[str | None, bytes]:
        """(the subject it is sealed for, or None if unsealed; the framed record)."""
        return self._sealer.open(received.value)

    def _accepted(self, received: Received) -> list[tuple[str, Row]]:
        sealed_for, framed = self._opened(received)
        event = self._events.decode_record(framed)
        require_sealed_for(sealed_for, subject_key(event["tenant_id"], event["subject_id"]))
        event_row, decision = accepted_rows(
            event, received.value, received.headers, received.at, received.ingested_at
        )
        return [(EVENTS, event_row), (GATE_DECISIONS, decision)]

    def _quarantined(self, received: Received) -> list[tuple[str, Row]]:
        decision = self._decisions.decode(self._opened(received)[1])
        return [(GATE_DECISIONS, decision_row(decision, received.ingested_at))]

    def _alert(self, received: Received) -> list[tuple[str, Row]]:
        sealed_for, framed = self._opened(received)
        alert = self._alerts.decode(framed)
        require_sealed_for(sealed_for, subject_key(alert.tenant_id, alert.subject_id))
        return [(ALERTS, alert_row(alert, received.at, received.ingested_at))]

    def _checkpoint(self, received: Received) -> list[tuple[str, Row]]:
        sealed_for, framed = self._opened(received)
        checkpoint = self._checkpoints.decode(framed)
        require_sealed_for(sealed_for, subject_key(checkpoint.tenant_id, checkpoint.subject_id))
        return [(STATE_CHECKPOINTS, checkpoint_row(checkpoint, received.at, received.ingested_at))]

    def _audit(self, received: Received) -> list[tuple[str, Row]]:
        audit = self._audits.decode(self._opened(received)[1])
        return [(AUDIT_READS, audit_row(audit, received.ingested_at))]


def require_sealed_for(sealed_for: str | None, subject: str) -> None:
    """A sealed record must be sealed for the subject it names (the key is the subject's)."""
    if sealed_for is not None and sealed_for != subject:
        raise RowMappingError("the record is sealed for another subject than the one it names")
