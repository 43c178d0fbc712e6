"""The canonical state document: what `uac state` prints, checkpoints store and hashes cover.

Canonical JSON (sorted keys, no spaces, UTF-8, times as `YYYY-MM-DDTHH:MM:SS.mmmZ`) is produced
by our own encoder, not by a library default, so `state_hash` is stable across processes, library
versions and Python versions. A document that includes the folded events is a complete
checkpoint: `state_from_document` rebuilds the exact state from it and checks the hash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, date, datetime
from enum import Enum
from typing import Any, TypeVar
from uuid import UUID

from pydantic import BaseModel

from projections.queries import (
    MEDICATION_STANDINGS,
    claim_history,
    claim_views_at,
    events_in_order,
    medication_standing,
    trips,
)
from projections.state import Kind, UserState, initial_state, keyed_for, replay
from projections.views import (
    DEFAULT_POLICY,
    AllergyView,
    ClaimView,
    Conflict,
    FoldPolicy,
    MedicationView,
    claim_value,
)
from schemas.base import field_names
from schemas.checkpoint import StateCheckpoint
from schemas.events import Event

DOCUMENT_VERSION = 4
T = TypeVar("T")


class CorruptCheckpoint(ValueError):
    """A state document whose content does not match its recorded hash or identity."""


_AS_IS = frozenset({str, int, float, bool, type(None)})
"""The types `plain` returns unchanged, checked first by exact type: most values are these (a
`str` enum is not: its type is the enum)."""


def plain(value: Any) -> Any:
    """JSON-ready form with one fixed spelling per type (the canonical encoding)."""
    if type(value) in _AS_IS:
        return value
    if isinstance(value, datetime):
        utc = value.astimezone(UTC)
        return f"{utc:%Y-%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, BaseModel):
        return {name: plain(getattr(value, name)) for name in field_names(type(value))}
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


def _plain_leaf(value: Any) -> Any:
    """`plain` for what the JSON encoder cannot write itself (it walks dicts and lists)."""
    converted = plain(value)
    if converted is value:
        raise TypeError(f"{type(value).__name__} has no canonical JSON form")
    return converted


_CANONICAL = json.JSONEncoder(
    default=_plain_leaf,
    sort_keys=True,
    separators=(",", ":"),
    ensure_ascii=False,
    allow_nan=False,
)
"""One encoder for every document (`json.dumps` with these options builds one per call)."""


def canonical_json(document: Any) -> bytes:
    """The canonical encoding: the same bytes as `json.dumps(plain(document), ...)`, without
    first copying the parts that are already plain."""
    return _CANONICAL.encode(document).encode("utf-8")


def event_document(event: Event) -> dict[str, Any]:
    """The JSON form of an event (the NDJSON line format producers use)."""
    document: dict[str, Any] = plain(event)
    return document


_EVENT_JSON: dict[int, tuple[Event, bytes]] = {}
_EVENT_REFS: dict[int, tuple[Event, dict[str, Any]]] = {}
_MEMO_LIMIT = 500_000


def _memoised(memo: dict[int, tuple[Event, T]], event: Event, make: Callable[[Event], T]) -> T:
    """`make(event)`, computed once per event object. The memo holds the event itself, so an
    entry can never be mistaken for another object that reuses its id()."""
    found = memo.get(id(event))
    if found is not None and found[0] is event:
        return found[1]
    made = make(event)
    if len(memo) >= _MEMO_LIMIT:
        del memo[next(iter(memo))]
    memo[id(event)] = (event, made)
    return made


def event_json(event: Event) -> bytes:
    """Canonical JSON of an event, memoised: a subject's checkpoint re-serialises only events it
    has not serialised before."""
    return _memoised(_EVENT_JSON, event, canonical_json)


def forget_events(events: Iterable[Event]) -> None:
    """Drop these events from the serialisation memos (an erased subject leaves no copy)."""
    for event in events:
        for memo in (_EVENT_JSON, _EVENT_REFS):
            found = memo.get(id(event))
            if found is not None and found[0] is event:
                del memo[id(event)]


def state_document(
    state: UserState, *, policy: FoldPolicy = DEFAULT_POLICY, moment: datetime | None = None
) -> dict[str, Any]:
    """The readable state: every view, without the folded events themselves. Preferences, facts
    and their conflicts are resolved at `moment` (default: the state's `as_of`) from the
    statements in force then (`claim_views_at`)."""
    moment = state.as_of if moment is None else moment
    preferences = claim_views_at(state, Kind.PREFERENCE, moment, policy)
    facts = claim_views_at(state, Kind.FACT, moment, policy)
    document: dict[str, Any] = {
        "document_version": DOCUMENT_VERSION,
        "tenant_id": state.tenant_id,
        "subject_id": state.subject_id,
        "version": state.version,
        "last_event_id": state.last_event_id,
        "as_of": plain(state.as_of),
        "erased": state.erased,
        "allergies": [_allergy(view) for view in state.allergy_views()],
        "medications": _medications(state.medication_views(), state.as_of),
        "trips": [_trip(trip) for trip in trips(state)],
        "preferences": _claims(state, Kind.PREFERENCE, preferences, moment, policy),
        "facts": _claims(state, Kind.FACT, facts, moment, policy),
        "conflicts": [
            _conflict(view.conflict) for view in (*preferences, *facts) if view.conflict is not None
        ],
        "consents": {
            view.purpose: {
                "granted": view.granted,
                "special_category": view.special_category,
                "event_id": view.event.id,
                "occurred_at": plain(view.event.occurred_at),
            }
            for view in state.consent_views()
        },
        "acknowledgements": _by_purpose(
            (
                view.event.purpose,
                view.alert_id,
                {
                    "action": view.action.value,
                    "reason": view.reason,
                    "event_id": view.event.id,
                    "occurred_at": plain(view.event.occurred_at),
                },
            )
            for view in state.acknowledgement_views()
        ),
        "pending_retractions": sorted(state.pending_retractions.keys()),
    }
    return document


def checkpoint_json(state: UserState, policy: FoldPolicy = DEFAULT_POLICY) -> bytes:
    """The canonical checkpoint document `{"events": [...], "state": {...}}`: the folded events
    in valid-time order (enough to rebuild the state exactly) and the readable state."""
    events = b",".join(event_json(event) for event in events_in_order(state))
    views = canonical_json(state_document(state, policy=policy))
    return b'{"events":[' + events + b'],"state":' + views + b"}"


def state_hash(state: UserState, policy: FoldPolicy = DEFAULT_POLICY) -> str:
    """sha256 of the canonical checkpoint document."""
    return hashlib.sha256(checkpoint_json(state, policy)).hexdigest()


def state_from_document(
    document: Mapping[str, Any],
    expected_hash: str | None = None,
    policy: FoldPolicy = DEFAULT_POLICY,
) -> UserState:
    """Rebuild a state from a checkpoint document (`checkpoint_json`)."""
    try:
        events = [Event.model_validate(item) for item in document["events"]]
        tenant, subject = document["state"]["tenant_id"], document["state"]["subject_id"]
    except (KeyError, TypeError, ValueError) as error:
        raise CorruptCheckpoint(f"not a checkpoint document: {error}") from None
    strangers = [
        event.id for event in events if (event.tenant_id, event.subject_id) != (tenant, subject)
    ]
    if strangers:
        raise CorruptCheckpoint(
            f"checkpoint of {tenant}:{subject} holds events of another subject ({strangers[0]})"
        )
    state = replay(events, initial_state(tenant, subject), policy)
    if expected_hash is not None and state_hash(state, policy) != expected_hash:
        raise CorruptCheckpoint(f"checkpoint of {state.key} does not match its state_hash")
    return state


def _event_ref(event: Event) -> dict[str, Any]:
    """Where a claim came from and what it may be used for (a fresh copy each time: readers
    may filter the document they get)."""
    found: dict[str, Any] = _memoised(_EVENT_REFS, event, provenance)
    return dict(found)


def provenance(event: Event) -> dict[str, Any]:
    """Where an event came from and what it may be used for."""
    return {
        "event_id": event.id,
        "occurred_at": plain(event.occurred_at),
        "recorded_at": plain(event.recorded_at),
        "origin": event.origin.value,
        "source_ref": event.source_ref,
        "confidence": event.confidence,
        "purpose": event.purpose,
        "scope": event.scope,
        "sensitivity": event.sensitivity.value,
        "valid_from": plain(event.valid_from),
        "valid_until": plain(event.valid_until),
        "supersedes": event.supersedes,
    }


def _allergy(view: AllergyView) -> dict[str, Any]:
    return {
        "allergy_id": view.allergy_id,
        "substance": view.substance,
        "codes": plain(view.codes),
        "allergy_type": plain(view.allergy_type),
        "categories": plain(view.categories),
        "criticality": plain(view.criticality),
        "verification_status": view.verification_status.value,
        "clinical_status": plain(view.clinical_status),
        "negated": view.negated,
        "reactions": plain(view.reactions),
        "active": view.active,
        "recorded": _event_ref(view.record),
        "last_change": _event_ref(view.last_change),
    }


def _medication(view: MedicationView) -> dict[str, Any]:
    return {
        "prescription_id": view.prescription_id,
        "drug": view.drug,
        "codes": plain(view.codes),
        "dose": view.dose,
        "route": view.route,
        "prescribed": _event_ref(view.prescribed),
        "stopped": None if view.stopped is None else _event_ref(view.stopped),
        "stop_reason": view.stop_reason,
        "entered_in_error": view.entered_in_error,
        "voided": None if view.voided is None else _event_ref(view.voided),
    }


def _medications(
    views: list[MedicationView], moment: datetime | None
) -> dict[str, list[dict[str, Any]]]:
    standings: dict[str, list[dict[str, Any]]] = {standing: [] for standing in MEDICATION_STANDINGS}
    for view in views:
        standings[medication_standing(view, moment)].append(_medication(view))
    return standings


def _trip(trip: Any) -> dict[str, Any]:
    return {
        "trip_id": trip.trip_id,
        "origin_country": trip.origin_country,
        "destination_country": trip.destination_country,
        "departure_date": plain(trip.departure_date),
        "return_date": plain(trip.return_date),
        "home_country": trip.home_country,
        "international": trip.international,
        "recorded": _event_ref(trip.event),
    }


def _by_purpose(entries: Iterable[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    """{purpose: {key: entry}}: the claims of a purpose-bound kind, held apart by purpose."""
    filed: dict[str, dict[str, Any]] = {}
    for purpose, key, entry in entries:
        filed.setdefault(purpose, {})[key] = entry
    return filed


def _claims(
    state: UserState,
    kind: Kind,
    views: list[ClaimView],
    moment: datetime | None,
    policy: FoldPolicy,
) -> dict[str, Any]:
    return _by_purpose(
        (
            view.winner.purpose,
            view.key,
            {
                "value": view.value,
                "current": _event_ref(view.winner),
                "needs_confirmation": None if view.conflict is None else view.conflict.conflict_id,
                "history": [
                    {
                        **_event_ref(entry.event),
                        "value": entry.value,
                        "status": entry.status,
                        "replaced_by": entry.replaced_by,
                    }
                    for entry in claim_history(
                        state, kind, keyed_for(kind, view.key, view.winner.purpose), policy, moment
                    )
                ],
            },
        )
        for view in views
    )


def _conflict(conflict: Conflict) -> dict[str, Any]:
    return {
        "conflict_id": conflict.conflict_id,
        "kind": conflict.kind,
        "key": conflict.key,
        "status": "needs_confirmation",
        "claims": [
            {**_event_ref(event), "value": claim_value(event)}
            for event in (conflict.held, *conflict.challengers)
        ],
    }


def checkpoint_of(state: UserState, policy: FoldPolicy = DEFAULT_POLICY) -> StateCheckpoint:
    """The checkpoint record of a state: what the compacted state topic and the table keep."""
    encoded = checkpoint_json(state, policy)
    return StateCheckpoint(
        tenant_id=state.tenant_id,
        subject_id=state.subject_id,
        version=state.version,
        state_hash=hashlib.sha256(encoded).hexdigest(),
        last_event_id=state.last_event_id,
        as_of=state.as_of,
        erased=state.erased,
        state_json=encoded.decode("utf-8"),
    )


def state_from_checkpoint(
    checkpoint: StateCheckpoint, policy: FoldPolicy = DEFAULT_POLICY
) -> UserState:
    """The state a checkpoint was taken from, rebuilt by folding its events with this build.

    Its integrity is checked on the stored document itself (its sha256 is the recorded hash, and
    its events are the checkpoint's subject), not on this build's rendering of it: a release
    that renders the state document differently still reads the checkpoints an earlier release
    wrote. `rendered_as_recorded` tells whether this build renders it the same."""
    if not intact(checkpoint):
        raise CorruptCheckpoint(
            f"checkpoint of {checkpoint.tenant_id}:{checkpoint.subject_id} does not match its "
            "state_hash"
        )
    state = state_from_document(json.loads(checkpoint.state_json), policy=policy)
    if (state.tenant_id, state.subject_id) != (checkpoint.tenant_id, checkpoint.subject_id):
        raise CorruptCheckpoint(
            f"checkpoint of {checkpoint.tenant_id}:{checkpoint.subject_id} holds the state of "
            f"another subject ({state.key})"
        )
    return state


def intact(checkpoint: StateCheckpoint) -> bool:
    """Whether the checkpoint's document is the one its hash was taken of."""
    return (
        hashlib.sha256(checkpoint.state_json.encode("utf-8")).hexdigest() == checkpoint.state_hash
    )


def rendered_as_recorded(
    checkpoint: StateCheckpoint, state: UserState, policy: FoldPolicy = DEFAULT_POLICY
) -> bool:
    """Whether this build renders `state` (rebuilt from `checkpoint`) as the checkpoint records
    it; False when the build that wrote it rendered the state document otherwise."""
    return state_hash(state, policy) == checkpoint.state_hash
