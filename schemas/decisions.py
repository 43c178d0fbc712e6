"""The write gate's decision record (mirrors `avro/gate_decision.v1.avsc`)."""

from __future__ import annotations

from enum import StrEnum
from uuid import UUID

from pydantic import Field

from schemas.base import UtcMillis, WireModel


class GateOutcome(StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"


class GateDecision(WireModel):
    decision_id: UUID
    outcome: GateOutcome
    reasons: tuple[str, ...]
    detail: str
    event_id: str | None = None
    tenant_id: str | None = None
    subject_id: str | None = None
    actor: str | None = None
    event_type: str | None = None
    message_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    source_topic: str
    source_partition: int
    source_offset: int
    decided_at: UtcMillis
