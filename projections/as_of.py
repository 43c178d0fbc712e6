"""Bitemporal questions: what was true at a valid time, as it was known at a transaction time.

Later knowledge comes in two kinds. What *happened* after the valid time (a stop, a new
prescription, an allergy that resolved, a preference that changed) is not part of the past. What
was *learned about the past's claims* after it is: a retraction says a claim should never have
been recorded, an allergy's verification status (confirmed, unconfirmed, refuted,
entered-in-error) is the evidence for the allergy, not a change in the person, and a stop that
says a prescription was entered in error says it never held. They apply to the
past as they are known at `known_at` (or as known now, without it); a `known_at` at the valid time
itself reads the record as it stood then, before those corrections.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from projections.clock import clock_event
from projections.state import (
    Kind,
    UserState,
    claim_address,
    evolve,
    initial_state,
    replay,
    with_corrections,
)
from projections.views import DEFAULT_POLICY, FoldPolicy
from schemas.events import (
    AllergyRecorded,
    AllergyStatusChanged,
    ClaimRetracted,
    Event,
    MedicationStopped,
)


def state_as_of(
    events: Sequence[Event],
    valid_time: datetime,
    known_at: datetime | None = None,
    policy: FoldPolicy = DEFAULT_POLICY,
) -> UserState:
    """The state of one subject as it stood at `valid_time`, counting the events that had
    occurred by then and, if `known_at` is given, had been recorded by then; with the
    retractions, allergy verification statuses and prescriptions entered in error recorded by
    `known_at` (or at all) applied whenever they occurred (see the module).

    The subject's time (`as_of`) is `valid_time` itself, not the time of the last event before
    it: a prescription whose `valid_until` passed in between is no longer active, a claim whose
    `valid_from` came in between is in force. The state is moved there as the worker's clock
    moves a live subject, by a `ClockAdvanced` event, so rules and reads judge it at
    `valid_time` without being told."""
    if not events:
        raise ValueError("state_as_of needs the subject's events")
    empty = initial_state(events[0].tenant_id, events[0].subject_id)
    known = [event for event in events if known_at is None or event.recorded_at <= known_at]
    past = replay((event for event in known if event.occurred_at <= valid_time), empty, policy)
    if past.erased or past.as_of is None:
        return past
    if past.as_of < valid_time:
        past = evolve(past, clock_event(past, valid_time, known_at or valid_time), policy)
    later = [event for event in known if event.occurred_at > valid_time]
    if not later:
        return past
    past = with_corrections(past, _retractions_of(past.events.keys(), later), policy)
    corrected = _known_otherwise(past, replay(known, empty, policy))
    corrections = [event for event in later if _evidence_of(event) in corrected]
    retracted = _retractions_of({event.event_id for event in corrections}, later)
    return with_corrections(past, [*corrections, *retracted], policy)


def _retractions_of(claim_ids: Iterable[str], later: list[Event]) -> list[Event]:
    """The events of `later` that retract one of `claim_ids`."""
    targets = frozenset(claim_ids)
    return [
        event
        for event in later
        if isinstance(event.payload, ClaimRetracted) and event.payload.claim_id in targets
    ]


def _known_otherwise(past: UserState, known: UserState) -> frozenset[tuple[Kind, str]]:
    """The claims of `past` whose evidence `known` holds otherwise: an allergy's verification
    status, a prescription found entered in error."""
    allergies = (
        address
        for view in past.allergy_views()
        if (address := claim_address(view.record)) is not None
        and (now := known.resolution(*address)) is not None
        and now.verification_status != view.verification_status
    )
    prescriptions = (
        address
        for view in past.medication_views()
        if (address := claim_address(view.prescribed)) is not None
        and (now := known.resolution(*address)) is not None
        and now.entered_in_error
        and not view.entered_in_error
    )
    return frozenset((*allergies, *prescriptions))


def _evidence_of(event: Event) -> tuple[Kind, str] | None:
    """The claim whose evidence `event` gives or may undo (by replacing an event that gave
    it), if any: an allergy's verification status, a prescription entered in error."""
    payload = event.payload
    if (
        isinstance(payload, AllergyRecorded)
        or (
            isinstance(payload, AllergyStatusChanged)
            and (payload.verification_status is not None or event.supersedes)
        )
        or (isinstance(payload, MedicationStopped) and payload.entered_in_error)
    ):
        return claim_address(event)
    return None
