"""Typed per-subject state and the pure fold: `initial_state`, `evolve`, `replay`.

State is a frozen value; `evolve` returns a new one and never touches its input. Collections are
persistent hash maps (HAMTs), so one event costs the same however long the history is.
Folding any permutation of the same events gives the same state (see `timeline.py`), and
folding an event twice changes nothing (events are keyed by `event_id`). `replay` onto an empty
state folds a whole history at once (each claim key in one pass), which gives the same state as
`evolve` event by event.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from datetime import datetime
from enum import StrEnum
from functools import cache
from typing import Any

from immutables import Map
from pydantic import BaseModel, ConfigDict

from projections.timeline import (
    NO_IDS,
    Keyed,
    SortKey,
    Step,
    Timeline,
    sort_key,
    timeline_of,
    with_member,
    with_retraction,
)
from projections.views import (
    DEFAULT_POLICY,
    AcknowledgementView,
    AllergyView,
    ClaimView,
    ConsentView,
    FoldPolicy,
    MedicationView,
    TripView,
    preference_step,
    step_acknowledgement,
    step_allergy,
    step_consent,
    step_fact,
    step_medication,
    step_trip,
)
from schemas.base import WireModel
from schemas.events import (
    DEFAULT_PURPOSE,
    AlertAcknowledged,
    AllergyRecorded,
    AllergyStatusChanged,
    ClaimRetracted,
    ClockAdvanced,
    ConsentChanged,
    ErasureRequested,
    Event,
    FactAsserted,
    MedicationPrescribed,
    MedicationStopped,
    PreferenceStated,
    TravelRecorded,
    subject_key,
)


class Kind(StrEnum):
    """The families of keyed claims; `supersedes` must stay inside one (kind, key)."""

    ALLERGY = "allergy"
    MEDICATION = "medication"
    TRIP = "trip"
    PREFERENCE = "preference"
    FACT = "fact"
    CONSENT = "consent"
    ACKNOWLEDGEMENT = "acknowledgement"


CLAIM_KEYS: dict[type[WireModel], tuple[Kind, str]] = {
    AllergyRecorded: (Kind.ALLERGY, "allergy_id"),
    AllergyStatusChanged: (Kind.ALLERGY, "allergy_id"),
    MedicationPrescribed: (Kind.MEDICATION, "prescription_id"),
    MedicationStopped: (Kind.MEDICATION, "prescription_id"),
    TravelRecorded: (Kind.TRIP, "trip_id"),
    PreferenceStated: (Kind.PREFERENCE, "key"),
    FactAsserted: (Kind.FACT, "key"),
    ConsentChanged: (Kind.CONSENT, "purpose"),
    AlertAcknowledged: (Kind.ACKNOWLEDGEMENT, "alert_id"),
}
"""Payload type -> (kind, name of the field that keys it). Every payload is either here or in
NOT_CLAIMS (a unit test checks that no event type is forgotten)."""
NOT_CLAIMS: frozenset[type[WireModel]] = frozenset(
    {ClaimRetracted, ErasureRequested, ClockAdvanced}
)


PURPOSE_BOUND: frozenset[Kind] = frozenset(Kind) - {Kind.CONSENT}
"""The kinds whose claims are held apart by purpose: a claim recorded for research neither
replaces, corrects, disputes nor hides the one recorded for care under the same id or key (an
allergy re-recorded for research under its care id is a research record of its own; a research
refutation or stop follows the research record only), and an acknowledgement acknowledges for
its own purpose only. A consent is keyed by the purpose it grants, whatever the event's."""


def keyed_for(kind: Kind, key: str, purpose: str) -> str:
    """The timeline key of `key` for claims recorded for `purpose`: the key itself for the
    default purpose (and for the kinds not bound by purpose), else the key and the purpose
    joined by a unit separator (a control character no accepted record holds, so no key of
    one purpose can name another's)."""
    if purpose == DEFAULT_PURPOSE or kind not in PURPOSE_BOUND:
        return key
    return f"{key}\x1f{purpose}"


