"""Producers that prove who they are, on the real pipeline: once a tenant registers an actor's
public keys, the worker accepts that actor's events only from records signed with one of their
private keys (two while a key is rotated); an unsigned record or one signed with another key is
quarantined with its reason, and the actors without a key go on as before. A key revoked in the
tenants file of a running worker counts no more from then on."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from streams.settings import Settings
from tests.integration.harness import Pipeline, replace_tenants_file, wait_for

pytestmark = pytest.mark.integration
SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "events.ndjson"
SIGNING_ACTOR = "ehr-adapter"


def new_key(pipeline: Pipeline, path: Path) -> str:
    """A key pair made by `uac new-signing-key`; its public key as printed."""
    made = pipeline.uac("new-signing-key", str(path))
    assert made.returncode == 0, made.stderr
    return made.stdout.rsplit(": ", 1)[1].strip()


def tenants_with_keys(public_keys: list[str]) -> bytes:
    """The default tenants file, with clinic-a's `ehr-adapter` signing with `public_keys`."""
    tenants = json.loads(Settings().tenants_file.read_text(encoding="utf-8"))
    tenants["tenants"]["clinic-a"]["actor_keys"] = {SIGNING_ACTOR: public_keys}
    return json.dumps(tenants).encode()


def forged(name: str, directory: Path) -> tuple[Path, str]:
    """One of the sample's `ehr-adapter` events under a new id, as another producer might
    write it: the file and the id."""
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    row: dict[str, Any] = next(r for r in rows if r["actor"] == SIGNING_ACTOR)
    row["event_id"] = str(uuid.uuid4())
    path = directory / f"{name}.ndjson"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    return path, row["event_id"]


def test_given_an_actor_with_a_registered_key_then_only_its_signed_records_count(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    public_key = new_key(pipeline, tmp_path / "ehr-adapter.pem")
    successor = new_key(pipeline, tmp_path / "ehr-adapter-next.pem")
    new_key(pipeline, tmp_path / "someone-else.pem")
    again = pipeline.uac("new-signing-key", str(tmp_path / "ehr-adapter.pem"))
    assert again.returncode == 3
    assert "never overwritten" in again.stderr
    tenants = tmp_path / "t.json"
    tenants.write_bytes(tenants_with_keys([public_key, successor]))
    pipeline.settings["UAC_TENANTS_FILE"] = str(tenants)
    pipeline.settings["UAC_TENANTS_RELOAD_SECONDS"] = "0.5"
    worker = pipeline.start("worker")
    signed = pipeline.uac(
        "publish", str(SAMPLE), "--signing-key", str(tmp_path / "ehr-adapter.pem")
    )
    assert signed.returncode == 0, signed.stderr
    published = len(SAMPLE.read_text(encoding="utf-8").splitlines())
    wait_for(pipeline.accepted, lambda found: len(found) >= published, what="the signed sample")
    unsigned, unsigned_id = forged("unsigned", tmp_path)
    assert pipeline.uac("publish", str(unsigned)).returncode == 0
    other, other_id = forged("other-key", tmp_path)
    elsewhere = pipeline.uac(
        "publish", str(other), "--signing-key", str(tmp_path / "someone-else.pem")
    )
    assert elsewhere.returncode == 0, elsewhere.stderr
    rotated, rotated_id = forged("rotated-key", tmp_path)
    next_key = str(tmp_path / "ehr-adapter-next.pem")
    assert pipeline.uac("publish", str(rotated), "--signing-key", next_key).returncode == 0
    refused = wait_for(
        pipeline.quarantined,
        lambda found: {d.event_id for d in found} >= {unsigned_id, other_id},
        what="the forged records quarantined",
    )
    reasons = {d.event_id: d.reasons for d in refused}
    assert reasons[unsigned_id] == ("signature_missing",)
    assert reasons[other_id] == ("signature_invalid",)
    accepted = wait_for(
        pipeline.accepted,
        lambda found: rotated_id in {e.id for e in found},
        what="the record signed with the actor's second key",
    )
    assert len(accepted) == published + 1
    assert {e.actor for e in accepted} >= {SIGNING_ACTOR, "patient-app", "booking-service"}

    replace_tenants_file(worker, tenants, tenants_with_keys([successor]))
    retired, retired_id = forged("retired-key", tmp_path)
    old_key = str(tmp_path / "ehr-adapter.pem")
    assert pipeline.uac("publish", str(retired), "--signing-key", old_key).returncode == 0
    revoked = wait_for(
        pipeline.quarantined,
        lambda found: retired_id in {d.event_id for d in found},
        what="the record signed with the revoked key quarantined",
    )
    assert {d.event_id: d.reasons for d in revoked}[retired_id] == ("signature_invalid",)
