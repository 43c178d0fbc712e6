"""A record moved to another patient: a later version of a resource that names another patient.

An allergy or an order filed under the wrong patient is corrected at the source by updating the
resource's `patient`/`subject`. Each version maps to events of the patient it names, so without
more the first patient would keep the claim: an allergy that is not theirs, alerts on their
orders. So where, in one input set, a version of a resource names another patient than the
version before it, the claim ends for the earlier patient at the later version's time: an
allergy becomes entered-in-error, a prescription is stopped (reason `entered-in-error: moved to
another patient`). The record names neither the other patient nor the new version's content.
Versions recorded at one time cannot be ordered, so no move is read between them.

A later version that is not imported (skipped by design: an order now `doNotPerform`, a
proposal or a draft, a statement now not-taken) would leave the earlier version in force
without a word: each is reported, naming the record and why (`left_in_force`). One whose
subject is no longer a Patient (a Group) is not the patient's record any more: it ends the
claim as a move does. The others still speak of the same patient, and what they change is not
read: the earlier version, and its alerts, stay (the safe reading), and the line asks for a
check at the source.

Versions imported by earlier commands are not in the input set: a move across imports is not
seen (import the resource's history together, e.g. a history Bundle).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
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
NOT_A_PATIENT_REASON: Final = "entered-in-error: moved to a subject that is not a patient"

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
                ending = _ending(earlier, claim, later.recorded_at, later.event_id, MOVED_REASON)
                ended.append((origin, ending))
    return ended


@dataclass(frozen=True)
class SkippedVersion:
    """A version of a claim resource that was skipped by design, and why."""

    origin: str
    source_ref: str
    """The record, `ResourceType/id`."""
    recorded_at: datetime | None
    """When it was recorded (None: cannot be told)."""
    version: str | None
    """Its `meta.versionId`, if it has one."""
    reason: str
    not_for_a_patient: bool
    """Its subject is not a Patient (a Group)."""


Said = tuple[str, str, str]
"""(where it came from, the record, what is said of it)."""


def left_in_force(
    events: Sequence[Sourced], skipped: Sequence[SkippedVersion]
) -> tuple[list[Sourced], list[Said]]:
    """For each skipped version not older than the newest imported version of its record: a
    line saying the earlier version stays in force, or, for one no longer about a patient, the
    event that ends the claim for the earlier patient (as a move does) and a line saying so."""
    newest: dict[str, Event] = {}
    for _, event in events:
        claim = _own_claim(event)
        held = newest.get(event.source_ref or "")
        if claim is not None and event.source_ref and (held is None or _later(event, held)):
            newest[event.source_ref] = event
    ended: list[Sourced] = []
    said: list[Said] = []
    for version in skipped:
        earlier = newest.get(version.source_ref)
        at = version.recorded_at
        if earlier is None or (at is not None and at < earlier.recorded_at):
            continue
        named = "a later version" + (
            f" (meta.versionId {version.version})" if version.version else ""
        )
        if version.not_for_a_patient and at is not None and at > earlier.recorded_at:
            claim = _own_claim(earlier) or ""
            key = f"{version.source_ref}@{at.isoformat()}"
            ended.append((version.origin, _ending(earlier, claim, at, key, NOT_A_PATIENT_REASON)))
            line = (
                f"{named} is skipped ({version.reason}): it is no "
                f"longer the record of patient {earlier.subject_id}, so it ends there as a move "
                "to another patient does"
            )
        else:
            line = (
                f"{named} is skipped ({version.reason}): the earlier "
                "version imported stays in force, and its alerts with it; check the record at "
                "the source"
            )
        said.append((version.origin, version.source_ref, line))
    return ended, said


def _later(event: Event, than: Event) -> bool:
    return (event.recorded_at, event.event_id) > (than.recorded_at, than.event_id)


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


def _ending(earlier: Event, claim: str, at: datetime, later: str, reason: str) -> Event:
    """The event that ends `claim` for `earlier`'s patient at `at`, when the later version
    `later` (its event id, or what identifies it) is no longer theirs."""
    identity = f"{earlier.event_id}/{later}/moved"
    payload: AllergyStatusChanged | MedicationStopped
    if isinstance(earlier.payload, AllergyRecorded):
        payload = AllergyStatusChanged(
            allergy_id=claim,
            verification_status=VerificationStatus.ENTERED_IN_ERROR,
            reason=reason,
        )
    else:
        payload = MedicationStopped(prescription_id=claim, reason=reason, entered_in_error=True)
    return Event(
        event_id=str(uuid5(MOVED_NAMESPACE, identity)),
        tenant_id=earlier.tenant_id,
        subject_id=earlier.subject_id,
        actor=earlier.actor,
        type=EventType(type(payload).__name__),
        occurred_at=max(at, earlier.occurred_at),
        recorded_at=at,
        origin=earlier.origin,
        source_ref=earlier.source_ref,
        confidence=1.0,
        sensitivity=earlier.sensitivity,
        purpose=earlier.purpose,
        scope=earlier.scope,
        payload=payload,
    )