def unkeyed(key: str) -> str:
    """The id or key a timeline key names, without the purpose `keyed_for` joined to it."""
    return key.partition("\x1f")[0]


def record_address(kind: Kind, key: str, record: Event) -> tuple[Kind, str]:
    """(kind, timeline key) of the claim `key` whose record is `record`."""
    return kind, keyed_for(kind, key, record.purpose)


def claim_key(event: Event) -> tuple[Kind, str] | None:
    """(kind, key) the claim an event records or changes is about, whatever its purpose; None
    for retractions/erasure."""
    found = CLAIM_KEYS.get(type(event.payload))
    if found is None:
        return None
    kind, field = found
    key: str = getattr(event.payload, field)
    return kind, key


def claim_address(event: Event) -> tuple[Kind, str] | None:
    """(kind, timeline key) of the claim an event records or changes (`keyed_for` its
    purpose); None for retractions/erasure."""
    found = claim_key(event)
    if found is None:
        return None
    kind, key = found
    return kind, keyed_for(kind, key, event.purpose)


Bound = tuple[datetime, Kind, str]
"""A moment a claim's validity window opens (`valid_from`) or closes (`valid_until`), and the
(kind, key) of the claim."""


def bounds_of(event: Event, address: tuple[Kind, str]) -> list[Bound]:
    kind, key = address
    return [(moment, kind, key) for moment in (event.valid_from, event.valid_until) if moment]


def first_bound_after(bounds: tuple[Bound, ...], moment: datetime) -> int:
    """The index of the first of `bounds` (in time order) later than `moment`."""
    return bisect_right(bounds, moment, key=_moment_of)


def _moment_of(bound: Bound) -> datetime:
    return bound[0]


def bounds_ahead(
    bounds: tuple[Bound, ...], added: Iterable[Bound], moment: datetime
) -> tuple[Bound, ...]:
    """`bounds` (in time order) and `added` that are later than `moment`, in time order."""
    kept = bounds[first_bound_after(bounds, moment) :]
    later = [bound for bound in added if bound[0] > moment]
    return tuple(sorted((*kept, *later))) if later else kept


Timelines = Map[str, Timeline[Any]]
_NO_TIMELINES: Timelines = Map()
_NO_EVENTS: Map[str, Event] = Map()
_NO_KEYS: Map[str, bool] = Map()
Windowed = Map[tuple[Kind, str], Map[str, Event]]
_NO_WINDOWED: Windowed = Map()


