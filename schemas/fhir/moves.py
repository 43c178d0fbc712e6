"""A record moved to another patient: a later version of a resource that names another patient.

An allergy or an order filed under the wrong patient is corrected at the source by updating the
resource's `patient`/`subject`. Each version maps to events of the patient it names, so without
more the first patient would keep the claim: an allergy that is not theirs, alerts on their
orders. So where, in one input set, a version of a resource names another patient than the
version before it, the claim ends for the earlier patient at the later version's time: an
allergy becomes entered-in-error, a prescription is stopped (reason `entered-in-error: moved to
another patient`). The record names neither the other patient nor the new version's content.
Versions recorded at one time cannot be ordered, so no move is read between them.

Versions imported by earlier commands are not in the input set: a move across imports is not
seen (import the resource's history together, e.g. a history Bundle).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from itertools import pairwise
from typing import Final
from uuid import UUID, uuid5

from schemas.events import (
    AllergyRecorded,
    AllergyStatusChanged,
    Event,
    EventType,
    MedicationPrescribed,
    MedicationStopped,
    VerificationStatus,
)

MOVED_NAMESPACE: Final = UUID("6a0f3d1e-5b7c-5d2e-9f41-7c3b2a1d0e91")
MOVED_REASON: Final = "entered-in-error: moved to another patient"

Sourced = tuple[str, Event]
"""(where the event came from, the event)."""


def moved_away(events: Sequence[Sourced]) -> list[Sourced]:
    """The events that end a claim for the patient an earlier version of its resource named,
    one per move, each from where the later version came."""
    versions: defaultdict[tuple[str, str], list[Sourced]] = defaultdict(list)
    for origin, event in events:
        claim = _own_claim(event)
        if claim is not None:
            versions[(event.source_ref or claim, claim)].append((origin, event))
    ended: list[Sourced] = []
    for (_, claim), held in versions.items():
        ordered = sorted(held, key=lambda item: (item[1].recorded_at, item[1].event_id))
        for (_, earlier), (origin, later) in pairwise(ordered):
            if later.subject_id != earlier.subject_id and later.recorded_at > earlier.recorded_at:
                ended.append((origin, _ending(earlier, later, claim)))
    return ended


def _own_claim(event: Event) -> str | None:
    """The claim a record of a resource is about when it is the resource's own (an allergy, an
    order, a statement of its own), not news of another resource's (a statement `basedOn` an
    order, an administration of one: a statement moved to another patient says nothing about
    where the order belongs)."""
    payload = event.payload
    claim = (
        payload.allergy_id
        if isinstance(payload, AllergyRecorded)
        else payload.prescription_id
        if isinstance(payload, MedicationPrescribed)
        else None
    )
    reference = event.source_ref or ""
    return claim if claim in (reference, reference.partition("/")[2]) else None


def _ending(earlier: Event, later: Event, claim: str) -> Event:
    """The event that ends `claim` for `earlier`'s patient when `later` names another one."""
    identity = f"{earlier.event_id}/{later.event_id}/moved"
    payload: AllergyStatusChanged | MedicationStopped
    if isinstance(earlier.payload, AllergyRecorded):
        payload = AllergyStatusChanged(
            allergy_id=claim,
            verification_status=VerificationStatus.ENTERED_IN_ERROR,
            reason=MOVED_REASON,
        )
    else:
        payload = MedicationStopped(
            prescription_id=claim, reason=MOVED_REASON, entered_in_error=True
        )
    return Event(
        event_id=str(uuid5(MOVED_NAMESPACE, identity)),
        tenant_id=earlier.tenant_id,
        subject_id=earlier.subject_id,
        actor=earlier.actor,
        type=EventType(type(payload).__name__),
        occurred_at=max(later.recorded_at, earlier.occurred_at),
        recorded_at=later.recorded_at,
        origin=earlier.origin,
        source_ref=earlier.source_ref,
        confidence=1.0,
        sensitivity=earlier.sensitivity,
        purpose=earlier.purpose,
        scope=earlier.scope,
        payload=payload,
    )
