"""Hypothesis strategies for events, built from the wire models' own vocabularies."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from schemas.events import (
    AllergyCategory,
    AllergyType,
    ClinicalStatus,
    Criticality,
    Event,
    Origin,
    ReactionSeverity,
    Sensitivity,
    VerificationStatus,
)

EPOCH = datetime(2023, 1, 1, tzinfo=UTC)
ALLERGY_IDS = ("alg-1", "alg-2")
PRESCRIPTION_IDS = ("rx-1", "rx-2", "rx-3")
TRIP_IDS = ("trip-1", "trip-2", "trip-3")
PREFERENCE_KEYS = ("diet", "seat")
FACT_KEYS = ("home_country", "blood_type")
SUBSTANCES = ("penicillin", "amoxicillin", "sulfamethoxazole", "peanut", "aspirin")
DRUGS = ("amoxicillin", "ceftriaxone", "ibuprofen", "naproxen", "furosemide", "metformin")
COUNTRIES = ("NL", "DE", "FR", "JP")

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
optional_text = st.none() | texts


def _enum(values: Any) -> st.SearchStrategy[str]:
    return st.sampled_from([value.value for value in values])


def allergy_recorded() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "allergy_id": st.sampled_from(ALLERGY_IDS),
            "substance": st.sampled_from(SUBSTANCES),
            "codes": st.just([]),
            "allergy_type": st.none() | _enum(AllergyType),
            "categories": st.lists(_enum(AllergyCategory), max_size=2, unique=True),
            "criticality": st.none() | _enum(Criticality),
            "verification_status": _enum(VerificationStatus),
            "clinical_status": st.none() | _enum(ClinicalStatus),
            "negated": st.booleans(),
            "reactions": st.lists(
                st.fixed_dictionaries(
                    {
                        "manifestation": st.sampled_from(["hives", "rash", "anaphylaxis"]),
                        "severity": st.none() | _enum(ReactionSeverity),
                    }
                ),
                max_size=2,
            ),
            "note": optional_text,
        }
    )


def _payloads() -> dict[str, st.SearchStrategy[dict[str, Any]]]:
    return {
        "AllergyRecorded": allergy_recorded(),
        "AllergyStatusChanged": st.fixed_dictionaries(
            {
                "allergy_id": st.sampled_from(ALLERGY_IDS),
                "verification_status": _enum(VerificationStatus),
                "clinical_status": st.none() | _enum(ClinicalStatus),
            }
        ),
        "MedicationPrescribed": st.fixed_dictionaries(
            {"prescription_id": st.sampled_from(PRESCRIPTION_IDS), "drug": st.sampled_from(DRUGS)}
        ),
        "MedicationStopped": st.fixed_dictionaries(
            {
                "prescription_id": st.sampled_from(PRESCRIPTION_IDS),
                "reason": optional_text,
                "entered_in_error": st.booleans(),
            }
        ),
        "TravelRecorded": st.fixed_dictionaries(
            {
                "trip_id": st.sampled_from(TRIP_IDS),
                "origin_country": st.sampled_from(COUNTRIES),
                "destination_country": st.sampled_from(COUNTRIES),
                "departure_date": st.dates(date(2023, 1, 1), date(2025, 12, 31)),
            }
        ),
        "PreferenceStated": st.fixed_dictionaries(
            {"key": st.sampled_from(PREFERENCE_KEYS), "value": st.sampled_from(["a", "b", "c"])}
        ),
        "FactAsserted": st.fixed_dictionaries(
            {
                "key": st.sampled_from(FACT_KEYS),
                "value": st.sampled_from(COUNTRIES)
                | st.integers(-3, 3)
                | st.booleans()
                | st.integers(-(2**63), 2**63 - 1)
                | st.floats(allow_nan=False, allow_infinity=False)
                | texts,
            }
        ),
        "ConsentChanged": st.fixed_dictionaries(
            {
                "purpose": st.sampled_from(["care", "research"]),
                "granted": st.booleans(),
                "special_category": st.booleans(),
            }
        ),
    }


CLAIM_TYPES = tuple(_payloads())


@st.composite
def event_histories(
    draw: st.DrawFn,
    *,
    max_size: int = 20,
    subjects: tuple[str, ...] = ("patient-1",),
    tenant: str = "clinic-a",
    types: tuple[str, ...] = CLAIM_TYPES,
    window_odds: int = 4,
) -> list[Event]:
    """Events of a few subjects with distinct valid times, including corrections, retractions
    and status changes that may arrive before what they refer to; claims of `types` only; one
    claim in `window_odds` has a validity window."""
    size = draw(st.integers(1, max_size))
    minutes = draw(
        st.lists(st.integers(0, 60 * 24 * 400), min_size=size, max_size=size, unique=True)
    )
    payloads = _payloads()
    events: list[Event] = []
    for index, minute in enumerate(minutes):
        subject = draw(st.sampled_from(subjects))
        same_subject = [e for e in events if e.subject_id == subject]
        occurred = EPOCH + timedelta(minutes=minute)
        envelope: dict[str, Any] = {
            "event_id": f"00000000-0000-4000-8000-{index:012d}",
            "tenant_id": tenant,
            "subject_id": subject,
            "actor": "ehr-adapter",
            "occurred_at": occurred,
            "recorded_at": occurred + timedelta(seconds=draw(st.integers(0, 3600))),
            "origin": draw(_enum(Origin)),
            "confidence": draw(st.floats(0, 1)),
            "sensitivity": draw(_enum(Sensitivity)),
        }
        if same_subject and draw(st.integers(0, 9)) == 0:
            target = draw(st.sampled_from(same_subject))
            events.append(
                Event.model_validate(
                    envelope | {"type": "ClaimRetracted", "payload": {"claim_id": target.id}}
                )
            )
            continue
        event_type = draw(st.sampled_from(types))
        event = Event.model_validate(
            envelope
            | _validity(draw, occurred, window_odds)
            | {"type": event_type, "payload": draw(payloads[event_type])}
        )
        corrections = [
            e.id for e in same_subject if e.type == event.type and _key(e) == _key(event)
        ]
        if corrections and draw(st.integers(0, 4)) == 0:
            event = event.model_copy(update={"supersedes": draw(st.sampled_from(corrections))})
        events.append(event)
    return events


def _validity(draw: st.DrawFn, occurred: datetime, odds: int) -> dict[str, datetime]:
    """One time in `odds`, a validity window: opening before or after the claim is recorded,
    closing days before or after it, or open-ended."""
    if draw(st.integers(1, odds)) != 1:
        return {}
    days = st.integers(-30, 60).map(lambda n: occurred + timedelta(days=n))
    start, end = draw(st.none() | days), draw(st.none() | days)
    if start is not None and end is not None and end <= start:
        start, end = end - timedelta(days=1), start
    window = {"valid_from": start, "valid_until": end}
    return {name: moment for name, moment in window.items() if moment is not None}


def _key(event: Event) -> object:
    payload = event.payload
    for name in ("allergy_id", "prescription_id", "trip_id", "key", "purpose"):
        if hasattr(payload, name):
            return getattr(payload, name)
    return None


MIXED_SUBSTANCES = ("penicillin", "amoxicillin", "ibuprofen", "peanut")
NO_KNOWN_ALLERGY = "No known drug allergies"
MIXED_DRUGS = ("amoxicillin", "ceftriaxone", "ibuprofen", "naproxen", "aspirin", "metformin")
ACK_PLACEHOLDER = "ack-placeholder"
"""The alert id of a generated acknowledgement, until a test names a real one."""


def _mixed_payloads(*, narrow: bool = False) -> dict[str, st.SearchStrategy[dict[str, Any]]]:
    """Payloads of every type; `narrow`: of one penicillin allergy and one prescription that
    conflict more often than not, graded in many ways."""
    allergy_ids, prescription_ids = (
        (ALLERGY_IDS[:1], PRESCRIPTION_IDS[:1]) if narrow else (ALLERGY_IDS, PRESCRIPTION_IDS)
    )
    substances = ("penicillin", "amoxicillin") if narrow else MIXED_SUBSTANCES
    drugs = ("amoxicillin", "amoxicillin/clavulanate", "metformin") if narrow else MIXED_DRUGS
    status_change = st.fixed_dictionaries(
        {
            "allergy_id": st.sampled_from(allergy_ids),
            "verification_status": st.none() | _enum(VerificationStatus),
            "clinical_status": st.none() | _enum(ClinicalStatus),
        }
    ).filter(lambda p: p["verification_status"] or p["clinical_status"])
    negation = st.fixed_dictionaries(
        {
            "allergy_id": st.sampled_from(allergy_ids),
            "substance": st.just(NO_KNOWN_ALLERGY),
            "categories": st.lists(_enum(AllergyCategory), max_size=1),
            "verification_status": _enum(VerificationStatus),
            "clinical_status": st.none() | _enum(ClinicalStatus),
            "negated": st.just(True),
        }
    )
    allergy = st.fixed_dictionaries(
        {
            "allergy_id": st.sampled_from(allergy_ids),
            "substance": st.sampled_from(substances),
            "allergy_type": st.none() | _enum(AllergyType),
            "categories": st.lists(_enum(AllergyCategory), max_size=1),
            "criticality": st.none() | _enum(Criticality),
            "verification_status": (
                st.sampled_from(["confirmed", "unconfirmed"])
                if narrow
                else st.just("confirmed") | _enum(VerificationStatus)
            ),
            "clinical_status": st.none() | (st.just("active") if narrow else _enum(ClinicalStatus)),
            "negated": st.sampled_from([False] if narrow else [False, False, False, True]),
        }
    )
    return {
        "AllergyRecorded": allergy if narrow else st.one_of(allergy, allergy, allergy, negation),
        "AllergyStatusChanged": status_change,
        "MedicationPrescribed": st.fixed_dictionaries(
            {
                "prescription_id": st.sampled_from(prescription_ids),
                "drug": st.sampled_from(drugs),
                "route": st.none() | st.sampled_from(["oral", "topical"]),
            }
        ),
        "MedicationStopped": st.fixed_dictionaries(
            {
                "prescription_id": st.sampled_from(prescription_ids),
                "entered_in_error": st.booleans(),
            }
        ),
        "TravelRecorded": _payloads()["TravelRecorded"],
        "PreferenceStated": st.fixed_dictionaries(
            {"key": st.sampled_from(PREFERENCE_KEYS), "value": st.sampled_from(["a", "b"])}
        ),
        "FactAsserted": st.fixed_dictionaries(
            {"key": st.sampled_from(FACT_KEYS), "value": st.sampled_from(["NL", "DE"])}
        ),
        "ConsentChanged": _payloads()["ConsentChanged"],
        "AlertAcknowledged": st.fixed_dictionaries(
            {
                "alert_id": st.just(ACK_PLACEHOLDER),
                "action": st.just("accepted") | st.just("overridden"),
                "reason": st.just("benefit outweighs risk"),
            },
            optional={"severity": st.sampled_from(["info", "warning", "critical"])},
        ),
    }


MIXED_TYPES = (
    *("AllergyRecorded", "MedicationPrescribed") * 3,
    *("AllergyStatusChanged", "MedicationStopped", "PreferenceStated", "AlertAcknowledged") * 2,
    *("ClaimRetracted", "ClaimRetracted", "ClockAdvanced"),
    *("FactAsserted", "TravelRecorded", "ConsentChanged"),
)
"""Every type a subject's history may hold but an erasure, those that make alerts more often."""


