"""One event through the whole pure pipeline: gate, fold, rules. The streaming agent and the
`uac replay` command both call `process`, so they cannot disagree."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from projections.clock import validity_changes
from projections.gate import Admitted, Decision, GateContext, admit
from projections.state import Kind, UserState, evolve, keyed_for
from projections.views import DEFAULT_POLICY, AcknowledgementView, FoldPolicy
from rules.allergy_list import AllergyListRule
from rules.base import Finding, Rule, RuleRef, lifecycle, lifecycle_id, touched, transitions
from rules.claim_conflicts import ClaimConflictRule
from rules.drug_allergy import DrugAllergyRule
from rules.duplicate_therapy import DuplicateTherapyRule
from rules.follow_ups import FollowUpBeforeItsClaimRule
from rules.knowledge.model import DrugKnowledge
from rules.polypharmacy import PolypharmacyRule
from schemas.alerts import Alert, AlertStatus
from schemas.events import AcknowledgementAction, AlertAcknowledged, ClaimRetracted, Event


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
    rules: Sequence[Rule], before: UserState, after: UserState, event: Event
) -> list[Alert]:
    """Every alert lifecycle record caused by the transition from `before` to `after`."""
    if after is before or after.erased:
        return []
    focus, timed = touched(before, event), validity_changes(before, after)
    kinds = {kind for kind, _ in (focus | timed if timed else focus)}
    alerts = [
        alert
        for rule in rules
        if not rule.watches.isdisjoint(kinds)
        for alert in transitions(rule, before, after, event, focus, timed)
    ]
    standing = [
        acknowledged
        for alert in alerts
        if (acknowledged := _standing_acknowledgement(after, alert, event)) is not None
    ]
    return (
        alerts
        + standing
        + _acknowledgement(rules, after, event)
        + _acknowledgement_retracted(rules, before, after, event)
    )


def _status_of(action: AcknowledgementAction) -> AlertStatus:
    if action is AcknowledgementAction.OVERRIDDEN:
        return AlertStatus.OVERRIDDEN
    return AlertStatus.ACKNOWLEDGED


def _acknowledgement(rules: Sequence[Rule], state: UserState, event: Event) -> list[Alert]:
    """An acknowledgement or override of an alert that is currently raised, when it is the one
    that holds: one older in valid time than the acknowledgement the state already holds (it
    arrived late) changes nothing, so the alert's status follows the state. It acknowledges an
    alert of the purpose it was recorded for only (a claim is used only for its purpose)."""
    if not isinstance(event.payload, AlertAcknowledged):
        return []
    ack = event.payload
    held: AcknowledgementView | None = state.resolution(
        Kind.ACKNOWLEDGEMENT, keyed_for(Kind.ACKNOWLEDGEMENT, ack.alert_id, event.purpose)
    )
    if held is None or held.event.id != event.id:
        return []
    return [
        lifecycle(state, finding, _status_of(ack.action), event, ack.reason)
        for finding in _findings_of(rules, state, ack.alert_id)
        if finding.purpose == event.purpose
    ]


def _findings_of(rules: Sequence[Rule], state: UserState, alert_id: str) -> list[Finding]:
    """The finding of one alert id in `state` (none when its cause is not present)."""
    return [
        finding
        for rule in rules
        for identifier, finding in rule.findings(state, None).items()
        if str(identifier) == alert_id
    ]


def _standing_acknowledgement(state: UserState, alert: Alert, event: Event) -> Alert | None:
    """The acknowledgement or override the state already holds for an alert that is being
    raised or re-graded: one recorded before its alert was (a clinician's override at order
    sign, which reaches the log before the order), one of an earlier episode of the same
    alert, or one of the alert before its cause was graded differently. It holds until it is
    retracted, so the alert's status follows the state whatever order the events arrived in
    (an acknowledgement that arrives after the re-grade acknowledges the alert as re-graded)."""
    if alert.status is not AlertStatus.RAISED:
        return None
    held: AcknowledgementView | None = state.resolution(
        Kind.ACKNOWLEDGEMENT, keyed_for(Kind.ACKNOWLEDGEMENT, str(alert.alert_id), alert.purpose)
    )
    if held is None or held.event.id == event.id:
        return None
    status = _status_of(held.action)
    episode = f"{alert.trigger_event_id}+{held.event.id}"
    return alert.model_copy(
        update={
            "lifecycle_id": lifecycle_id(alert.alert_id, status, episode),
            "status": status,
            "trigger_event_id": held.event.id,
            "occurred_at": max(alert.occurred_at, held.event.occurred_at),
            "reason": held.reason,
        }
    )


def _acknowledgement_retracted(
    rules: Sequence[Rule], before: UserState, after: UserState, event: Event
) -> list[Alert]:
    """When the acknowledgement that held an alert still present is retracted, the alert takes
    the status of the acknowledgement that holds now (an earlier acceptance under a retracted
    override), or is `raised` again when none does."""
    if not isinstance(event.payload, ClaimRetracted):
        return []
    retracted = before.events.get(event.payload.claim_id)
    if retracted is None or not isinstance(retracted.payload, AlertAcknowledged):
        return []
    alert = retracted.payload.alert_id
    address = keyed_for(Kind.ACKNOWLEDGEMENT, alert, retracted.purpose)
    held_before: AcknowledgementView | None = before.resolution(Kind.ACKNOWLEDGEMENT, address)
    if held_before is None or held_before.event.id != retracted.id:
        return []
    held: AcknowledgementView | None = after.resolution(Kind.ACKNOWLEDGEMENT, address)
    retraction = f"{event.type.value} {event.id} retracted its acknowledgement"
    status = AlertStatus.RAISED if held is None else _status_of(held.action)
    reason = retraction if held is None else held.reason
    return [
        lifecycle(after, finding, status, event, reason)
        for finding in _findings_of(rules, after, alert)
        if finding.purpose == retracted.purpose
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
