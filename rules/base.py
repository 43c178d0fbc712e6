"""Rules: pure functions of (before, after, event) that fire on transitions.

A rule describes the alert-worthy situations present in one state (`findings`); the shared
edge logic turns "present after but not before" into `raised` and "present before but not
after" into `resolved`. Alert ids are facts: uuid5 of tenant, subject, rule id and version, and
the claims that caused it, so a replay, a redelivery or another arrival order gives the same id.
A claim is used only for the purpose it was recorded for: a finding combines claims of one
purpose, and its alert carries that purpose (the purpose it may be read for).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Protocol, TypeGuard, runtime_checkable
from uuid import NAMESPACE_URL, UUID, uuid5

from projections.state import Kind, UserState, claim_address, unkeyed
from schemas.alerts import (
    ALERT_DEFAULT_PURPOSE,
    Alert,
    AlertStatus,
    DrugAllergyFinding,
    DuplicateTherapyFinding,
    Evidence,
)
from schemas.events import ClaimRetracted, Event
from schemas.severity import Severity

ALERT_NAMESPACE = uuid5(NAMESPACE_URL, "https://uac.example/alert")
Focus = frozenset[tuple[Kind, str]] | None
"""The claims an event touched; None means "look at everything"."""


@dataclass(frozen=True, slots=True)
class RuleRef:
    id: str
    version: int
    severity: Severity
    description: str


@dataclass(frozen=True, slots=True)
class Finding:
    """One alert-worthy situation, before it becomes a lifecycle record."""

    rule: RuleRef
    cause: tuple[str, ...]
    severity: Severity
    title: str
    detail: str
    evidence: tuple[Evidence, ...]
    purpose: str
    """The purpose every claim behind the finding was recorded for: a rule never combines
    claims of two purposes (a claim is used only for the purpose it was recorded for)."""
    drug_allergy: DrugAllergyFinding | None = None
    duplicate_therapy: DuplicateTherapyFinding | None = None


def shared_purpose(*claims: Event) -> str | None:
    """The purpose every one of `claims` was recorded for, or None when they were recorded for
    different purposes: a rule combines claims of one purpose only."""
    purposes = {claim.purpose for claim in claims}
    return purposes.pop() if len(purposes) == 1 else None


def alert_id(
    tenant_id: str,
    subject_id: str,
    rule: RuleRef,
    cause: Iterable[str],
    purpose: str = ALERT_DEFAULT_PURPOSE,
) -> UUID:
    """uuid5 of tenant, subject, rule id and version, the cause, and the purpose when it is not
    the default (`care`, the purpose of every alert before alerts carried one, keeps its ids):
    the same claims restated for another purpose are another alert, never a record of this one."""
    named = [] if purpose == ALERT_DEFAULT_PURPOSE else [f"purpose={purpose}"]
    key = "/".join([tenant_id, subject_id, rule.id, str(rule.version), *sorted(cause), *named])
    return uuid5(ALERT_NAMESPACE, key)


def finding_id(state: UserState, finding: Finding) -> UUID:
    """The alert id of `finding` in `state`."""
    return alert_id(state.tenant_id, state.subject_id, finding.rule, finding.cause, finding.purpose)


def lifecycle_id(alert: UUID, status: AlertStatus, trigger_event_id: str) -> UUID:
    return uuid5(ALERT_NAMESPACE, f"{alert}/{status.value}/{trigger_event_id}")


class Rule(Protocol):
    @property
    def ref(self) -> RuleRef: ...

    @property
    def watches(self) -> frozenset[Kind]:
        """The claim kinds a finding of this rule is made of: an event touching no claim of
        these kinds cannot raise or resolve one of its alerts."""
        ...

    def findings(self, state: UserState, focus: Focus) -> Mapping[UUID, Finding]:
        """Alert-worthy situations in `state`, limited to those involving `focus` claims."""
        ...


@runtime_checkable
class Reaching(Protocol):
    """A rule whose findings about some claims can change when other claims change (a pairing
    with the first-started of several duplicates moves on when that one stops)."""

    def reach(
        self, state: UserState, focus: frozenset[tuple[Kind, str]]
    ) -> frozenset[tuple[Kind, str]]:
        """The claims besides `focus` whose findings a change of the `focus` claims can change
        in `state`."""
        ...


_KIND_WORDS: Mapping[str, re.Pattern[str]] = {
    "allergy": re.compile(r"\ballerg(?:y|ies|ic)\b|过敏", re.IGNORECASE),
    "intolerance": re.compile(r"\bintoleran(?:ce|t)\b|不耐受", re.IGNORECASE),
}
"""A name that already says the kind ("Allergy to penicillin (finding)") is not preceded or
followed by it again ("the recorded Allergy to penicillin (finding)", not "... allergy")."""


def says_kind(kind: str, name: str) -> bool:
    """Whether an allergen's name says its kind, `allergy` or `intolerance` ("Allergy to
    penicillin (finding)")."""
    return _KIND_WORDS[kind].search(name) is not None


