"""What an acknowledgement or override does to an alert's status.

An `AlertAcknowledged` answers the alert as it was graded when the person decided: accepting a
`warning` is no decision about a `critical`. So an acknowledgement covers the grade the alert
had when it was recorded (see `grade_answered`), and any milder one; an alert graded graver
later (the allergy confirmed, its criticality raised, a severe reaction recorded) is `raised`
again and needs a new acknowledgement, and is covered again if it is graded back. The grade is
a function of the subject's events, so the status follows the state whatever order the events
arrived in.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from uuid import UUID

from projections.clock import clock_event
from projections.state import (
    CLAIM_KEYS,
    Kind,
    UserState,
    evolve,
    initial_state,
    keyed_for,
    replay,
)
from projections.views import DEFAULT_POLICY, AcknowledgementView, FoldPolicy
from rules.base import Finding, Rule, finding_id, lifecycle, lifecycle_id
from schemas.alerts import Alert, AlertStatus, Severity
from schemas.events import AcknowledgementAction, AlertAcknowledged, ClaimRetracted, Event

_GRAVITY = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


def status_of(action: AcknowledgementAction) -> AlertStatus:
    if action is AcknowledgementAction.OVERRIDDEN:
        return AlertStatus.OVERRIDDEN
    return AlertStatus.ACKNOWLEDGED


def held_for(state: UserState, alert_id: str, purpose: str) -> AcknowledgementView | None:
    """The acknowledgement of `alert_id` that holds in `state` for `purpose`: the latest in
    valid time that is not retracted."""
    view: AcknowledgementView | None = state.resolution(
        Kind.ACKNOWLEDGEMENT, keyed_for(Kind.ACKNOWLEDGEMENT, alert_id, purpose)
    )
    return view


def findings_of(rules: Sequence[Rule], state: UserState, alert_id: str) -> list[Finding]:
    """The finding of one alert id in `state` (none when its cause is not present)."""
    return [
        finding
        for rule in rules
        for identifier, finding in rule.findings(state, None).items()
        if str(identifier) == alert_id
    ]


def grade_answered(
    rules: Sequence[Rule],
    state: UserState,
    rule_id: str,
    alert_id: UUID,
    held: AcknowledgementView,
    policy: FoldPolicy = DEFAULT_POLICY,
) -> Severity | None:
    """The grade of the alert `alert_id` of rule `rule_id` that the acknowledgement `held`
    answered: its grade in the state as it was known when the acknowledgement was recorded (the
    subject's events recorded before it, by `recorded_at` and then event id), or, for one
    recorded before its alert (an override at order sign that reaches UaC before the order),
    its grade when it was first found after it. None when the rule no longer finds the alert in
    either. Only the claims of the kinds the rule watches are folded (no other claim can change
    its findings), with the subject's time moved to where the whole record had it."""
    rule = [candidate for candidate in rules if candidate.ref.id == rule_id]
    watched = frozenset().union(*(candidate.watches for candidate in rule))
    mark = _recorded(held.event)
    events = state.events.values()
    moment = _latest_known(events, mark)
    ordered = sorted(_bearing_on(events, watched), key=_recorded)
    split = bisect_right(ordered, mark, key=_recorded)
    empty = initial_state(state.tenant_id, state.subject_id)
    seen = _moved_to(replay(ordered[:split], empty, policy), moment, policy)
    grade = _grade_in(rule, seen, alert_id)
    for event in ordered[split:]:
        if grade is not None:
            break
        moment = _latest_known(events, _recorded(event))
        seen = _moved_to(evolve(seen, event, policy), moment, policy)
        grade = _grade_in(rule, seen, alert_id)
    return grade


def with_standing(
    rules: Sequence[Rule],
    state: UserState,
    records: Sequence[Alert],
    trigger_id: str,
    policy: FoldPolicy = DEFAULT_POLICY,
    shown: Mapping[UUID, Alert] | None = None,
) -> list[Alert]:
    """`records` (lifecycle records the event or re-judgement `trigger_id` caused in `state`),
    then, for each alert raised or re-graded, the acknowledgement the state already holds for
    it when that covers its grade: one recorded before its alert was (an override at order
    sign), one of an earlier episode of the same alert, or one of the alert before its cause
    was graded differently. A raised alert graver than the acknowledgement answered says so in
    its reason and stays `raised`. `shown` holds the latest record of each alert in the stream,
    where known: an acknowledgement shown with a milder grade answered no graver one (a
    knowledge release that grades the alert graver raises it again)."""
    raised: list[Alert] = []
    standing: list[Alert] = []
    for record in records:
        held = _held_other(state, record, trigger_id)
        if held is None:
            raised.append(record)
            continue
        answered = _milder(
            grade_answered(rules, state, record.rule_id, record.alert_id, held, policy),
            _acknowledged_grade((shown or {}).get(record.alert_id)),
        )
        if answered is not None and not covers(answered, record.severity):
            raised.append(_unanswered(record, held, answered))
        else:
            raised.append(record)
            standing.append(_standing(record, held))
    return raised + standing


def acknowledged(
    rules: Sequence[Rule],
    state: UserState,
    event: Event,
    policy: FoldPolicy = DEFAULT_POLICY,
) -> list[Alert]:
    """An acknowledgement or override of an alert that is currently raised, when it is the one
    that holds and covers the alert's grade: one older in valid time than the acknowledgement
    the state already holds (it arrived late) changes nothing, nor does one that answered a
    milder grade than the alert has now, so the alert's status follows the state. It
    acknowledges an alert of the purpose it was recorded for only (a claim is used only for its
    purpose)."""
    if not isinstance(event.payload, AlertAcknowledged):
        return []
    ack = event.payload
    held = held_for(state, ack.alert_id, event.purpose)
    if held is None or held.event.id != event.id:
        return []
    return [
        lifecycle(state, finding, status_of(ack.action), event, ack.reason)
        for finding in findings_of(rules, state, ack.alert_id)
        if finding.purpose == event.purpose
        and covers(_answered(rules, state, finding, held, policy), finding.severity)
    ]


def retracted(
    rules: Sequence[Rule],
    before: UserState,
    after: UserState,
    event: Event,
    policy: FoldPolicy = DEFAULT_POLICY,
) -> list[Alert]:
    """When the acknowledgement that held an alert still present is retracted, the alert takes
    the status of the acknowledgement that holds now (an earlier acceptance under a retracted
    override) if that covers its grade, or is `raised` again."""
    if not isinstance(event.payload, ClaimRetracted):
        return []
    claim = before.events.get(event.payload.claim_id)
    if claim is None or not isinstance(claim.payload, AlertAcknowledged):
        return []
    alert = claim.payload.alert_id
    held_before = held_for(before, alert, claim.purpose)
    if held_before is None or held_before.event.id != claim.id:
        return []
    held = held_for(after, alert, claim.purpose)
    retraction = f"{event.type.value} {event.id} retracted its acknowledgement"
    records = []
    for finding in findings_of(rules, after, alert):
        if finding.purpose != claim.purpose:
            continue
        if held is not None and covers(
            _answered(rules, after, finding, held, policy), finding.severity
        ):
            records.append(lifecycle(after, finding, status_of(held.action), event, held.reason))
        else:
            records.append(lifecycle(after, finding, AlertStatus.RAISED, event, retraction))
    return records


def outgrown(
    rules: Sequence[Rule],
    state: UserState,
    record: Alert,
    severity: Severity,
    policy: FoldPolicy = DEFAULT_POLICY,
) -> str:
    """Why an alert whose latest record in the stream is `record`, acknowledged or overridden,
    is no longer so when graded `severity` ("" when it still is): the acknowledgement that
    holds answered a milder grade (an earlier build kept an acknowledgement across a graver
    re-grade)."""
    if _acknowledged_grade(record) is None:
        return ""
    held = held_for(state, str(record.alert_id), record.purpose)
    if held is None:
        return ""
    answered = grade_answered(rules, state, record.rule_id, record.alert_id, held, policy)
    if answered is None or covers(answered, severity):
        return ""
    return f"acknowledged as {answered.value}, graded {severity.value}"


def covers(answered: Severity | None, severity: Severity) -> bool:
    """Whether an acknowledgement that answered the grade `answered` covers an alert graded
    `severity` (one whose grade it cannot tell covers it, as before alerts were graded)."""
    return answered is None or _GRAVITY[severity] <= _GRAVITY[answered]


def _recorded(event: Event) -> tuple[datetime, str]:
    return (event.recorded_at, event.event_id)


def _bearing_on(events: Iterable[Event], watched: frozenset[Kind]) -> list[Event]:
    """The events that make or change a claim of a `watched` kind, and every retraction."""
    bearing = {payload for payload, (kind, _) in CLAIM_KEYS.items() if kind in watched}
    bearing.add(ClaimRetracted)
    return [event for event in events if type(event.payload) in bearing]


def _latest_known(events: Iterable[Event], mark: tuple[datetime, str]) -> datetime:
    """The latest valid time among the events recorded by `mark`: where the subject's time
    stood then."""
    at, last = mark
    return max(
        event.occurred_at
        for event in events
        if event.recorded_at < at or (event.recorded_at == at and event.event_id <= last)
    )


def _moved_to(state: UserState, moment: datetime, policy: FoldPolicy) -> UserState:
    if state.as_of is not None and state.as_of >= moment:
        return state
    return evolve(state, clock_event(state, moment, moment), policy)


def _grade_in(rules: Sequence[Rule], state: UserState, identifier: UUID) -> Severity | None:
    for rule in rules:
        finding = rule.findings(state, None).get(identifier)
        if finding is not None:
            return finding.severity
    return None


def _answered(
    rules: Sequence[Rule],
    state: UserState,
    finding: Finding,
    held: AcknowledgementView,
    policy: FoldPolicy,
) -> Severity | None:
    return grade_answered(rules, state, finding.rule.id, finding_id(state, finding), held, policy)


def _held_other(state: UserState, record: Alert, trigger_id: str) -> AcknowledgementView | None:
    """The acknowledgement that holds for a `raised` record, unless it is the trigger itself
    (`acknowledged` answers it)."""
    if record.status is not AlertStatus.RAISED:
        return None
    held = held_for(state, str(record.alert_id), record.purpose)
    return None if held is None or held.event.id == trigger_id else held


def _acknowledged_grade(record: Alert | None) -> Severity | None:
    answered = (AlertStatus.ACKNOWLEDGED, AlertStatus.OVERRIDDEN)
    return record.severity if record is not None and record.status in answered else None


def _milder(first: Severity | None, second: Severity | None) -> Severity | None:
    grades = [grade for grade in (first, second) if grade is not None]
    return min(grades, key=_GRAVITY.__getitem__) if grades else None


def _standing(record: Alert, held: AcknowledgementView) -> Alert:
    """The acknowledgement `held` applied to the alert `record` raises or re-grades: it holds
    until it is retracted (an acknowledgement that arrives after the re-grade acknowledges the
    alert as re-graded)."""
    status = status_of(held.action)
    episode = f"{record.trigger_event_id}+{held.event.id}"
    return record.model_copy(
        update={
            "lifecycle_id": lifecycle_id(record.alert_id, status, episode),
            "status": status,
            "trigger_event_id": held.event.id,
            "occurred_at": max(record.occurred_at, held.event.occurred_at),
            "reason": held.reason,
        }
    )


def _unanswered(record: Alert, held: AcknowledgementView, answered: Severity) -> Alert:
    note = (
        f"graded {record.severity.value}, graver than the {answered.value} that "
        f"{held.event.type.value} "
        f"{held.event.id} ({held.action.value}) answered: it needs a new acknowledgement"
    )
    reason = note if not record.reason else f"{record.reason}; {note}"
    return record.model_copy(update={"reason": reason})
