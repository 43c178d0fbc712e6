"""The state checkpoint record (mirrors `avro/state_checkpoint.v1.avsc`)."""

from __future__ import annotations

from pydantic import Field

from schemas.base import UtcMillis, WireModel


class StateCheckpoint(WireModel):
    tenant_id: str
    subject_id: str
    version: int = Field(ge=0)
    state_hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    last_event_id: str | None = None
    as_of: UtcMillis | None = None
    erased: bool
    state_json: str