def kind_to(kind: str, substance: str) -> str:
    """An allergy or intolerance named by its kind and substance ("allergy to penicillin"), or
    by its substance alone when that says the kind ("Allergy to penicillin")."""
    return substance if says_kind(kind, substance) else f"{kind} to {substance}"


def evidence_of(event: Event, claim_id: str, role: str, description: str) -> Evidence:
    return Evidence(event_id=event.id, claim_id=claim_id, role=role, description=description)


def touched(before: UserState, event: Event) -> frozenset[tuple[Kind, str]]:
    """The claims `event` created or changed (a retraction touches the claim it retracts)."""
    if isinstance(event.payload, ClaimRetracted):
        target = before.events.get(event.payload.claim_id)
        address = None if target is None else claim_address(target)
    else:
        address = claim_address(event)
    return frozenset() if address is None else frozenset({address})


def lifecycle(
    state: UserState, finding: Finding, status: AlertStatus, event: Event, reason: str | None = None
) -> Alert:
    return lifecycle_record(
        state, finding, status, event.id, _conflict_began(state, finding, event), reason
    )


def _conflict_began(state: UserState, finding: Finding, event: Event) -> datetime:
    """When a step of the finding's lifecycle happened: when its cause first held (the latest
    start, `valid_from` or else the time it occurred, of its evidence), or the triggering
    event's time if later. An allergy learned late and dated before the drug does not date the
    alert before the drug was prescribed, and a correction dated before both does not date its
    resolution before the alert was raised."""
    starts = [event.occurred_at]
    for item in finding.evidence:
        source = state.events.get(item.event_id)
        if source is not None:
            starts.append(max(source.occurred_at, source.valid_from or source.occurred_at))
    return max(starts)


def lifecycle_record(
    state: UserState,
    finding: Finding,
    status: AlertStatus,
    trigger_id: str,
    occurred_at: datetime,
    reason: str | None = None,
) -> Alert:
    """The lifecycle record of `finding` in `state`, caused by `trigger_id` (an event id, or a
    re-judgement) at `occurred_at`."""
    identifier = finding_id(state, finding)
    return Alert(
        lifecycle_id=lifecycle_id(identifier, status, trigger_id),
        alert_id=identifier,
        tenant_id=state.tenant_id,
        subject_id=state.subject_id,
        rule_id=finding.rule.id,
        rule_version=finding.rule.version,
        status=status,
        severity=finding.severity,
        title=finding.title,
        detail=finding.detail,
        cause=tuple(sorted(finding.cause)),
        evidence=finding.evidence,
        drug_allergy=finding.drug_allergy,
        trigger_event_id=trigger_id,
        occurred_at=occurred_at,
        reason=reason,
        duplicate_therapy=finding.duplicate_therapy,
        purpose=finding.purpose,
    )


def _reaches(rule: Rule) -> TypeGuard[Reaching]:
    return _reaching(type(rule))


@cache
def _reaching(kind: type) -> bool:
    """Whether rules of this class reach further (an `isinstance` test against a protocol
    costs microseconds on every event; the class answers once)."""
    return issubclass(kind, Reaching)


@dataclass(frozen=True, slots=True)
class Judged:
    """What one rule finds about the claims an event touched, before and after it."""

    rule: Rule
    before: Mapping[UUID, Finding]
    after: Mapping[UUID, Finding]


def judged(
    rule: Rule, before: UserState, after: UserState, claims: frozenset[tuple[Kind, str]]
) -> Judged:
    """What `rule` finds about `claims` (and, for a rule that reaches further, the claims a
    change of them can move) before and after the transition."""
    if _reaches(rule):
        claims = claims | rule.reach(before, claims) | rule.reach(after, claims)
    return Judged(rule, rule.findings(before, claims), rule.findings(after, claims))


