"""One event through the whole pure pipeline: gate, fold, rules. The streaming agent and the
`uac replay` command both call `process`, so they cannot disagree."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from projections.clock import bounds_passed_on_the_way, clock_event, validity_changes
from projections.gate import Admitted, Decision, GateContext, admit
from projections.state import UserState, evolve
from projections.views import DEFAULT_POLICY, FoldPolicy
from rules.acknowledgements import acknowledged, restated, retracted, with_standing
from rules.allergy_list import AllergyListRule
from rules.base import Rule, RuleRef, judged, touched, transitions
from rules.claim_conflicts import ClaimConflictRule
from rules.drug_allergy import DrugAllergyRule
from rules.duplicate_therapy import DuplicateTherapyRule
from rules.follow_ups import FollowUpBeforeItsClaimRule
from rules.knowledge.model import DrugKnowledge
from rules.polypharmacy import PolypharmacyRule
from schemas.alerts import Alert
from schemas.events import Event


def default_rules(
    knowledge: DrugKnowledge, policy: FoldPolicy = DEFAULT_POLICY
) -> tuple[Rule, ...]:
    """The rules in use, judging with `knowledge`; `policy` is the fold's conflict policy."""
    return (
        DrugAllergyRule(knowledge),
        DuplicateTherapyRule(knowledge),
        AllergyListRule(knowledge),
        ClaimConflictRule(policy=policy),
        PolypharmacyRule(knowledge),
        FollowUpBeforeItsClaimRule(),
    )


def registry(rules: Sequence[Rule]) -> tuple[RuleRef, ...]:
    """The rule registry: id, version, severity and description of every rule in use."""
    return tuple(rule.ref for rule in rules)


def evaluate(
    rules: Sequence[Rule],
    before: UserState,
    after: UserState,
    event: Event,
    policy: FoldPolicy = DEFAULT_POLICY,
) -> list[Alert]:
    """Every alert lifecycle record caused by the transition from `before` to `after`."""
    if after is before or after.erased:
        return []
    focus, timed = touched(before, event), validity_changes(before, after)
    claims = focus | timed if timed else focus
    kinds = {kind for kind, _ in claims}
    judgements = [
        judged(rule, before, after, claims) for rule in rules if not rule.watches.isdisjoint(kinds)
    ]
    alerts = [
        alert
        for judgement in judgements
        for alert in transitions(judgement, after, event, focus, timed)
    ]
    records = (
        with_standing(rules, after, alerts, event.id, policy)
        + acknowledged(rules, before, after, event, policy)
        + retracted(rules, before, after, event, policy)
    )
    return records + restated(rules, before, after, event, judgements, records, policy)


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
    alerts: list[Alert] = []
    moved = state
    for moment in bounds_passed_on_the_way(state, after):
        tick = clock_event(moved, moment, event.recorded_at)
        passing = evolve(moved, tick, policy)
        alerts += evaluate(rules, moved, passing, tick, policy)
        moved = passing
    alerts += evaluate(rules, moved, after, event, policy)
    return Outcome(decision, state, after, tuple(alerts))