class UserState(BaseModel):
    """Everything UaC holds about one subject of one tenant."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    tenant_id: str
    subject_id: str
    erased: bool = False
    last_key: SortKey | None = None
    events: Map[str, Event] = _NO_EVENTS
    allergies: Timelines = _NO_TIMELINES
    medications: Timelines = _NO_TIMELINES
    trips: Timelines = _NO_TIMELINES
    preferences: Timelines = _NO_TIMELINES
    facts: Timelines = _NO_TIMELINES
    consents: Timelines = _NO_TIMELINES
    acknowledgements: Timelines = _NO_TIMELINES
    pending_retractions: Map[str, Event] = _NO_EVENTS
    bounds: tuple[Bound, ...] = ()
    """The validity bounds of the claims' events still ahead of the subject's time (later than
    `as_of`), in time order: when a window opens or closes next (an index derived from `events`,
    not part of the checkpoint document). The subject's time only moves forward, so a bound it
    has passed is dropped, and a long history of windowed claims costs an event no more than a
    short one."""
    windowed: Windowed = _NO_WINDOWED
    """The claims (kind, key) with a statement that has a validity window, each with its
    statements whose window has not closed by the subject's time (no `valid_until`, or a later
    one): a read at a moment folds only a windowed claim's statements in force then, and at the
    subject's time or later only these can be (an index derived from `events`, not part of the
    checkpoint document)."""
    unended_medications: Map[str, bool] = _NO_KEYS
    """The prescription ids whose prescription holds no stop and whose window has not closed by
    the subject's time (an index derived from `medications`, not part of the checkpoint
    document): the rules look for the active ones on
    every event, so a subject with a long history of ended courses costs no more to judge."""

    @property
    def key(self) -> str:
        return subject_key(self.tenant_id, self.subject_id)

    @property
    def version(self) -> int:
        """Number of distinct events folded into this state."""
        return len(self.events)

    @property
    def last_event_id(self) -> str | None:
        """The latest event in valid-time order (independent of arrival order)."""
        return None if self.last_key is None else self.last_key[3]

    @property
    def as_of(self) -> Any:
        """Valid time of the latest event: the 'now' rules use, never a wall clock."""
        return None if self.last_key is None else self.last_key[0]

    def timelines(self, kind: Kind) -> Timelines:
        timelines: Timelines = getattr(self, _FIELDS[kind])
        return timelines

    def allergy_views(self) -> list[AllergyView]:
        return _resolved(self.allergies)

    def medication_views(self) -> list[MedicationView]:
        return _resolved(self.medications)

    def unended_medication_views(self) -> list[MedicationView]:
        """The prescriptions that hold no stop and whose window has not closed by the subject's
        time, by prescription id (`medication_views` of those whose `active` is true and whose
        `valid_until` is after `as_of`)."""
        medications = self.medications
        return [
            view
            for key in sorted(self.unended_medications.keys())
            if (view := medications[key].resolution) is not None
        ]

    def trip_views(self) -> list[TripView]:
        return _resolved(self.trips)

    def preference_views(self) -> list[ClaimView]:
        return _resolved(self.preferences)

    def fact_views(self) -> list[ClaimView]:
        return _resolved(self.facts)

    def consent_views(self) -> list[ConsentView]:
        return _resolved(self.consents)

    def acknowledgement_views(self) -> list[AcknowledgementView]:
        return _resolved(self.acknowledgements)

    def resolution(self, kind: Kind, key: str) -> Any:
        timeline = self.timelines(kind).get(key)
        return None if timeline is None else timeline.resolution


def _resolved(timelines: Timelines) -> list[Any]:
    return [
        timelines[key].resolution
        for key in sorted(timelines.keys())
        if timelines[key].resolution is not None
    ]


_FIELDS: dict[Kind, str] = {
    Kind.ALLERGY: "allergies",
    Kind.MEDICATION: "medications",
    Kind.TRIP: "trips",
    Kind.PREFERENCE: "preferences",
    Kind.FACT: "facts",
    Kind.CONSENT: "consents",
    Kind.ACKNOWLEDGEMENT: "acknowledgements",
}


def _next(state: UserState, update: dict[str, Any]) -> UserState:
    """The next state value, built from typed, already-validated parts.

    This is `model_copy(update=...)` without its per-call overhead (it is the hot path of every
    fold); like `model_copy` it does not re-validate, so callers pass only correctly typed parts.
    """
    following = object.__new__(UserState)
    object.__setattr__(following, "__dict__", {**state.__dict__, **update})
    object.__setattr__(following, "__pydantic_fields_set__", state.__pydantic_fields_set__)
    object.__setattr__(following, "__pydantic_extra__", None)
    object.__setattr__(following, "__pydantic_private__", None)
    return following


def initial_state(tenant_id: str, subject_id: str) -> UserState:
    return UserState(tenant_id=tenant_id, subject_id=subject_id)


@cache
def steps_for(policy: FoldPolicy) -> dict[Kind, Step[Any]]:
    return {
        Kind.ALLERGY: step_allergy,
        Kind.MEDICATION: step_medication,
        Kind.TRIP: step_trip,
        Kind.PREFERENCE: preference_step(policy),
        Kind.FACT: step_fact,
        Kind.CONSENT: step_consent,
        Kind.ACKNOWLEDGEMENT: step_acknowledgement,
    }


_DEFAULT_STEPS = steps_for(DEFAULT_POLICY)


def step_for(kind: Kind, policy: FoldPolicy) -> Step[Any]:
    return (_DEFAULT_STEPS if policy is DEFAULT_POLICY else steps_for(policy))[kind]


def evolve(state: UserState, event: Event, policy: FoldPolicy = DEFAULT_POLICY) -> UserState:
    """Return the state after `event`. Pure: no clock, no randomness, no I/O."""
    if event.subject_id != state.subject_id or event.tenant_id != state.tenant_id:
        raise ValueError(f"event for {event.key} folded into the state of {state.key}")
    event_id, payload = event.event_id, event.payload
    if state.erased:
        return _erased(state, event) if isinstance(payload, ErasureRequested) else state
    if event_id in state.events:
        return state
    if isinstance(payload, ErasureRequested):
        return _erased(state, event)
    key, last = sort_key(event), state.last_key
    latest = key if last is None or key > last else last
    update: dict[str, Any] = {"events": state.events.set(event_id, event), "last_key": latest}
    pending = state.pending_retractions
    retracted = event_id in pending
    if retracted:
        update["pending_retractions"] = pending = pending.delete(event_id)
    moment = latest[0]
    if isinstance(payload, ClaimRetracted):
        update.update(_retraction(state, pending, event, payload.claim_id, policy, moment))
    elif (address := claim_address(event)) is not None:
        update.update(_claimed(state, event, address, retracted, policy, moment))
    update.update(_passed(state, update, moment))
    return _next(state, update)


def _claimed(
    state: UserState,
    event: Event,
    address: tuple[Kind, str],
    retracted: bool,
    policy: FoldPolicy,
    moment: datetime,
) -> dict[str, Any]:
    """The changes `event`, a statement of the claim at `address`, makes (the subject's time
    at `moment`)."""
    kind, claim_key = address
    field = _FIELDS[kind]
    timelines: Timelines = getattr(state, field)
    timeline = with_member(
        timelines.get(claim_key), event, step_for(kind, policy), retracted=retracted
    )
    update: dict[str, Any] = {field: timelines.set(claim_key, timeline)}
    if kind is Kind.MEDICATION:
        update["unended_medications"] = _unended_in(
            state.unended_medications, claim_key, timeline, moment
        )
    if event.valid_from is not None or event.valid_until is not None:
        update["bounds"] = tuple(sorted((*state.bounds, *bounds_of(event, address))))
    unexpired = state.windowed.get(address)
    if unexpired is None and "bounds" in update:
        update["windowed"] = state.windowed.set(
            address, _unexpired(timeline.members.values(), moment)
        )
    elif unexpired is not None and _unexpired_at(event, moment):
        update["windowed"] = state.windowed.set(address, unexpired.set(event.event_id, event))
    return update


def _unexpired_at(event: Event, moment: datetime) -> bool:
    return event.valid_until is None or moment < event.valid_until


def _unexpired(statements: Iterable[Event], moment: datetime) -> Map[str, Event]:
    """The statements whose window has not closed by `moment`, by event id."""
    return Map({event.event_id: event for event in statements if _unexpired_at(event, moment)})


def _passed(state: UserState, update: dict[str, Any], moment: datetime) -> dict[str, Any]:
    """The subject's time at `moment`: the bounds it has reached are dropped, and the
    prescriptions whose window one of them closed leave the index of unended ones."""
    bounds: tuple[Bound, ...] = update.get("bounds", state.bounds)
    cut = first_bound_after(bounds, moment)
    if cut == 0:
        return {}
    medications: Timelines = update.get("medications", state.medications)
    index: Map[str, bool] = update.get("unended_medications", state.unended_medications)
    windowed: Windowed = update.get("windowed", state.windowed)
    for kind, key in dict.fromkeys((kind, key) for _, kind, key in bounds[:cut]):
        if kind is Kind.MEDICATION and key in index:
            index = _unended_in(index, key, medications[key], moment)
        unexpired = windowed.get((kind, key))
        if unexpired is not None:
            windowed = windowed.set((kind, key), _unexpired(unexpired.values(), moment))
    return {"bounds": bounds[cut:], "unended_medications": index, "windowed": windowed}


def with_corrections(
    state: UserState, corrections: Iterable[Event], policy: FoldPolicy = DEFAULT_POLICY
) -> UserState:
    """`state` with `corrections` folded in but its time (`as_of`) kept: how a past state takes
    in what was learned about its claims later (a retraction, a changed verification status)
    without also taking in what happened in between (an expiry, a stop)."""
    moment, past = state.last_key, state
    added: list[Event] = []
    for event in corrections:
        if event.event_id not in state.events:
            added.append(event)
        state = evolve(state, event, policy)
    if state.erased or moment is None:
        return state
    bounds = [
        bound
        for event in added
        if (address := claim_address(event)) is not None
        for bound in bounds_of(event, address)
    ]
    return _next(
        state,
        {
            "last_key": moment,
            "bounds": bounds_ahead(past.bounds, bounds, moment[0]),
            "unended_medications": _unended_index(state.medications, moment[0]),
            "windowed": Map(
                {
                    (kind, key): _unexpired(state.timelines(kind)[key].members.values(), moment[0])
                    for kind, key in state.windowed
                }
            ),
        },
    )


def _retraction(
    state: UserState,
    pending: Map[str, Event],
    event: Event,
    claim_id: str,
    policy: FoldPolicy,
    moment: datetime,
) -> dict[str, Any]:
    """Retract a known claim now, or remember the retraction until the claim arrives (the
    subject's time at `moment`)."""
    target = state.events.get(claim_id)
    address = None if target is None else claim_address(target)
    if address is None:
        if target is not None:
            return {}
        return {"pending_retractions": pending.set(claim_id, event)}
    kind, claim_key = address
    timelines = state.timelines(kind)
    timeline = with_retraction(timelines[claim_key], claim_id, step_for(kind, policy))
    update: dict[str, Any] = {_FIELDS[kind]: timelines.set(claim_key, timeline)}
    if kind is Kind.MEDICATION:
        update["unended_medications"] = _unended_in(
            state.unended_medications, claim_key, timeline, moment
        )
    return update


def _unended(timeline: Timeline[Any], moment: datetime) -> bool:
    """Whether the prescription holds no stop and its window has not closed by `moment`."""
    view: MedicationView | None = timeline.resolution
    if view is None or not view.active:
        return False
    until = view.prescribed.valid_until
    return until is None or moment < until


def _unended_in(
    index: Map[str, bool], key: str, timeline: Timeline[Any], moment: datetime
) -> Map[str, bool]:
    if _unended(timeline, moment):
        return index if key in index else index.set(key, True)
    return index.delete(key) if key in index else index


def _unended_index(medications: Timelines, moment: datetime) -> Map[str, bool]:
    return Map({key: True for key, timeline in medications.items() if _unended(timeline, moment)})


def _erased(state: UserState, erasure: Event) -> UserState:
    """What is left after an erasure: only the (earliest) erasure request. Absorbing."""
    if state.erased and state.last_key is not None and state.last_key <= sort_key(erasure):
        return state
    return UserState(
        tenant_id=state.tenant_id,
        subject_id=state.subject_id,
        erased=True,
        last_key=sort_key(erasure),
        events=Map({erasure.id: erasure}),
    )


def replay(
    events: Iterable[Event],
    state: UserState | None = None,
    policy: FoldPolicy = DEFAULT_POLICY,
) -> UserState:
    """Fold `events` (all of one subject) onto `state`, or onto the initial state.

    Onto an empty state (a replay, a recovery, a checkpoint read back) the events are folded in
    bulk: the same state as `evolve` one event at a time, built with one pass per claim key."""
    events = list(events)
    if state is None and events:
        state = initial_state(events[0].tenant_id, events[0].subject_id)
    if state is None:
        raise ValueError("replay needs at least one event or a starting state")
    folded = _folded_in_bulk(state, events, policy) if state.version == 0 else None
    if folded is not None:
        return folded
    for event in events:
        state = evolve(state, event, policy)
    return state


def _folded_in_bulk(empty: UserState, events: list[Event], policy: FoldPolicy) -> UserState | None:
    """What folding `events` one by one onto `empty` gives; None if they hold an erasure (its
    absorbing effect is left to `evolve`).

    The first arrival of an event id wins; each event is keyed once, and each claim key is
    folded once from all its members, those retracted (before or after they arrived) marked."""
    tenant_id, subject_id = empty.tenant_id, empty.subject_id
    unique: dict[str, Event] = {}
    members: dict[tuple[Kind, str], list[Keyed]] = {}
    retractions: list[Event] = []
    bounds: list[Bound] = []
    windowed: set[tuple[Kind, str]] = set()
    last: SortKey | None = None
    address_of = CLAIM_KEYS.get
    for event in events:
        event_id = event.event_id
        if event_id in unique:
            continue
        if event.subject_id != subject_id or event.tenant_id != tenant_id:
            raise ValueError(f"event for {event.key} folded into the state of {empty.key}")
        unique[event_id] = event
        key = sort_key(event)
        if last is None or key > last:
            last = key
        payload = event.payload
        found = address_of(type(payload))
        if found is None:
            if isinstance(payload, ClaimRetracted):
                retractions.append(event)
            elif isinstance(payload, ErasureRequested):
                return None
            continue
        address = (found[0], keyed_for(found[0], getattr(payload, found[1]), event.purpose))
        if event.valid_from is not None or event.valid_until is not None:
            bounds.extend(bounds_of(event, address))
            windowed.add(address)
        keyed = members.get(address)
        if keyed is None:
            members[address] = [(key, event)]
        else:
            keyed.append((key, event))
    if last is None:
        return empty
    targets = {retraction.payload.claim_id for retraction in retractions}  # type: ignore[union-attr]
    steps = _DEFAULT_STEPS if policy is DEFAULT_POLICY else steps_for(policy)
    timelines: dict[Kind, dict[str, Timeline[Any]]] = {kind: {} for kind in Kind}
    for (kind, claim_key), keyed in members.items():
        retracted = (
            frozenset(targets.intersection(event.event_id for _, event in keyed))
            if targets
            else NO_IDS
        )
        timelines[kind][claim_key] = timeline_of(keyed, retracted, steps[kind])
    update: dict[str, Any] = {
        "events": Map(unique),
        "last_key": last,
        "pending_retractions": _pending(unique, retractions) if retractions else _NO_EVENTS,
        "bounds": bounds_ahead((), bounds, last[0]),
        "windowed": Map(
            {
                address: _unexpired((event for _, event in members[address]), last[0])
                for address in windowed
            }
        )
        if windowed
        else _NO_WINDOWED,
    }
    update.update({_FIELDS[kind]: Map(by_key) for kind, by_key in timelines.items() if by_key})
    update["unended_medications"] = _unended_index(
        update.get("medications", _NO_TIMELINES), last[0]
    )
    return _next(empty, update)


def _pending(unique: dict[str, Event], retractions: list[Event]) -> Map[str, Event]:
    """Retractions still waiting, as one event at a time leaves them: the latest retraction of
    a claim that never arrived, and a retraction of itself (its claim is never seen before it)."""
    waiting: dict[str, Event] = {}
    for retraction in retractions:
        claim_id: str = retraction.payload.claim_id  # type: ignore[union-attr]
        if claim_id not in unique or claim_id == retraction.event_id:
            waiting[claim_id] = retraction
    return Map(waiting)


def replay_all(
    events: Iterable[Event], policy: FoldPolicy = DEFAULT_POLICY
) -> dict[str, UserState]:
    """Fold a mixed stream into one state per `tenant:subject`: each subject's events in the
    order given, one subject after the other (the same states as folding them interleaved, and
    about twice as fast, since one subject's data stays in the processor's caches)."""
    streams: dict[tuple[str, str], list[Event]] = {}
    for event in events:
        address = (event.tenant_id, event.subject_id)
        stream = streams.get(address)
        if stream is None:
            streams[address] = [event]
        else:
            stream.append(event)
    return {subject_key(*key): replay(stream, policy=policy) for key, stream in streams.items()}
