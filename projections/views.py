"""What each kind of claim resolves to, and the pure fold step that resolves it.

Steps see a key's events in valid-time order (see `timeline.py`); the conflict policy of
DESIGN §4.4 lives here: explicit beats inferred, verified beats user statements, an explicit
correction (`supersedes`) wins outright (unless another correction holds: then the two are
weighed like any two statements), and a disagreement that cannot be settled opens a visible
`needs_confirmation` conflict instead of being lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple
from uuid import NAMESPACE_URL, uuid5

from projections.timeline import Step, new_tuple
from schemas.events import (
    AcknowledgementAction,
    AlertAcknowledged,
    AllergyCategory,
    AllergyRecorded,
    AllergyStatusChanged,
    AllergyType,
    ClinicalStatus,
    Coding,
    ConsentChanged,
    Criticality,
    Event,
    FactAsserted,
    FactValue,
    MedicationPrescribed,
    MedicationStopped,
    Origin,
    PreferenceStated,
    Reaction,
    ReactionSeverity,
    TravelRecorded,
    VerificationStatus,
)
from schemas.severe_reactions import life_threatening_reaction

CONFLICT_NAMESPACE = uuid5(NAMESPACE_URL, "https://uac.example/conflict")

ORIGIN_RANK: dict[Origin, int] = {
    Origin.INFERRED: 0,
    Origin.OBSERVED_BEHAVIOR: 1,
    Origin.EXPLICIT_STATEMENT: 2,
    Origin.USER_PROVIDED_FACT: 2,
    Origin.IMPORTED: 2,
    Origin.VERIFIED_SOURCE: 3,
}
EXPLICIT_RANK = 2


@dataclass(frozen=True, slots=True)
class FoldPolicy:
    """Tunable parts of the conflict policy. Part of what a replay must reproduce."""

    reversal_window: timedelta = timedelta(days=7)


DEFAULT_POLICY = FoldPolicy()


class AllergyView(NamedTuple):
    allergy_id: str
    substance: str
    codes: tuple[Coding, ...]
    allergy_type: AllergyType | None
    categories: tuple[AllergyCategory, ...]
    criticality: Criticality | None
    verification_status: VerificationStatus
    clinical_status: ClinicalStatus | None
    negated: bool
    reactions: tuple[Reaction, ...]
    record: Event
    last_change: Event

    @property
    def in_force(self) -> bool:
        """The record stands: not refuted or entered in error, not resolved or inactive."""
        return self.verification_status not in (
            VerificationStatus.REFUTED,
            VerificationStatus.ENTERED_IN_ERROR,
        ) and self.clinical_status not in (ClinicalStatus.RESOLVED, ClinicalStatus.INACTIVE)

    @property
    def active(self) -> bool:
        """A real, current allergy: not a negation, and in force."""
        return not self.negated and self.in_force

    def changed_by(self, change: AllergyStatusChanged, event: Event) -> AllergyView:
        """This allergy after a status change (a status the change leaves out is kept)."""
        return AllergyView(
            self.allergy_id,
            self.substance,
            self.codes,
            self.allergy_type,
            self.categories,
            self.criticality,
            change.verification_status or self.verification_status,
            change.clinical_status or self.clinical_status,
            self.negated,
            self.reactions,
            self.record,
            event,
        )


def known_before(event: Event, held: Event) -> bool:
    """Whether `event` was recorded before `held` (and is not a correction)."""
    return event.recorded_at < held.recorded_at and not event.supersedes


def older_version(event: Event, held: Event, changed_by: Event | None) -> bool:
    """Whether `event`, which the fold meets after `held` (the record a view holds) because it
    is valid later, is an older version of it that newer knowledge replaced, and so changes
    nothing. That holds for an event recorded before `held` when both come from one source
    record (`source_ref`: versions of one imported resource, whose newest version says what
    holds), and for a record of the claim (a prescription, an allergy record) recorded before
    `held` while nothing has changed `held` since; never when `held` is a correction
    (`supersedes`: it speaks for the version it corrects, not for a later one) or of a lower
    origin rank than `event` (a guessed version learned later does not undo a verified one
    valid later). Otherwise late events are applied in valid-time order (DESIGN 4.4): a stop
    or status change from another source, or from a producer that names none, applies
    whenever it was learned (a prescription learned after its stop, a backfill dated before
    it, does not bring back the drug the stop ended), and a record dated after a stop or
    status change (`changed_by`) restates the claim after it (a restart, a re-recording),
    even when `held` was learned later (a backfill of the first course)."""
    if event.source_ref is not None and any(
        later is not None and later.source_ref == event.source_ref and _learned_later(later, event)
        for later in (held, changed_by)
    ):
        return True
    return (
        changed_by is None
        and not isinstance(event.payload, (MedicationStopped, AllergyStatusChanged))
        and _learned_later(held, event)
    )


def _learned_later(later: Event, event: Event) -> bool:
    """Whether `later` is newer knowledge than `event` that `event` cannot undo: `event` was
    recorded first, `later` is no correction (it speaks for the version it corrects) and not of
    a lower origin rank. With one `source_ref`, `later` is that source's newest word: a record
    version, or a stop or status change it sent last, dated before a version it had sent
    earlier (a refutation backdated after its confirmation, a stop sent after its restart of
    the order)."""
    return (
        known_before(event, later)
        and later.supersedes is None
        and ORIGIN_RANK[event.origin] <= ORIGIN_RANK[later.origin]
    )


def weaker_than(event: Event, held: Event) -> bool:
    """Whether `event` is an inferred or observed claim and `held` an explicit, imported or
    verified one: the weaker never overrides the stronger (it stays in the history, unused)."""
    return ORIGIN_RANK[event.origin] < EXPLICIT_RANK <= ORIGIN_RANK[held.origin]


def outranked(event: Event, held: Event) -> bool:
    """Whether `event` yields to `held`: an origin of lower rank never overrides a higher one
    (verified > stated, user-provided or imported > observed > inferred; DESIGN §4.4), so a
    patient app's refutation of a verified allergy does not resolve its alert. A correction
    (`supersedes`) is the subject's or producer's deliberate rectification: only an inferred or
    observed one yields (`weaker_than`; the gate refuses it)."""
    if event.supersedes is not None:
        return weaker_than(event, held)
    return ORIGIN_RANK[event.origin] < ORIGIN_RANK[held.origin]


def gravity(record: AllergyRecorded) -> tuple[bool, bool, int, bool, bool, bool]:
    """How grave an allergy record is, for telling two versions of it apart: an allergy before a
    "no known allergy" statement, one in force (not refuted, entered in error, inactive or
    resolved) before one that is not, then by criticality (high, unable to assess, low or
    unsaid), a severe reaction (said `severe`, or one that is severe whatever severity it was
    given: anaphylaxis, angioedema and their signs, `schemas.severe_reactions`), an allergy
    before an intolerance, and confirmed before unconfirmed."""
    in_force = record.verification_status in _IN_FORCE_VERIFICATION and (
        record.clinical_status in (None, ClinicalStatus.ACTIVE)
    )
    return (
        not record.negated,
        in_force,
        _CRITICALITY_GRAVITY[record.criticality],
        any(
            reaction.severity is ReactionSeverity.SEVERE
            or life_threatening_reaction(reaction.manifestation) is not None
            for reaction in record.reactions
        ),
        record.allergy_type is not AllergyType.INTOLERANCE,
        record.verification_status is VerificationStatus.CONFIRMED,
    )


_IN_FORCE_VERIFICATION = frozenset({VerificationStatus.CONFIRMED, VerificationStatus.UNCONFIRMED})
_CRITICALITY_GRAVITY: dict[Criticality | None, int] = {
    Criticality.HIGH: 3,
    Criticality.UNABLE_TO_ASSESS: 2,
    None: 1,
    Criticality.LOW: 0,
}
"""Unsaid criticality is graver than a criticality said to be low (it does not lower an alert)."""


def lighter_version(event: Event, held: Event) -> bool:
    """Whether `event` is a version of the allergy record `held` stated at the same instant (the
    same valid and recording times and origin rank, neither a correction) and less grave
    (`gravity`, then its content): of two versions nothing else orders, the graver is held,
    whatever their event ids (an anaphylaxis version is not dropped for a mild one by the
    accident of an id's sort order). Of two ranks, the higher holds (`outranked`)."""
    payload, kept = event.payload, held.payload
    return (
        isinstance(payload, AllergyRecorded)
        and isinstance(kept, AllergyRecorded)
        and event.supersedes is None
        and held.supersedes is None
        and event.occurred_at == held.occurred_at
        and event.recorded_at == held.recorded_at
        and ORIGIN_RANK[event.origin] == ORIGIN_RANK[held.origin]
        and (gravity(payload), payload.model_dump_json()) < (gravity(kept), kept.model_dump_json())
    )


def _status_change(view: AllergyView) -> Event | None:
    """The status change that last changed the allergy's record, if one did."""
    return None if view.last_change is view.record else view.last_change


def step_allergy(view: AllergyView | None, event: Event) -> AllergyView | None:
    """The allergy after `event` (of the allergy's purpose: see `PURPOSE_BOUND`)."""
    payload = event.payload
    if view is not None and (
        older_version(event, view.record, _status_change(view))
        or outranked(event, view.record)
        or outranked(event, view.last_change)
        or lighter_version(event, view.record)
    ):
        return view
    if isinstance(payload, AllergyRecorded):
        return new_tuple(
            AllergyView,
            (
                payload.allergy_id,
                payload.substance,
                payload.codes,
                payload.allergy_type,
                payload.categories,
                payload.criticality,
                payload.verification_status,
                payload.clinical_status,
                payload.negated,
                payload.reactions,
                event,
                event,
            ),
        )
    if isinstance(payload, AllergyStatusChanged) and view is not None:
        return view.changed_by(payload, event)
    return view


class MedicationView(NamedTuple):
    prescription_id: str
    drug: str
    codes: tuple[Coding, ...]
    dose: str | None
    route: str | None
    prescribed: Event
    stopped: Event | None
    voided: Event | None
    """The stop that says the prescription was entered in error (it never held), whether it
    ended the prescription or came after the stop that did."""

    @property
    def active(self) -> bool:
        return self.stopped is None

    @property
    def entered_in_error(self) -> bool:
        return self.voided is not None

    def stopped_by(self, event: Event, payload: MedicationStopped) -> MedicationView:
        voids = payload.entered_in_error and self.voided is None
        if self.stopped is not None and not voids:
            return self
        return MedicationView(
            self.prescription_id,
            self.drug,
            self.codes,
            self.dose,
            self.route,
            self.prescribed,
            self.stopped or event,
            event if voids else self.voided,
        )

    @property
    def stop_reason(self) -> str | None:
        if self.stopped is None or not isinstance(self.stopped.payload, MedicationStopped):
            return None
        return self.stopped.payload.reason


def step_medication(view: MedicationView | None, event: Event) -> MedicationView | None:
    """The prescription after `event` (of the prescription's purpose: see `PURPOSE_BOUND`)."""
    payload = event.payload
    if view is not None and (
        older_version(event, view.prescribed, view.stopped)
        or outranked(event, view.prescribed)
        or (view.stopped is not None and outranked(event, view.stopped))
    ):
        return view
    if isinstance(payload, MedicationPrescribed):
        return new_tuple(
            MedicationView,
            (
                payload.prescription_id,
                payload.drug,
                payload.codes,
                payload.dose,
                payload.route,
                event,
                None,
                None,
            ),
        )
    if isinstance(payload, MedicationStopped) and view is not None:
        return view.stopped_by(event, payload)
    return view


class TripView(NamedTuple):
    trip: TravelRecorded
    event: Event


def step_trip(view: TripView | None, event: Event) -> TripView | None:
    payload = event.payload
    if isinstance(payload, TravelRecorded):
        return new_tuple(TripView, (payload, event))
    return view


class Conflict(NamedTuple):
    """Claims about one key that the policy will not settle on its own: the held one and each
    statement that disputes it with a value of its own."""

    kind: str
    key: str
    held: Event
    challenger: Event
    """The latest disputing statement."""
    earlier: tuple[Event, ...] = ()
    """Statements that disputed the held claim before `challenger`, each with another value,
    still unsettled (a third disagreeing statement joins the dispute, it does not drop one)."""

    @property
    def challengers(self) -> tuple[Event, ...]:
        return (*self.earlier, self.challenger)

    @property
    def claim_ids(self) -> tuple[str, ...]:
        return (self.held.id, *(event.id for event in self.challengers))

    @property
    def conflict_id(self) -> str:
        return str(uuid5(CONFLICT_NAMESPACE, "/".join((self.kind, self.key, *self.claim_ids))))


class ClaimView(NamedTuple):
    """The resolved value of a preference or fact key."""

    key: str
    value: FactValue
    winner: Event
    conflict: Conflict | None


_VALUED = (PreferenceStated, FactAsserted)


def claim_value(event: Event) -> FactValue:
    payload = event.payload
    if isinstance(payload, _VALUED):
        return payload.value
    raise TypeError(f"{event.type} carries no claim value")


def _is_explicit(event: Event) -> bool:
    return ORIGIN_RANK[event.origin] >= EXPLICIT_RANK


def _wins(event: Event) -> ClaimView:
    payload = event.payload
    if isinstance(payload, _VALUED):
        return new_tuple(ClaimView, (payload.key, payload.value, event, None))
    raise TypeError(f"{event.type} carries no claim value")


def _challenged(view: ClaimView, kind: str, event: Event) -> ClaimView:
    """The held claim, now disputed by `event` too."""
    earlier = () if view.conflict is None else view.conflict.challengers
    conflict = Conflict(kind, view.key, view.winner, event, earlier)
    return ClaimView(view.key, view.value, view.winner, conflict)


def _disputes_with(view: ClaimView, value: FactValue) -> bool:
    """Whether `value` is one a statement already disputes the held claim with."""
    return view.conflict is not None and any(
        same_value(value, claim_value(challenger)) for challenger in view.conflict.challengers
    )


def expired_by(held: Event, event: Event) -> bool:
    """Whether the held claim's validity window closed before `event`'s claim begins: an
    expired statement is not defended against a newer one (no conflict, whatever its rank)."""
    begins = event.valid_from or event.occurred_at
    return held.valid_until is not None and held.valid_until <= begins


def replaces(view: ClaimView, event: Event) -> bool:
    """Whether `event` takes the key from the held claim outright: a correction (`supersedes`),
    or a claim after the held one expired. A correction does not when the held claim is itself
    a correction (which `event` does not correct: what a claim corrects is never folded): two
    corrections of one claim, or of a claim and of a correction of it, are weighed like any two
    statements (a disagreement opens a conflict, a higher rank wins), so neither is lost."""
    if expired_by(view.winner, event):
        return True
    return event.supersedes is not None and view.winner.supersedes is None


def same_record(held: Event, event: Event) -> bool:
    """Whether two statements of a key are versions of one source record (the same
    `source_ref`, such as an imported Patient's versions) recorded at different times: the
    newer version is newer knowledge of that record and replaces the older, whatever their
    valid times, instead of disputing it (a patient's new home address is no conflict with the
    address the record held before)."""
    return (
        event.source_ref is not None
        and event.source_ref == held.source_ref
        and event.recorded_at != held.recorded_at
    )


def same_value(first: object, second: object) -> bool:
    """Equal claim values, a boolean never equal to a number (Python's `True == 1`): a fact
    `true` after `1` is a different statement, not a repeat."""
    return first == second and isinstance(first, bool) == isinstance(second, bool)


def preference_step(policy: FoldPolicy = DEFAULT_POLICY) -> Step[ClaimView]:
    """Latest explicit statement wins; a quick explicit reversal asks for confirmation; of two
    versions of one source record (`same_record`) the one recorded later holds."""

    def step(view: ClaimView | None, event: Event) -> ClaimView | None:
        if view is None or replaces(view, event):
            return _wins(event)
        held = view.winner
        if same_record(held, event):
            return _wins(event) if event.recorded_at > held.recorded_at else view
        value = claim_value(event)
        if not _is_explicit(event):
            return view if _is_explicit(held) else _wins(event)
        if not _is_explicit(held) or same_value(value, view.value):
            return _wins(event)
        if _disputes_with(view, value):
            return _wins(event)
        if event.occurred_at - held.occurred_at <= policy.reversal_window:
            return _challenged(view, "preference", event)
        return _wins(event)

    return step


def step_fact(view: ClaimView | None, event: Event) -> ClaimView | None:
    """Higher rank wins (verified > stated > observed > inferred); equal ranks may conflict. A
    restatement of the value that already disputes the held one is the same disagreement: it
    keeps the conflict (and its alert) as it is."""
    if view is None or replaces(view, event):
        return _wins(event)
    if same_record(view.winner, event):
        return _wins(event) if event.recorded_at > view.winner.recorded_at else view
    held_rank, rank = ORIGIN_RANK[view.winner.origin], ORIGIN_RANK[event.origin]
    if rank > held_rank:
        return _wins(event)
    if rank < held_rank:
        return view
    if same_value(claim_value(event), view.value):
        return (
            new_tuple(ClaimView, (view.key, view.value, event, None))
            if view.conflict is None
            else view
        )
    if _disputes_with(view, claim_value(event)):
        return view
    return _challenged(view, "fact", event)


class ConsentView(NamedTuple):
    purpose: str
    granted: bool
    special_category: bool
    event: Event


def step_consent(view: ConsentView | None, event: Event) -> ConsentView | None:
    if isinstance(event.payload, ConsentChanged):
        consent = event.payload
        return new_tuple(
            ConsentView, (consent.purpose, consent.granted, consent.special_category, event)
        )
    return view


class AcknowledgementView(NamedTuple):
    alert_id: str
    action: AcknowledgementAction
    reason: str | None
    event: Event


def step_acknowledgement(
    view: AcknowledgementView | None, event: Event
) -> AcknowledgementView | None:
    if isinstance(event.payload, AlertAcknowledged):
        ack = event.payload
        return new_tuple(AcknowledgementView, (ack.alert_id, ack.action, ack.reason, event))
    return view


def valid_at(event: Event, moment: datetime) -> bool:
    """Whether a claim's validity window (if any) covers `moment`."""
    if event.valid_from is not None and moment < event.valid_from:
        return False
    return event.valid_until is None or moment < event.valid_until