def transitions(
    judgement: Judged,
    after: UserState,
    event: Event,
    focus: frozenset[tuple[Kind, str]],
    timed: frozenset[tuple[Kind, str]],
) -> list[Alert]:
    """`raised` for findings new in `after`, `raised` again (saying what changed) for findings
    the event made grade differently (an allergy corrected to an intolerance, a criticality
    raised), `resolved` for findings gone from it; `focus` is what the event touched
    (`touched(before, event)`), `timed` the claims whose validity window opened or closed as
    the event moved the subject's time (`validity_changes`), and `judgement` what the rule
    finds about them. `evaluate` calls it only for the rules that watch a kind of those claims
    (no other rule's finding can change)."""
    old, new = judgement.before, judgement.after
    if not (old or new):
        return []
    cause = _CauseOfChange(event, after, focus, timed)
    raised = []
    for key in sorted(new.keys()):
        if key not in old:
            raised.append(lifecycle(after, new[key], AlertStatus.RAISED, event))
        elif change := regrading(old[key], new[key]):
            reason = f"{cause.of(new[key])} changed the judgement: {change}"
            raised.append(lifecycle(after, new[key], AlertStatus.RAISED, event, reason))
    gone = sorted(old.keys() - new.keys())
    widened = {key: set(new[key].cause) for key in new.keys() - old.keys()} if gone else {}
    resolved = [
        lifecycle(after, old[key], AlertStatus.RESOLVED, event, cause.ending(old[key], widened))
        for key in gone
    ]
    return raised + resolved


@dataclass(frozen=True, slots=True)
class _CauseOfChange:
    """Names what changed a finding: the event, or (when the event touched none of the
    finding's claims, those of its cause and its evidence, and the validity window of one of
    them opened or closed) time."""

    event: Event
    after: UserState
    focus: frozenset[tuple[Kind, str]]
    timed: frozenset[tuple[Kind, str]]

    def of(self, finding: Finding) -> str:
        named = f"{self.event.type.value} {self.event.id}"
        claims = {*finding.cause, *(f"{item.role}:{item.claim_id}" for item in finding.evidence)}
        if any(f"{kind.value}:{unkeyed(key)}" in claims for kind, key in self.focus):
            return named
        if any(self._names(kind, key, claims) for kind, key in self.timed):
            return f"time reaching {self.after.as_of.isoformat()} ({named})"
        return named

    def ending(self, finding: Finding, raised: Mapping[UUID, set[str]]) -> str:
        """Why `finding` no longer stands: its cause went away, or a claim joined it and the
        alert `raised` with the wider cause (a third disagreeing statement) takes its place."""
        cause = set(finding.cause)
        successor = min((key for key, wider in raised.items() if cause < wider), default=None)
        if successor is None:
            return f"{self.of(finding)} removed the cause"
        return f"{self.of(finding)} joined the cause: alert {successor} takes its place"

    def _names(self, kind: Kind, key: str, claims: set[str]) -> bool:
        """Whether one of `claims` names the claim at (kind, key) as a cause names it: by its
        key (an allergy's id) or by the id of an event stated about it (a preference's
        statements, however many)."""
        timeline = self.after.timelines(kind).get(key)
        prefix, bare = f"{kind.value}:", unkeyed(key)
        return any(
            claim.startswith(prefix)
            and (
                (name := claim[len(prefix) :]) == bare
                or (timeline is not None and name in timeline.members)
            )
            for claim in claims
        )


class Graded(Protocol):
    """A judgement of a cause: a finding, or the alert record that carries one."""

    @property
    def severity(self) -> Severity: ...

    @property
    def drug_allergy(self) -> DrugAllergyFinding | None: ...


def regrading(before: Graded, after: Graded) -> str:
    """How `after` grades the cause differently from `before`, e.g. `severity critical ->
    warning, level same_class -> partial` ("" when it does not)."""
    changes = []
    if before.severity is not after.severity:
        changes.append(f"severity {before.severity.value} -> {after.severity.value}")
    old, new = _level(before), _level(after)
    if old != new:
        changes.append(f"level {old} -> {new}")
    return ", ".join(changes)


def _level(graded: Graded) -> str | None:
    return graded.drug_allergy.level if graded.drug_allergy else None
