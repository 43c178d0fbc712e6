"""A stop or status change dated before the prescription or allergy it follows. The fold reads a
claim's history in valid time, where such a follow-up comes first and follows nothing, so the
claim is held as it was recorded (the prescription stays active, the allergy keeps its
status: the safe reading). The follow-up is admitted in any order of arrival, so every order
gives one state; this rule makes it visible instead ("stopped on the 5th" sent as midnight,
for an order written at 09:00 that day). A follow-up that arrives before any record of its
claim waits for it and is flagged only once a record dated after it arrives."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import ClassVar, Final
from uuid import UUID

from projections.state import Kind, UserState, unkeyed
from rules.base import Finding, Focus, RuleRef, evidence_of, finding_id
from schemas.events import AllergyRecorded, Event, MedicationPrescribed
from schemas.severity import Severity

RULE = RuleRef(
    id="follow-up-before-its-claim",
    version=1,
    severity=Severity.WARNING,
    description=(
        "A medication stop or allergy status change is dated before every record of the "
        "prescription or allergy it follows: it is not applied (the claim holds as recorded) "
        "until it is corrected with a date at or after that record, or retracted."
    ),
)

_OPENING: Final = {Kind.MEDICATION: MedicationPrescribed, Kind.ALLERGY: AllergyRecorded}
"""The record a follow-up of each kind follows."""
_ROLE: Final = {Kind.MEDICATION: "medication_stop", Kind.ALLERGY: "allergy_status"}
_NAMES: Final = {
    Kind.MEDICATION: ("stop", "prescription", "the prescription is held as active"),
    Kind.ALLERGY: ("status change", "allergy", "the allergy keeps the status it was recorded with"),
}
"""What a follow-up of each kind is called, what it follows, and what holds meanwhile."""
_SUBJECT: Final = {Kind.MEDICATION: "drug", Kind.ALLERGY: "substance"}
"""The field of the record that names what it is about (the drug ordered, the allergen)."""


@dataclass(frozen=True)
class FollowUpBeforeItsClaimRule:
    ref: RuleRef = RULE
    watches: ClassVar[frozenset[Kind]] = frozenset(_OPENING)

    def findings(self, state: UserState, focus: Focus) -> Mapping[UUID, Finding]:
        found: dict[UUID, Finding] = {}
        for kind, key in _in_focus(state, focus):
            for claim, follow_up in _early_follow_ups(state, kind, key):
                finding = _finding(kind, unkeyed(key), claim, follow_up)
                found[finding_id(state, finding)] = finding
        return found


def _in_focus(state: UserState, focus: Focus) -> Iterator[tuple[Kind, str]]:
    if focus is None:
        for kind in _OPENING:
            yield from ((kind, key) for key in sorted(state.timelines(kind).keys()))
    else:
        yield from ((kind, key) for kind, key in sorted(focus) if kind in _OPENING)


def _early_follow_ups(state: UserState, kind: Kind, key: str) -> Iterator[tuple[Event, Event]]:
    """The claim's earliest record, with each follow-up that counts and sorts before it: one
    dated before it (at one instant a record sorts before its follow-ups, `CAUSAL_RANK`)."""
    timeline = state.timelines(kind).get(key)
    if timeline is None:
        return
    members = timeline.effective()
    for position, member in enumerate(members):
        if isinstance(member.payload, _OPENING[kind]):
            yield from ((member, early) for early in members[:position])
            return


def _finding(kind: Kind, claim_id: str, claim: Event, follow_up: Event) -> Finding:
    role = _ROLE[kind]
    follow_up_name, claim_name, held = _NAMES[kind]
    subject = str(getattr(claim.payload, _SUBJECT[kind]))
    return Finding(
        rule=RULE,
        cause=(f"{kind.value}:{claim_id}", f"{role}:{follow_up.id}"),
        severity=RULE.severity,
        title=(
            f"{follow_up_name.capitalize()} dated before the {claim_name} {claim_id!r} "
            f"({subject}) it follows"
        ),
        detail=(
            f"{follow_up.type.value} {follow_up.id} at {follow_up.occurred_at.isoformat()} is "
            f"dated before the {claim.type.value} {claim.id} ({claim.occurred_at.isoformat()}): "
            f"a claim's history is read in valid time, so it is not applied and {held}; correct "
            "it (supersedes) with a date at or after that record, or retract it"
        ),
        evidence=(
            evidence_of(claim, claim_id, kind.value, subject),
            evidence_of(
                follow_up,
                claim_id,
                role,
                f"{follow_up_name} dated {follow_up.occurred_at.isoformat()}",
            ),
        ),
        purpose=claim.purpose,
    )
