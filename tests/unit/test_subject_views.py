"""`uac state` and `uac explain` show people tables, not JSON (that is `--json`): what the memory
holds that the purpose may use, with where each claim came from; an alert's lifecycle, evidence
and the log coordinates of its events."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from rich.console import RenderableType

from projections.document import state_hash
from projections.gate import TenantPolicy
from projections.reads import readable_document, readable_document_as_of
from projections.state import replay
from streams.console_text import DataConsole
from streams.explanation_view import explanation_view
from streams.state_view import state_view
from tests.factories import T0, make_event

CLINIC = TenantPolicy(frozenset({"ehr-adapter"}), frozenset({"care"}))
DAY = timedelta(days=1)
HISTORY = [
    make_event(
        "AllergyRecorded",
        "allergy",
        purpose="care",
        payload={"criticality": "high", "reactions": [{"manifestation": "Anaphylaxis"}]},
    ),
    make_event("MedicationPrescribed", "rx", at=DAY, purpose="care", payload={"dose": "500 mg"}),
    make_event("MedicationStopped", "stop", at=2 * DAY, purpose="care"),
    make_event("PreferenceStated", "seat", at=3 * DAY, purpose="personalization"),
    make_event("FactAsserted", "home", at=4 * DAY, purpose="care"),
]


def _shown(view: RenderableType, width: int = 120) -> str:
    console = DataConsole()
    console.width = width
    with console.capture() as captured:
        console.print(view)
    return captured.get()


def _document(purpose: str = "care") -> dict[str, Any]:
    state = replay(HISTORY)
    document = readable_document(state, purpose, CLINIC, read_at=T0 + 10 * DAY)
    return document | {"state_hash": state_hash(state)}


def test_given_a_subject_then_its_claims_are_tables_with_their_origin() -> None:
    shown = _shown(state_view(_document()))
    assert "clinic-a:patient-1  version 5" in shown
    assert "read for purpose care: 1 item(s) withheld" in shown
    assert f"state_hash {_document()['state_hash']}" in shown
    assert "│ penicillin │ active, confirmed │ high" in shown
    assert "Anaphylaxis" in shown
    assert "│ stopped  │ amoxicillin │ 500 mg      │ explicit_statement 2024-01-02" in shown
    assert "│ home_country │ NL    │ explicit_statement 2024-01-05" in shown
    assert (
        "nothing to show for this read: trips, preferences, open conflicts, consents, acknowledgements"
        in shown
    )
    assert "{" not in shown


def test_given_a_purpose_that_may_use_less_then_the_view_shows_less() -> None:
    shown = _shown(state_view(_document("personalization")))
    assert "│ diet │ vegetarian │" in shown
    assert "penicillin" not in shown
    assert "amoxicillin" not in shown


def test_given_a_past_time_then_the_heading_says_so() -> None:
    state = replay(HISTORY)
    document = readable_document_as_of(
        state, T0 + DAY + DAY / 2, T0 + 10 * DAY, None, "care", CLINIC
    )
    shown = _shown(state_view(document | {"state_hash": state_hash(state)}))
    assert "as it stood at 2024-01-02 21:00:00 UTC" in shown
    assert "│ active   │ amoxicillin │" in shown


CHAIN: dict[str, Any] = {
    "alert_id": "12287e40-eeb9-574a-a50b-3bccddcf12dc",
    "tenant_id": "clinic-a",
    "subject_id": "p-1001",
    "purpose": "care",
    "rule": {"id": "drug-allergy-conflict", "version": 2},
    "cause": ["allergy-1", "rx-1"],
    "lifecycle": [
        {
            "lifecycle_id": "l-1",
            "status": "raised",
            "severity": "critical",
            "occurred_at": "2024-11-12T14:02:00.000Z",
            "trigger_event_id": "e-rx",
            "reason": None,
        },
        {
            "lifecycle_id": "l-2",
            "status": "resolved",
            "severity": "critical",
            "occurred_at": "2024-11-20T06:00:00.000Z",
            "trigger_event_id": "e-stop",
            "reason": "stopped",
        },
    ],
    "evidence": [
        {"event_id": "e-allergy", "claim_id": "allergy-1", "role": "allergy", "description": "x"},
    ],
    "events": [
        {
            "event_id": "e-rx",
            "type": "MedicationPrescribed",
            "origin": "explicit_statement",
            "source_ref": "fhir:MedicationRequest/rx-5501",
            "occurred_at": "2024-11-12T14:02:00.000Z",
            "events_topic": {"topic": "uac.events", "partition": 2, "offset": 17},
            "accepted_topic": {"topic": "uac.events.accepted", "partition": 2, "offset": 9},
            "roles": ["medication", "trigger"],
        }
    ],
    "missing_event_ids": ["e-allergy"],
}


def test_given_an_alert_then_its_chain_is_tables_down_to_log_coordinates() -> None:
    shown = _shown(explanation_view(CHAIN), width=80)
    assert "alert 12287e40-eeb9-574a-a50b-3bccddcf12dc" in shown
    assert "subject clinic-a:p-1001; purpose care" in shown
    assert "rule drug-allergy-conflict v2; cause: allergy-1, rx-1" in shown
    assert (
        "resolved     critical 2024-11-20 06:00:00  reason: stopped\n  triggered by e-stop" in shown
    )
    assert "│ allergy │ allergy-1 │ x           │" in shown
    assert "e-rx  MedicationPrescribed  (medication, trigger)" in shown
    assert "origin          explicit_statement (fhir:MedicationRequest/rx-5501)" in shown
    assert "events topic    uac.events/2/17" in shown
    assert "accepted topic  uac.events.accepted/2/9" in shown
    assert "events the alert names that the history does not hold: e-allergy" in shown
