"""Governance records: the erasure ledger entry, the audit of reads, and the subject reference
both use instead of the subject id."""

from __future__ import annotations

import hashlib
from uuid import UUID

from pydantic import Field

from schemas.base import UtcMillis, WireModel
from schemas.events import subject_key


def subject_ref(tenant_id: str, subject_id: str) -> str:
    """The name the ledger and erasure receipts use for a subject: sha256 of `tenant:subject`.
    Whoever knows the subject id can find its entry; the ledger alone reveals nothing."""
    return hashlib.sha256(subject_key(tenant_id, subject_id).encode("utf-8")).hexdigest()


def ref_of_key(key: str) -> str:
    """`subject_ref` of a `tenant:subject` message key."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class ErasureRecorded(WireModel):
    erasure_id: str
    tenant_id: str
    subject_ref: str = Field(pattern=r"^[0-9a-f]{64}$")
    requested_at: UtcMillis
    recorded_at: UtcMillis
    requested_by: str
    key_destroyed: bool


class ReadAudited(WireModel):
    """A read of personal data (mirrors `avro/read_audit.v1.avsc`); never carries the data."""

    audit_id: UUID
    tenant_id: str
    subject_ref: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    actor: str
    purpose: str
    action: str
    detail: str
    read_at: UtcMillis
