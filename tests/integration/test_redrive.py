"""Redrive on the real pipeline: events refused while an actor was missing from the tenants
file are sent through the gate again once it is added (the running worker reads the mended file
without a restart), and accepted, without being opened on the way; a second redrive doubles
nothing; a final reason is refused by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.settings import Settings
from tests.integration.harness import Pipeline, replace_tenants_file, wait_for

pytestmark = pytest.mark.integration
SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "events.ndjson"
MISSING_ACTOR = "patient-app"


def tenants_without(path: Path, actor: str) -> Path:
    """The default tenants file with `actor` left out of clinic-a's allow-list."""
    tenants = json.loads(Settings().tenants_file.read_text(encoding="utf-8"))
    allowed = tenants["tenants"]["clinic-a"]["actors"]
    tenants["tenants"]["clinic-a"]["actors"] = [name for name in allowed if name != actor]
    path.write_text(json.dumps(tenants), encoding="utf-8")
    return path


def redrive(pipeline: Pipeline, *args: str) -> dict[str, object]:
    done = pipeline.uac("redrive", "--tenant", "clinic-a", *args, "--json")
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report


def test_given_an_actor_added_after_its_events_were_refused_then_a_redrive_admits_them(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    missing = {r["event_id"] for r in rows if r["actor"] == MISSING_ACTOR}
    assert missing
    tenants = tenants_without(tmp_path / "t.json", MISSING_ACTOR)
    pipeline.settings["UAC_TENANTS_FILE"] = str(tenants)
    pipeline.settings["UAC_TENANTS_RELOAD_SECONDS"] = "0.5"
    worker = pipeline.start("worker")
    assert pipeline.uac("publish", str(SAMPLE)).returncode == 0
    refused = wait_for(
        pipeline.quarantined,
        lambda found: {d.event_id for d in found} >= missing,
        what="the missing actor's events refused",
    )
    reasons = {reason for d in refused for reason in d.reasons}
    assert {d.event_id for d in refused if "actor_not_allowed" in d.reasons} == missing
    final = pipeline.uac("redrive", "--tenant", "clinic-a", "--reason", "secret_in_text")
    assert final.returncode == 2
    assert "final, never redriven" in final.stderr
    mendable = [arg for reason in sorted(reasons) for arg in ("--reason", reason)]
    dry = redrive(pipeline, *mendable, "--dry-run")
    assert (dry["selected"], dry["sendable"], dry["sent"]) == (len(refused), len(refused), 0)
    told = pipeline.uac("redrive", "--tenant", "clinic-a", *mendable, "--dry-run")
    assert f"{len(refused)} would be sent again (dry run)" in told.stdout, told.stderr

    mended = Settings().tenants_file.read_bytes()
    replace_tenants_file(worker, tenants, mended)
    sent = redrive(pipeline, *mendable)
    assert sent["sent"] == len(refused)
    accepted = wait_for(
        pipeline.accepted,
        lambda found: len(found) >= len(rows),
        what="every sample event accepted after the redrive",
    )
    assert {e.id for e in accepted} == {r["event_id"] for r in rows}

    again = redrive(pipeline, *mendable)
    assert again["sent"] == len(refused)
    duplicates = wait_for(
        pipeline.quarantined,
        lambda found: sum("duplicate_event_id" in d.reasons for d in found) >= len(refused),
        what="the second redrive's copies refused as duplicates",
    )
    assert {d.event_id for d in duplicates if "duplicate_event_id" in d.reasons} == {
        d.event_id for d in refused
    }
    assert len(pipeline.accepted()) == len(rows)
    checked = pipeline.uac("check-log")
    assert checked.returncode == 0, checked.stdout
