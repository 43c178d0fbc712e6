"""Synthetic but realistic event histories for benchmarks: a mix of every claim kind, with a
share of late (out-of-order) arrivals and corrections so the slow paths are exercised too."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from uuid import UUID

from schemas.events import (
    AllergyRecorded,
    AllergyStatusChanged,
    ConsentChanged,
    Event,
    EventType,
    FactAsserted,
    MedicationPrescribed,
    MedicationStopped,
    Origin,
    Payload,
    PreferenceStated,
    TravelRecorded,
    VerificationStatus,
)

START = datetime(2020, 1, 1, tzinfo=UTC)
COUNTRIES = ("NL", "DE", "FR", "ES", "IT", "JP", "US", "GB")
DRUGS = ("amoxicillin", "ibuprofen", "metformin", "lisinopril", "atorvastatin", "omeprazole")


def subject_events(
    rng: random.Random,
    tenant: str,
    subject: str,
    count: int,
    first_id: int,
    late_share: float = 0.05,
) -> Iterator[Event]:
    """`count` events of one subject, roughly in valid-time order, `late_share` of them late."""
    for index in range(count):
        minute = index * 60 + rng.randrange(60)
        if rng.random() < late_share:
            minute = max(0, minute - rng.randrange(1, 50) * 60)
        occurred = START + timedelta(minutes=minute)
        yield _event(rng, tenant, subject, index, first_id + index, occurred)


def _event(
    rng: random.Random, tenant: str, subject: str, index: int, number: int, at: datetime
) -> Event:
    roll = rng.random()
    _, payload = _payload(rng, roll, index)
    origin = rng.choice((Origin.EXPLICIT_STATEMENT, Origin.USER_PROVIDED_FACT, Origin.INFERRED))
    return event_of(tenant, subject, number, at, payload, origin)


def event_of(
    tenant: str, subject: str, number: int, at: datetime, payload: Payload, origin: Origin
) -> Event:
    """Event number `number` (its id is that number as a UUID) of a subject, valid at `at`,
    recorded 30 s later."""
    return Event(
        event_id=str(UUID(int=number)),
        tenant_id=tenant,
        subject_id=subject,
        actor="ehr-adapter",
        type=EventType(type(payload).__name__),
        occurred_at=at,
        recorded_at=at + timedelta(seconds=30),
        origin=origin,
        confidence=0.9,
        payload=payload,
    )


def _payload(rng: random.Random, roll: float, index: int) -> tuple[EventType, Payload]:
    if roll < 0.30:
        day = date(2020, 1, 1) + timedelta(days=index % 1500)
        return EventType.TRAVEL_RECORDED, TravelRecorded(
            trip_id=f"trip-{index}",
            origin_country="NL",
            destination_country=rng.choice(COUNTRIES),
            departure_date=day,
        )
    if roll < 0.50:
        return EventType.PREFERENCE_STATED, PreferenceStated(
            key=f"pref-{rng.randrange(10)}", value=rng.choice(("a", "b", "c"))
        )
    if roll < 0.65:
        return EventType.FACT_ASSERTED, FactAsserted(
            key=f"fact-{rng.randrange(20)}", value=rng.randrange(5)
        )
    if roll < 0.75:
        return EventType.MEDICATION_PRESCRIBED, MedicationPrescribed(
            prescription_id=f"rx-{index}", drug=rng.choice(DRUGS)
        )
    if roll < 0.80:
        return EventType.MEDICATION_STOPPED, MedicationStopped(
            prescription_id=f"rx-{max(0, index - 3)}"
        )
    if roll < 0.87:
        return EventType.ALLERGY_RECORDED, AllergyRecorded(
            allergy_id=f"alg-{rng.randrange(3)}",
            substance=rng.choice(("penicillin", "peanut", "latex")),
        )
    if roll < 0.92:
        return EventType.ALLERGY_STATUS_CHANGED, AllergyStatusChanged(
            allergy_id=f"alg-{rng.randrange(3)}", verification_status=VerificationStatus.CONFIRMED
        )
    return EventType.CONSENT_CHANGED, ConsentChanged(
        purpose=rng.choice(("care", "research")), granted=rng.random() < 0.8, special_category=True
    )


def conflict_pair(number: int, at: datetime) -> tuple[Event, Event]:
    """A penicillin allergy and, a second later, an amoxicillin prescription: one alert."""
    subject = f"lat-{number}"

    def event(offset: int, event_type: EventType, payload: object, at: datetime) -> Event:
        return Event(
            event_id=str(UUID(int=10**12 + 2 * number + offset)),
            tenant_id="clinic-a",
            subject_id=subject,
            actor="ehr-adapter",
            type=event_type,
            occurred_at=at,
            recorded_at=at,
            origin=Origin.EXPLICIT_STATEMENT,
            confidence=1.0,
            payload=payload,
        )

    allergy = AllergyRecorded(allergy_id=f"alg-{number}", substance="penicillin")
    drug = MedicationPrescribed(prescription_id=f"rx-{number}", drug="amoxicillin")
    return (
        event(0, EventType.ALLERGY_RECORDED, allergy, at),
        event(1, EventType.MEDICATION_PRESCRIBED, drug, at + timedelta(seconds=1)),
    )
