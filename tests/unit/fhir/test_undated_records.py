"""A FHIR record with no time of its own, outside a Bundle with one, is dated when its file was
last written: importing the same file again gives the same events, and `uac replay` the same
output, however much later it runs."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from streams.cli_app import app
from streams.fhir_files import files_written_at, read_fhir_files

runner = CliRunner()
WRITTEN = datetime(2026, 3, 4, 5, 6, 7, 891_000, tzinfo=UTC)
ALLERGY = {
    "resourceType": "AllergyIntolerance",
    "id": "undated-penicillin",
    "clinicalStatus": {"coding": [{"code": "active"}]},
    "verificationStatus": {"coding": [{"code": "confirmed"}]},
    "code": {"text": "penicillin"},
    "patient": {"reference": "Patient/p-undated"},
}
ORDER = {
    "resourceType": "MedicationRequest",
    "id": "undated-amoxicillin",
    "status": "active",
    "intent": "order",
    "medicationCodeableConcept": {"text": "amoxicillin 500 mg"},
    "subject": {"reference": "Patient/p-undated"},
}


def _written(path: Path, resource: dict[str, Any], at: datetime) -> Path:
    path.write_text(json.dumps(resource), encoding="utf-8")
    os.utime(path, ns=(int(at.timestamp() * 1e9),) * 2)
    return path


def _event_ids_and_times(paths: list[Path], now: datetime) -> list[tuple[str, datetime]]:
    files = read_fhir_files(
        paths,
        tenant_id="clinic-a",
        actor="fhir-import",
        fallback_time=files_written_at(paths, now),
    )
    return [(item.event.event_id, item.event.occurred_at) for item in files.submitted]


def test_an_undated_record_is_dated_when_its_newest_file_was_written(tmp_path: Path) -> None:
    allergy = _written(tmp_path / "allergy.json", ALLERGY, WRITTEN - timedelta(days=2))
    order = _written(tmp_path / "order.json", ORDER, WRITTEN)

    found = _event_ids_and_times([allergy, order], now=WRITTEN + timedelta(days=30))

    assert [when for _, when in found] == [WRITTEN, WRITTEN]


def test_importing_the_same_files_later_gives_the_same_events(tmp_path: Path) -> None:
    paths = [
        _written(tmp_path / "allergy.json", ALLERGY, WRITTEN),
        _written(tmp_path / "order.json", ORDER, WRITTEN),
    ]

    first = _event_ids_and_times(paths, now=WRITTEN + timedelta(hours=1))
    later = _event_ids_and_times(paths, now=WRITTEN + timedelta(days=400))

    assert first == later


def test_an_edited_file_is_a_new_version_with_new_event_ids(tmp_path: Path) -> None:
    path = _written(tmp_path / "allergy.json", ALLERGY, WRITTEN)
    before = _event_ids_and_times([path], now=WRITTEN + timedelta(days=1))
    refuted = {**ALLERGY, "verificationStatus": {"coding": [{"code": "refuted"}]}}
    _written(path, refuted, WRITTEN + timedelta(hours=5))

    after = _event_ids_and_times([path], now=WRITTEN + timedelta(days=1))

    assert after[0][0] != before[0][0]
    assert after[0][1] == WRITTEN + timedelta(hours=5)


def test_a_file_written_in_the_future_is_dated_now(tmp_path: Path) -> None:
    """A clock set wrong where the file was written never dates a record in the future (the
    gate would refuse it)."""
    path = _written(tmp_path / "allergy.json", ALLERGY, WRITTEN + timedelta(days=3))

    assert files_written_at([path], now=WRITTEN) == WRITTEN


def test_replaying_undated_records_twice_prints_the_same_state_and_alert(tmp_path: Path) -> None:
    paths = [
        str(_written(tmp_path / "allergy.json", ALLERGY, WRITTEN)),
        str(_written(tmp_path / "order.json", ORDER, WRITTEN)),
    ]

    runs = [runner.invoke(app, ["replay", "--format", "fhir", *paths, "--json"]) for _ in range(2)]

    assert [run.exit_code for run in runs] == [0, 0]
    first, second = (json.loads(run.stdout) for run in runs)
    assert first["state_hash"] == second["state_hash"]
    assert [alert["alert_id"] for alert in first["alerts"]] == [
        alert["alert_id"] for alert in second["alerts"]
    ]
    assert first["alerts"][0]["severity"] == "critical"