@st.composite
def mixed_histories(
    draw: st.DrawFn,
    *,
    max_size: int = 16,
    types: tuple[str, ...] = MIXED_TYPES,
    subject: str = "patient-1",
    tenant: str = "clinic-a",
    erasure: bool = False,
    narrow: bool = False,
) -> list[Event]:
    """Events of one subject that mix every kind of claim with what refers to claims, packed
    into a few days so that reversals fall inside the confirmation window: several events at
    one valid time (distinct or equal transaction times), corrections (`supersedes`) and
    retractions that may point at claims valid later than themselves, retractions of
    retractions and of claims that never arrive, acknowledgements (their alert ids are
    placeholders until a test names real ones), clock ticks, validity
    windows, and optionally an erasure. Event ids are distinct and unrelated to valid time.
    `narrow`: one allergy id and one prescription id, so that most events change one alert."""
    size = draw(st.integers(1, max_size))
    instants = draw(st.lists(st.integers(0, 60 * 24 * 12), min_size=1, max_size=5, unique=True))
    numbers = draw(st.permutations(range(size)))
    payloads = _mixed_payloads(narrow=narrow)
    drafts: list[dict[str, Any]] = []
    for index in range(size):
        occurred = EPOCH + timedelta(minutes=draw(st.sampled_from(instants)))
        event_type = draw(st.sampled_from(types))
        envelope: dict[str, Any] = {
            "event_id": f"00000000-0000-4000-8000-{numbers[index]:012d}",
            "tenant_id": tenant,
            "subject_id": subject,
            "actor": "uac-clock" if event_type == "ClockAdvanced" else "ehr-adapter",
            "type": event_type,
            "occurred_at": occurred,
            "recorded_at": occurred + timedelta(minutes=draw(st.sampled_from([0, 0, 1, 90]))),
            "origin": draw(_enum(Origin)),
            "confidence": 1.0,
        }
        if event_type == "ClaimRetracted":
            envelope["payload"] = {"claim_id": "pending"}
        elif event_type == "ClockAdvanced":
            envelope["payload"] = {}
        else:
            envelope |= _validity(draw, occurred, 5) | {"payload": draw(payloads[event_type])}
        drafts.append(envelope)
    ids = [draft["event_id"] for draft in drafts]
    for draft in drafts:
        if draft["type"] == "ClaimRetracted":
            unknown = "00000000-0000-4000-8000-999999999999"
            draft["payload"] = {"claim_id": draw(st.sampled_from([*ids, unknown]))}
            continue
        same_key = [
            other["event_id"]
            for other in drafts
            if other is not draft
            and other["type"] == draft["type"]
            and other["type"] not in ("ClockAdvanced", "AlertAcknowledged")
            and _draft_key(other) == _draft_key(draft)
        ]
        if same_key and draw(st.integers(0, 3)) == 0:
            draft["supersedes"] = draw(st.sampled_from(same_key))
    if erasure and draw(st.booleans()):
        moment = EPOCH + timedelta(minutes=draw(st.sampled_from(instants)))
        drafts.append(
            {
                "event_id": "00000000-0000-4000-8000-888888888888",
                "tenant_id": tenant,
                "subject_id": subject,
                "actor": "ehr-adapter",
                "type": "ErasureRequested",
                "occurred_at": moment,
                "recorded_at": moment,
                "origin": "explicit_statement",
                "confidence": 1.0,
                "payload": {},
            }
        )
    return [Event.model_validate(draft) for draft in drafts]


def _draft_key(draft: dict[str, Any]) -> object:
    payload = draft["payload"]
    for name in ("allergy_id", "prescription_id", "trip_id", "key", "purpose", "alert_id"):
        if name in payload:
            return payload[name]
    return None
