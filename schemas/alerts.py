"""The alert contract consumers subscribe to (mirrors `avro/alert.v3.avsc`; v1 records, without
`duplicate_therapy`, read with it null; v1 and v2 records, without `purpose`, read as `care`)."""

from __future__ import annotations

from enum import StrEnum
from uuid import UUID

from pydantic import Field

from schemas.base import UtcMillis, WireModel
from schemas.events import subject_key
from schemas.severity import Severity

ALERT_DEFAULT_PURPOSE = "care"
"""The purpose of an alert record written before alerts carried one (Avro default, v3)."""


class AlertStatus(StrEnum):
    RAISED = "raised"
    RESOLVED = "resolved"
    ACKNOWLEDGED = "acknowledged"
    OVERRIDDEN = "overridden"


class Evidence(WireModel):
    event_id: str
    claim_id: str
    role: str
    description: str


class DrugAllergyFinding(WireModel):
    allergy_id: str
    allergen: str
    prescription_id: str
    drug: str
    ingredients: tuple[str, ...]
    matched: tuple[str, ...]
    level: str
    reason: str
    source: str
    knowledge_version: str


class DuplicateTherapyFinding(WireModel):
    prescription_ids: tuple[str, ...]
    drugs: tuple[str, ...]
    shared_by: str
    shared: tuple[str, ...]
    knowledge_version: str


class Alert(WireModel):
    lifecycle_id: UUID
    alert_id: UUID
    tenant_id: str
    subject_id: str
    rule_id: str
    rule_version: int = Field(ge=1)
    status: AlertStatus
    severity: Severity
    title: str
    detail: str
    cause: tuple[str, ...]
    evidence: tuple[Evidence, ...]
    drug_allergy: DrugAllergyFinding | None = None
    trigger_event_id: str
    occurred_at: UtcMillis
    reason: str | None = None
    duplicate_therapy: DuplicateTherapyFinding | None = None
    purpose: str = Field(default=ALERT_DEFAULT_PURPOSE, min_length=1)

    @property
    def key(self) -> str:
        """The Kafka message key of the subject's records: `tenant_id:subject_id`."""
        return subject_key(self.tenant_id, self.subject_id)
