"""A data-subject export is complete and re-readable: folding its claims gives its state."""

from __future__ import annotations

import csv
import json
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from projections.document import state_hash
from projections.state import UserState, replay
from rules.engine import default_rules, evaluate
from schemas.alerts import Alert
from schemas.events import Event
from streams.export import export_document, write_csv, write_json
from tests.factories import make_event
from tests.fakes import TableKnowledge

DAY = timedelta(days=1)
EXPORTED_AT = datetime(2026, 11, 30, tzinfo=UTC)


def history() -> list[Event]:
    first = make_event(
        "PreferenceStated", "diet-1", payload={"value": "vegetarian"}, source_ref="chat:1"
    )
    correction = make_event(
        "PreferenceStated", "diet-2", at=DAY, supersedes=first.id, payload={"value": "vegan"}
    )
    later = make_event(
        "PreferenceStated", "diet-3", at=40 * DAY, payload={"value": "omnivore"}, origin="inferred"
    )
    wrong = make_event(
        "FactAsserted", "blood", at=2 * DAY, payload={"key": "blood_type", "value": "A+"}
    )
    retraction = make_event("ClaimRetracted", "retract", at=3 * DAY, payload={"claim_id": wrong.id})
    allergy = make_event("AllergyRecorded", "allergy", at=4 * DAY)
    drug = make_event("MedicationPrescribed", "rx", at=5 * DAY, payload={"drug": "amoxicillin"})
    return [first, correction, later, wrong, retraction, allergy, drug]


def exported(tmp_path: Path) -> dict[str, Any]:
    events = history()
    rules = default_rules(TableKnowledge())
    state, alerts = replay(events[:1]), []
    for event in events[1:]:
        after = replay([event], state)
        alerts += evaluate(rules, state, after, event)
        state = after
    return exported_document(state, alerts, tmp_path)


def exported_document(state: UserState, alerts: list[Alert], tmp_path: Path) -> dict[str, Any]:
    write_json(export_document(state, alerts, [], EXPORTED_AT), tmp_path)
    document: dict[str, Any] = json.loads((tmp_path / "export.json").read_text(encoding="utf-8"))
    return document


def test_given_an_export_when_its_claims_are_folded_again_then_the_same_state_hash(
    tmp_path: Path,
) -> None:
    document = exported(tmp_path)
    rebuilt = replay([Event.model_validate(claim["event"]) for claim in document["claims"]])
    assert state_hash(rebuilt) == document["state_hash"]
    assert document["state"]["version"] == len(document["claims"]) == len(history())


def test_given_consents_then_the_export_names_each_window_and_whether_it_held_at_export(
    tmp_path: Path,
) -> None:
    """A consent that expired still reads granted: its window says it no longer counts."""
    windows: list[tuple[str, timedelta, dict[str, Any]]] = [
        ("research", DAY, {"valid_until": EXPORTED_AT - DAY}),
        ("care", 2 * DAY, {}),
        ("marketing", 3 * DAY, {"valid_from": EXPORTED_AT + DAY}),
    ]
    consenting = [
        make_event(
            "ConsentChanged",
            purpose,
            at=at,
            payload={"purpose": purpose, "granted": True, "special_category": True},
            **window,
        )
        for purpose, at, window in windows
    ]
    consents = exported_document(replay(consenting), [], tmp_path)["state"]["consents"]
    assert {purpose: consent["in_force"] for purpose, consent in consents.items()} == {
        "research": False,
        "care": True,
        "marketing": False,
    }
    assert consents["research"]["valid_until"] == "2026-11-29T00:00:00.000Z"
    assert consents["marketing"]["valid_from"] == "2026-12-01T00:00:00.000Z"
    assert consents["care"]["granted"] is True
    assert (consents["care"]["valid_from"], consents["care"]["valid_until"]) == (None, None)


def test_given_corrections_and_retractions_then_the_export_says_what_became_of_each_claim(
    tmp_path: Path,
) -> None:
    claims = {claim["event_id"]: claim for claim in exported(tmp_path)["claims"]}
    first, correction, later, wrong, *_ = history()
    assert claims[first.id]["status"] == "corrected"
    assert claims[first.id]["corrected_by"] == correction.id
    assert claims[correction.id]["status"] == "current"
    assert claims[later.id]["status"] == "not_adopted"
    assert claims[wrong.id]["retracted_by"] is not None
    assert claims[first.id]["source_ref"] == "chat:1"
    assert {"origin", "confidence", "purpose", "valid_from", "valid_until", "supersedes"} <= claims[
        first.id
    ].keys()


def test_given_alerts_then_their_lifecycle_is_exported(tmp_path: Path) -> None:
    alerts = exported(tmp_path)["alerts"]
    assert [(a["rule_id"], a["status"]) for a in alerts] == [("drug-allergy-conflict", "raised")]


def test_given_csv_then_one_row_per_claim_and_alert_and_the_state_alongside(tmp_path: Path) -> None:
    document = exported(tmp_path / "json")
    written = write_csv(document, tmp_path / "csv")
    assert sorted(path.name for path in written) == [
        "alerts.csv",
        "claims.csv",
        "erasure_receipts.csv",
        "state.json",
    ]
    with (tmp_path / "csv" / "claims.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["event_id"] for row in rows] == [claim["event_id"] for claim in document["claims"]]
    assert json.loads(rows[0]["payload"]) == document["claims"][0]["payload"]


def test_given_csv_then_booleans_are_spelled_as_in_the_json_export(tmp_path: Path) -> None:
    document = exported(tmp_path / "json") | {
        "erasure_receipts": [{"erasure_id": "e-1", "key_destroyed": True, "verified": False}]
    }
    write_csv(document, tmp_path / "csv")
    with (tmp_path / "csv" / "erasure_receipts.csv").open(encoding="utf-8") as handle:
        (row,) = list(csv.DictReader(handle))
    assert (row["key_destroyed"], row["verified"]) == ("true", "false")


def test_given_an_export_then_only_its_owner_may_read_its_files(tmp_path: Path) -> None:
    """An export holds health data: its files (json and csv) and a directory it creates are
    owner-only, whatever the umask."""
    document = exported(tmp_path / "json")
    written = [*write_csv(document, tmp_path / "new" / "csv"), tmp_path / "json" / "export.json"]
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in written}
    assert modes == dict.fromkeys(
        ["alerts.csv", "claims.csv", "erasure_receipts.csv", "state.json", "export.json"], 0o600
    )
    for directory in (tmp_path / "new", tmp_path / "new" / "csv", tmp_path / "json"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
