"""One event through the whole pure pipeline: gate, fold, rules. The streaming agent and the
`uac replay` command both call `process`, so they cannot disagree."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from projections.clock import validity_changes
from projections.gate import Admitted, Decision, GateContext, admit
from projections.state import UserState, evolve
from projections.views import DEFAULT_POLICY, FoldPolicy
from rules.base import Rule, RuleRef, lifecycle, touched, transitions
from rules.claim_conflicts import ClaimConflictRule
from rules.drug_allergy import DrugAllergyRule
from rules.duplicate_therapy import DuplicateTherapyRule
from rules.knowledge.model import DrugKnowledge
from schemas.alerts import Alert, AlertStatus
from schemas.events import AcknowledgementAction, AlertAcknowledged, Event


def default_rules(knowledge: DrugKnowledge) -> tuple[Rule, ...]:
    return (DrugAllergyRule(knowledge), DuplicateTherapyRule(knowledge), ClaimConflictRule())


def registry(rules: Sequence[Rule]) -> tuple[RuleRef, ...]:
    """The rule registry: id, version, severity and description of every rule in use."""
    return tuple(rule.ref for rule in rules)


def evaluate(
    rules: Sequence[Rule], before: UserState, after: UserState, event: Event
) -> list[Alert]:
    """Every alert lifecycle record caused by the transition from `before` to `after`."""
    if after is before or after.erased:
        return []
    focus, timed = touched(before, event), validity_changes(before, after)
    alerts = [
        alert for rule in rules for alert in transitions(rule, before, after, event, focus, timed)
    ]
    return alerts + _acknowledgement(rules, after, event)


def _acknowledgement(rules: Sequence[Rule], state: UserState, event: Event) -> list[Alert]:
    """An acknowledgement or override of an alert that is currently raised."""
    if not isinstance(event.payload, AlertAcknowledged):
        return []
    ack = event.payload
    status = (
        AlertStatus.OVERRIDDEN
        if ack.action is AcknowledgementAction.OVERRIDDEN
        else AlertStatus.ACKNOWLEDGED
    )
    return [
        lifecycle(state, finding, status, event, ack.reason)
        for rule in rules
        for identifier, finding in rule.findings(state, None).items()
        if str(identifier) == ack.alert_id
    ]


@dataclass(frozen=True)
class Outcome:
    decision: Decision
    before: UserState
    after: UserState
    alerts: tuple[Alert, ...]


def process(
    state: UserState,
    event: Event,
    context: GateContext,
    rules: Sequence[Rule],
    policy: FoldPolicy = DEFAULT_POLICY,
) -> Outcome:
    decision = admit(event, state, context)
    if not isinstance(decision, Admitted):
        return Outcome(decision, state, state, ())
    after = evolve(state, event, policy)
    return Outcome(decision, state, after, tuple(evaluate(rules, state, after, event)))
