"""`uac export`: everything UaC holds about one subject, structured and machine-readable.

Formats (see docs/data-subject.md):
- json: one `export.json` with `state` (the readable state document and its `state_hash`),
  `claims` (every folded event with its provenance: origin, source_ref, confidence, purpose,
  valid times, the supersedes chain and what became of it), `alerts` (every lifecycle record)
  and `erasure_receipts`;
- csv: `claims.csv`, `alerts.csv`, `erasure_receipts.csv` (nested values as JSON text) and
  `state.json`.
Re-reading `claims` and folding them gives the exported `state_hash` (checked by the tests).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from projections.document import event_document, plain, state_document, state_hash
from projections.queries import claim_history, events_in_order
from projections.reads import consents_with_windows
from projections.state import Kind, UserState, claim_address
from schemas.alerts import Alert
from schemas.erasures import subject_ref
from schemas.events import ClaimRetracted, Event
from streams.json_out import json_line
from streams.private_files import private_directory, write_private
from streams.query_clients import open_query_client
from streams.settings import Settings

EXPORT_VERSION = 1
SUBJECT_ACCESS = "subject_access"
CLAIM_COLUMNS = (
    "event_id",
    "type",
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
    "corrected_by",
    "retracted_by",
    "status",
    "payload",
)
ALERT_COLUMNS = (
    "alert_id",
    "lifecycle_id",
    "status",
    "severity",
    "rule_id",
    "rule_version",
    "title",
    "detail",
    "cause",
    "trigger_event_id",
    "occurred_at",
    "reason",
    "drug_allergy",
    "duplicate_therapy",
    "evidence",
    "purpose",
)


def _fates(state: UserState) -> dict[str, str]:
    """What became of each preference/fact statement (current, superseded, corrected...)."""
    fates: dict[str, str] = {}
    for kind in (Kind.PREFERENCE, Kind.FACT):
        for key in state.timelines(kind):
            for entry in claim_history(state, kind, key, moment=state.as_of):
                fates[entry.event.id] = entry.status
    return fates


def claim_rows(state: UserState) -> list[dict[str, Any]]:
    events = list(events_in_order(state))
    corrected_by = {e.supersedes: e.id for e in events if e.supersedes}
    retracted_by = {
        e.payload.claim_id: e.id for e in events if isinstance(e.payload, ClaimRetracted)
    }
    fates = _fates(state)
    return [
        {
            **{
                name: value
                for name, value in event_document(event).items()
                if name in CLAIM_COLUMNS
            },
            "corrected_by": corrected_by.get(event.id),
            "retracted_by": retracted_by.get(event.id),
            "status": fates.get(event.id, _default_fate(event, retracted_by)),
            "event": event_document(event),
        }
        for event in events
    ]


def _default_fate(event: Event, retracted_by: dict[str, str]) -> str:
    if event.id in retracted_by:
        return "retracted"
    return "recorded" if claim_address(event) is not None else "applied"


def export_document(
    state: UserState,
    alerts: Sequence[Alert],
    receipts: Sequence[dict[str, Any]],
    exported_at: datetime,
) -> dict[str, Any]:
    """The whole export; each consent of `state` names its validity window and whether it was
    in force at `exported_at`."""
    document = state_document(state)
    document["consents"] = consents_with_windows(state, document["consents"], exported_at)
    return {
        "export_version": EXPORT_VERSION,
        "tenant_id": state.tenant_id,
        "subject_id": state.subject_id,
        "exported_at": plain(exported_at),
        "state": document,
        "state_hash": state_hash(state),
        "claims": claim_rows(state),
        "alerts": [plain(alert) for alert in alerts],
        "erasure_receipts": list(receipts),
    }


def write_json(document: dict[str, Any], directory: Path) -> list[Path]:
    """`DIR/export.json`. Like every export file it holds health data: it is written readable
    by its owner only (and a directory the export creates, likewise)."""
    path = private_directory(directory) / "export.json"
    write_private(path, _json_text(document))
    return [path]


def _json_text(document: dict[str, Any]) -> bytes:
    return json.dumps(document, ensure_ascii=False, indent=2, sort_keys=True).encode("utf-8")


def _cell(value: Any) -> Any:
    """A CSV cell as the JSON export spells it: a nested value as JSON, a boolean as `true` or
    `false` (not Python's `True`)."""
    return json_line(value) if isinstance(value, dict | list | bool) else value


def _write_csv(path: Path, columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> Path:
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=list(columns), extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({column: _cell(row.get(column)) for column in columns})
    write_private(path, text.getvalue().encode("utf-8"))
    return path


def write_csv(document: dict[str, Any], directory: Path) -> list[Path]:
    state_path = private_directory(directory) / "state.json"
    summary = {
        key: document[key]
        for key in (
            "export_version",
            "tenant_id",
            "subject_id",
            "exported_at",
            "state",
            "state_hash",
        )
    }
    write_private(state_path, _json_text(summary))
    receipts = document["erasure_receipts"]
    receipt_columns = sorted({name for receipt in receipts for name in receipt}) or ["erasure_id"]
    return [
        state_path,
        _write_csv(directory / "claims.csv", CLAIM_COLUMNS, document["claims"]),
        _write_csv(directory / "alerts.csv", ALERT_COLUMNS, document["alerts"]),
        _write_csv(directory / "erasure_receipts.csv", receipt_columns, receipts),
    ]


def erasure_receipts(
    settings: Settings, tenant: str, subject: str, actor: str
) -> list[dict[str, Any]]:
    """Receipts of erasures of this subject, from ClickHouse (none if it was never erased),
    read as `actor` for the purpose `subject_access`. The analyst layer takes no parameters of
    its own, so the reference (64 hex digits by construction, never user text) is a literal."""
    ref = subject_ref(tenant, subject)
    sql = f"SELECT * FROM erasures WHERE subject_ref = '{ref}' ORDER BY completed_at"  # noqa: S608
    with open_query_client(settings) as client:
        result = client.query(sql, tenant, SUBJECT_ACCESS, actor=actor)
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]
