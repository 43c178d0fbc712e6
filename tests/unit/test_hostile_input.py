"""Unusual but readable input through `uac replay --file`: what a producer sends in a spelling
the tests of each feature do not use, and what the user sees for it."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from streams.cli_app import app
from tests.factories import make_event

runner = CliRunner()


def _line(event_type: str, name: str, days: int = 0, **fields: Any) -> dict[str, Any]:
    payload = fields.pop("payload", None)
    event = make_event(event_type, name, at=timedelta(days=days), payload=payload)
    return event.model_dump(mode="json") | fields


def _replay(tmp_path: Path, lines: list[dict[str, Any]]) -> tuple[int, dict[str, Any], str]:
    path = tmp_path / "events.ndjson"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    result = runner.invoke(app, ["replay", "--file", str(path), "--json"])
    (subject,) = [json.loads(line) for line in result.stdout.splitlines() if line]
    return result.exit_code, subject, result.stderr


SPELLINGS = [
    pytest.param(str.upper, id="upper case"),
    pytest.param(lambda uuid: "{" + uuid + "}", id="braces"),
    pytest.param(lambda uuid: f"urn:uuid:{uuid}", id="urn:uuid: form"),
]


@pytest.mark.parametrize("spelled", SPELLINGS)
def test_given_a_correction_naming_its_claim_in_another_uuid_spelling_then_it_replaces_that_claim(
    tmp_path: Path, spelled: Callable[[str], str]
) -> None:
    allergy = _line("AllergyRecorded", "first")
    correction = _line(
        "AllergyRecorded",
        "corrected",
        days=1,
        payload={"substance": "sulfamethoxazole"},
        supersedes=spelled(allergy["event_id"]),
    )
    code, subject, stderr = _replay(tmp_path, [allergy, correction])
    assert (code, subject["rejected"]) == (0, []), stderr
    assert [a["substance"] for a in subject["state"]["allergies"]] == ["sulfamethoxazole"]


@pytest.mark.parametrize("spelled", SPELLINGS)
def test_given_a_retraction_naming_its_claim_in_another_uuid_spelling_then_the_claim_is_retracted(
    tmp_path: Path, spelled: Callable[[str], str]
) -> None:
    preference = _line("PreferenceStated", "diet")
    retraction = _line(
        "ClaimRetracted", "retract", days=1, payload={"claim_id": spelled(preference["event_id"])}
    )
    code, subject, stderr = _replay(tmp_path, [preference, retraction])
    assert (code, subject["rejected"]) == (0, []), stderr
    assert subject["state"]["preferences"] == {}


def test_given_an_override_naming_its_alert_in_upper_case_then_the_alert_is_overridden(
    tmp_path: Path,
) -> None:
    allergy = _line("AllergyRecorded", "penicillin")
    prescription = _line("MedicationPrescribed", "amoxicillin", days=1)
    _, raised, _ = _replay(tmp_path, [allergy, prescription])
    (alert,) = raised["alerts"]
    override = _line(
        "AlertAcknowledged",
        "override",
        days=2,
        payload={
            "alert_id": alert["alert_id"].upper(),
            "action": "overridden",
            "reason": "tolerated a course last year",
        },
    )
    code, subject, stderr = _replay(tmp_path, [allergy, prescription, override])
    assert code == 0, stderr
    assert [(a["alert_id"], a["status"]) for a in subject["alerts"]][-1] == (
        alert["alert_id"],
        "overridden",
    )


BLANK = [
    pytest.param(
        "AllergyRecorded", {"payload": {"substance": "   "}}, "payload.substance", id="substance"
    ),
    pytest.param("MedicationPrescribed", {"payload": {"drug": "\t "}}, "payload.drug", id="drug"),
    pytest.param(
        "AllergyRecorded",
        {"payload": {"codes": [{"system": "rxnorm", "code": " "}]}},
        "payload.codes.0.code",
        id="a code",
    ),
    pytest.param("PreferenceStated", {"purpose": "  "}, "purpose", id="purpose"),
    pytest.param(
        "AllergyRecorded",
        {"payload": {"substance": "\u200b"}},
        "payload.substance",
        id="substance of a zero-width space",
    ),
]


@pytest.mark.parametrize(("event_type", "fields", "path"), BLANK)
def test_given_required_text_of_spaces_only_then_the_event_is_refused_naming_the_field(
    tmp_path: Path, event_type: str, fields: dict[str, Any], path: str
) -> None:
    kept = _line("PreferenceStated", "kept")
    blank = _line(event_type, "blank", days=1, **fields)
    code, subject, _ = _replay(tmp_path, [kept, blank])
    assert code == 1
    (refused,) = subject["rejected"]
    assert refused["reasons"] == ["invalid_record"]
    assert f"{path} is blank" in refused["detail"]
    assert subject["state"]["version"] == 1
