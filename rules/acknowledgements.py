"""What an acknowledgement or override does to an alert's status.

An `AlertAcknowledged` answers the alert as it was graded when the person decided: accepting a
`warning` is no decision about a `critical`. So an acknowledgement covers the grade it answered
(see `grade_answered`) and any milder one; an alert graded graver later (the allergy
confirmed, its criticality raised, a severe reaction recorded) is `raised` again and needs a
new acknowledgement, and is covered again if it is graded back. `standing_of` gives the status
the state gives an alert; the live path emits a record whenever an event changes it, so the
stream follows the state whatever order the events arrived in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from projections.state import Kind, UserState, claim_address, initial_state, keyed_for, replay
from projections.views import DEFAULT_POLICY, AcknowledgementView, FoldPolicy
from rules.base import Finding, Judged, Rule, lifecycle, lifecycle_id
from schemas.alerts import Alert, AlertStatus, Evidence
from schemas.events import AcknowledgementAction, AlertAcknowledged, ClaimRetracted, Event
from schemas.severity import Severity

_GRAVITY = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}
Mark = tuple[datetime, str]
"""Where an event stands in the order of knowledge: when it was recorded, then its id."""


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


@dataclass(frozen=True, slots=True)
class Standing:
    """The status the state gives an alert: `raised`, unless an acknowledgement holds for it
    (`held`) that covers its grade. `outgrew` is the grade the held acknowledgement answered
    when the alert is graver."""

    status: AlertStatus
    held: AcknowledgementView | None = None
    outgrew: Severity | None = None


def standing_of(
    rules: Sequence[Rule],
    state: UserState,
    alert: Alert,
    policy: FoldPolicy = DEFAULT_POLICY,
) -> Standing:
    """The status `state` gives the alert `alert` (a lifecycle record of it, for its id, rule,
    purpose, grade and evidence)."""
    held = held_for(state, str(alert.alert_id), alert.purpose)
    if held is None:
        return Standing(AlertStatus.RAISED)
    answered = grade_answered(rules, state, alert, held, policy)
    if answered is not None and not covers(answered, alert.severity):
        return Standing(AlertStatus.RAISED, held, answered)
    return Standing(status_of(held.action), held)


def grade_answered(
    rules: Sequence[Rule],
    state: UserState,
    alert: Alert,
    held: AcknowledgementView,
    policy: FoldPolicy = DEFAULT_POLICY,
) -> Severity | None:
    """The grade of `alert` that the acknowledgement `held` answered: the alert's grade in its
    claims (those of its evidence) as they were known once both the acknowledgement and each
    of the claims were (their events recorded by then, by `recorded_at` and then event id, and
    not retracted since); for an acknowledgement recorded before its alert could be found (an
    override at order sign that reaches UaC before the order), that is the grade the alert was
    first found with. None when the rule does not find the alert in its claims' history. An
    acknowledgement that names the grade it answered (`severity`) answered that one."""
    stated = held.event.payload
    if isinstance(stated, AlertAcknowledged) and stated.severity is not None:
        return stated.severity
    rule = [candidate for candidate in rules if candidate.ref.id == alert.rule_id]
    claims = _claims_of(state, alert.evidence)
    if not claims:
        return None
    horizon = max(_mark(held.event), *(min(map(_mark, members)) for members in claims))
    ordered = sorted((event for members in claims for event in members), key=_mark)
    known = [event for event in ordered if _mark(event) <= horizon]
    seen = replay(known, initial_state(state.tenant_id, state.subject_id), policy)
    grade = _grade_in(rule, seen, alert.alert_id)
    for event in ordered[len(known) :]:
        if grade is not None:
            break
        seen = replay([event], seen, policy)
        grade = _grade_in(rule, seen, alert.alert_id)
    return grade


def covers(answered: Severity, severity: Severity) -> bool:
    """Whether an acknowledgement that answered the grade `answered` covers an alert graded
    `severity`."""
    return _GRAVITY[severity] <= _GRAVITY[answered]


def with_standing(
    rules: Sequence[Rule],
    state: UserState,
    records: Sequence[Alert],
    trigger_id: str,
    policy: FoldPolicy = DEFAULT_POLICY,
) -> list[Alert]:
    """`records` (lifecycle records the event or re-judgement `trigger_id` caused in `state`),
    then, for each alert raised or re-graded, the acknowledgement the state already holds for
    it when that covers its grade: one recorded before its alert was (an override at order
    sign), one of an earlier episode of the same alert, or one of the alert before its cause
    was graded differently. A raised alert graver than the acknowledgement answered says so in
    its reason and stays `raised`."""
    raised: list[Alert] = []
    standing: list[Alert] = []
    for record in records:
        held = _held_other(state, record, trigger_id)
        if held is None:
            raised.append(record)
            continue
        found = standing_of(rules, state, record, policy)
        raised.append(_stated(record, found))
        if found.status is not AlertStatus.RAISED:
            standing.append(_standing(record, held))
    return raised + standing


def acknowledged(
    rules: Sequence[Rule],
    before: UserState,
    after: UserState,
    event: Event,
    policy: FoldPolicy = DEFAULT_POLICY,
) -> list[Alert]:
    """An acknowledgement or override of a present alert, when it is the one that holds: the
    alert is acknowledged or overridden if it covers the alert's grade, else (it answered a
    milder grade than the alert has now) the alert is `raised`, with a record when it was not
    before. One older in valid time than the acknowledgement the state already holds (it
    arrived late) changes nothing. It acknowledges an alert of the purpose it was recorded for
    only (a claim is used only for its purpose)."""
    if not isinstance(event.payload, AlertAcknowledged):
        return []
    ack = event.payload
    held = held_for(after, ack.alert_id, event.purpose)
    if held is None or held.event.id != event.id:
        return []
    records = []
    for finding in findings_of(rules, after, ack.alert_id):
        if finding.purpose != event.purpose:
            continue
        record = lifecycle(after, finding, AlertStatus.RAISED, event)
        found = standing_of(rules, after, record, policy)
        if found.status is not AlertStatus.RAISED or not _raised(rules, before, record, policy):
            records.append(_record_of(after, finding, record, found, event))
    return records


def _raised(rules: Sequence[Rule], state: UserState, record: Alert, policy: FoldPolicy) -> bool:
    return standing_of(rules, state, record, policy).status is AlertStatus.RAISED


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
    retraction = f"{event.type.value} {event.id} retracted its acknowledgement"
    records = []
    for finding in findings_of(rules, after, alert):
        if finding.purpose != claim.purpose:
            continue
        record = lifecycle(after, finding, AlertStatus.RAISED, event, retraction)
        records.append(
            _record_of(after, finding, record, standing_of(rules, after, record, policy), event)
        )
    return records


def restated(
    rules: Sequence[Rule],
    before: UserState,
    after: UserState,
    event: Event,
    judgements: Sequence[Judged],
    records: Sequence[Alert],
    policy: FoldPolicy = DEFAULT_POLICY,
) -> list[Alert]:
    """When `event` changes what an acknowledgement answered without changing its alert's
    grade (a version of the allergy recorded before the acknowledgement, arriving after it),
    the alert's new status, if it changed. `judgements` are what the rules found about the
    claims the event touched, `records` the records it caused already."""
    if not len(after.acknowledgements):
        return []
    emitted = {record.alert_id for record in records}
    restatements = []
    for judgement in judgements:
        for key, finding in judgement.after.items():
            earlier = judgement.before.get(key)
            if key in emitted or earlier is None:
                continue
            if held_for(after, str(key), finding.purpose) is None:
                continue
            record = lifecycle(after, finding, AlertStatus.RAISED, event)
            found = standing_of(rules, after, record, policy)
            then = lifecycle(before, earlier, AlertStatus.RAISED, event)
            if found.status is not standing_of(rules, before, then, policy).status:
                restatements.append(_record_of(after, finding, record, found, event))
    return restatements


def rejudged_standing(
    rules: Sequence[Rule],
    state: UserState,
    shown: Alert,
    severity: Severity,
    policy: FoldPolicy = DEFAULT_POLICY,
) -> str:
    """Why an alert graded `severity` as before, whose latest record in the stream is `shown`,
    takes another status ("" when it does not): the stream shows it acknowledged though the
    acknowledgement that holds answered a milder grade (an earlier build kept an
    acknowledgement across a graver re-grade)."""
    if shown.status not in (AlertStatus.ACKNOWLEDGED, AlertStatus.OVERRIDDEN):
        return ""
    found = standing_of(rules, state, shown, policy)
    if found.outgrew is None:
        return ""
    return f"acknowledged as {found.outgrew.value}, graded {severity.value}"


def still_held(
    rules: Sequence[Rule], state: UserState, shown: Alert, policy: FoldPolicy = DEFAULT_POLICY
) -> Alert | None:
    """The acknowledgement record of an alert whose latest record in the stream, `shown`, is
    `raised` though an acknowledgement that covers it holds (None when there is none)."""
    if shown.status is not AlertStatus.RAISED:
        return None
    found = standing_of(rules, state, shown, policy)
    if found.held is None or found.status is AlertStatus.RAISED:
        return None
    return _standing(shown, found.held)


def _claims_of(state: UserState, evidence: Iterable[Evidence]) -> list[list[Event]]:
    """The events of each claim of `evidence` that count (not retracted)."""
    claims: dict[tuple[Kind, str], list[Event]] = {}
    for item in evidence:
        event = state.events.get(item.event_id)
        address = None if event is None else claim_address(event)
        if address is None or address in claims:
            continue
        timeline = state.timelines(address[0]).get(address[1])
        if timeline is not None:
            members = timeline.members.values()
            claims[address] = [e for e in members if e.event_id not in timeline.retracted]
    return [members for members in claims.values() if members]


def _mark(event: Event) -> Mark:
    return (event.recorded_at, event.event_id)


def _grade_in(rules: Sequence[Rule], state: UserState, identifier: UUID) -> Severity | None:
    for rule in rules:
        finding = rule.findings(state, None).get(identifier)
        if finding is not None:
            return finding.severity
    return None


def _held_other(state: UserState, record: Alert, trigger_id: str) -> AcknowledgementView | None:
    """The acknowledgement that holds for a `raised` record, unless it is the trigger itself
    (`acknowledged` answers it)."""
    if record.status is not AlertStatus.RAISED:
        return None
    held = held_for(state, str(record.alert_id), record.purpose)
    return None if held is None or held.event.id == trigger_id else held


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


def _record_of(
    state: UserState, finding: Finding, raised: Alert, found: Standing, event: Event
) -> Alert:
    """The record of the status `found` gives the alert of `finding`: acknowledged or
    overridden with the held acknowledgement's reason, else `raised` (the record `raised`,
    saying so when an acknowledgement holds that answered a milder grade)."""
    if found.held is None or found.status is AlertStatus.RAISED:
        return _stated(raised, found)
    return lifecycle(state, finding, found.status, event, found.held.reason)


def _stated(record: Alert, found: Standing) -> Alert:
    """A `raised` record that says so when an acknowledgement holds that answered a milder
    grade."""
    if found.held is None or found.outgrew is None:
        return record
    held = found.held
    note = (
        f"graded {record.severity.value}, graver than the {found.outgrew.value} that "
        f"{held.event.type.value} {held.event.id} ({held.action.value}) answered: it needs a "
        "new acknowledgement"
    )
    reason = note if not record.reason else f"{record.reason}; {note}"
    return record.model_copy(update={"reason": reason})
