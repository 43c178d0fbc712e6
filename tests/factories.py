"""Builders for events in tests: sensible defaults, every field overridable."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any
from uuid import NAMESPACE_URL, uuid5

from schemas.events import Event

T0 = datetime(2024, 1, 1, 9, 0, tzinfo=UTC)
_PAYLOAD_DEFAULTS: dict[str, dict[str, Any]] = {
    "AllergyRecorded": {
        "allergy_id": "allergy-1",
        "substance": "penicillin",
        "codes": [],
        "categories": ["medication"],
        "verification_status": "confirmed",
        "clinical_status": "active",
        "negated": False,
        "reactions": [],
    },
    "MedicationPrescribed": {"prescription_id": "rx-1", "drug": "amoxicillin", "codes": []},
    "MedicationStopped": {"prescription_id": "rx-1"},
    "TravelRecorded": {
        "trip_id": "trip-1",
        "origin_country": "NL",
        "destination_country": "FR",
        "departure_date": date(2024, 5, 1),
    },
    "PreferenceStated": {"key": "diet", "value": "vegetarian"},
    "FactAsserted": {"key": "home_country", "value": "NL"},
    "ConsentChanged": {"purpose": "care", "granted": True, "special_category": True},
    "ErasureRequested": {},
}


def event_id(name: str) -> str:
    """A stable UUID per test-chosen name, so tests can refer to events by name."""
    return str(uuid5(NAMESPACE_URL, f"test-event/{name}"))


def make_event(
    event_type: str,
    name: str,
    *,
    at: datetime | timedelta = T0,
    recorded: datetime | None = None,
    tenant: str = "clinic-a",
    subject: str = "patient-1",
    payload: dict[str, Any] | None = None,
    **envelope: Any,
) -> Event:
    occurred = T0 + at if isinstance(at, timedelta) else at
    return Event.model_validate(
        {
            "event_id": event_id(name),
            "tenant_id": tenant,
            "subject_id": subject,
            "actor": "ehr-adapter",
            "type": event_type,
            "occurred_at": occurred,
            "recorded_at": recorded or occurred,
            "origin": "explicit_statement",
            "confidence": 1.0,
            "payload": {**_PAYLOAD_DEFAULTS.get(event_type, {}), **(payload or {})},
        }
        | envelope
    )
