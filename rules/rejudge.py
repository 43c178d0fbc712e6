"""Re-judging a subject's alerts after the rules or the drug knowledge changed.

Alerts fire on transitions, judged with the knowledge of the moment. A knowledge release that
recognises a combination already present in a state (warfarin with apixaban, once both count as
anticoagulants) would stay silent until an event touches one of the two claims, and a release
that no longer finds a conflict would leave its alert raised. `rejudged` compares what the rules
find in a state now with the alerts the stream holds active for it, and returns the lifecycle
records that bring the stream in line:

- `raised` for a finding no active alert stands for,
- `raised` again for an active alert whose severity or match level the rules now judge
  differently (the record carries the new judgement and says what changed; the alert id stays,
  as its cause did),
- `resolved` for an active alert the rules no longer find (also one of a rule this build no
  longer has),
- `raised` again for an acknowledged alert whose acknowledgement answered a milder grade
  than the rules find (an earlier build kept an acknowledgement across a graver re-grade),
  and the acknowledgement that holds for a `raised` alert it covers,
- after a `raised` one, the acknowledgement or override the state holds for the alert when it
  covers the new grade (one that was shown a milder grade stays behind: the alert needs a new
  acknowledgement; see `rules.acknowledgements`).

Once those records are in the stream, re-judging the same state returns nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from projections.state import UserState
from projections.views import DEFAULT_POLICY, FoldPolicy
from rules.acknowledgements import rejudged_standing, still_held, with_standing
from rules.base import Rule, lifecycle_id, lifecycle_record, regrading
from schemas.alerts import Alert, AlertStatus


@dataclass(frozen=True)
class Rejudgement:
    """Why and when: `trigger_id` names the release (`knowledge:<version>`), and becomes the
    records' `trigger_event_id` and part of their lifecycle ids."""

    trigger_id: str
    at: datetime

    @property
    def reason(self) -> str:
        return f"re-judged with {self.trigger_id}"


def latest_records(records: Iterable[Alert]) -> dict[UUID, Alert]:
    """Each alert's latest lifecycle record in a stream (in its order); the alert is active
    unless that record resolved it."""
    latest: dict[UUID, Alert] = {}
    for record in records:
        latest[record.alert_id] = record
    return latest


def rejudged(
    state: UserState,
    latest: Mapping[UUID, Alert],
    rules: Sequence[Rule],
    why: Rejudgement,
    policy: FoldPolicy = DEFAULT_POLICY,
) -> list[Alert]:
    """The records that make the stream, whose `latest` record per alert of this subject is
    given, agree with what `rules` find in `state`.

    A record's lifecycle id derives from the release and the record it answers (the alert's
    latest), so running again over the same stream repeats the same ids, and a later
    re-judgement of a stream that moved on (new events, a rollback in between) gets new ones."""
    if state.erased:
        return []
    found = {key: finding for rule in rules for key, finding in rule.findings(state, None).items()}
    active = {key for key, record in latest.items() if record.status is not AlertStatus.RESOLVED}
    records, acknowledged = [], []
    for key in sorted(found):
        change = (
            "newly found"
            if key not in active
            else regrading(latest[key], found[key])
            or rejudged_standing(rules, state, latest[key], found[key].severity, policy)
        )
        if change:
            reason = f"{why.reason}: {change}"
            record = lifecycle_record(
                state, found[key], AlertStatus.RAISED, why.trigger_id, why.at, reason
            )
            records.append(record)
        elif (held := still_held(rules, state, latest[key], policy)) is not None:
            acknowledged.append(held)
    raised = with_standing(rules, state, records, why.trigger_id, policy) + acknowledged
    return [_answering(record, latest.get(record.alert_id), why) for record in raised] + [
        _resolved(latest[key], why) for key in sorted(active - found.keys())
    ]


def _answering(record: Alert, previous: Alert | None, why: Rejudgement) -> Alert:
    answered = previous.lifecycle_id if previous else "none"
    basis = f"{why.trigger_id}/{answered}"
    return record.model_copy(
        update={"lifecycle_id": lifecycle_id(record.alert_id, record.status, basis)}
    )


def _resolved(alert: Alert, why: Rejudgement) -> Alert:
    record = Alert.model_validate(
        alert.model_dump()
        | {
            "status": AlertStatus.RESOLVED,
            "trigger_event_id": why.trigger_id,
            "occurred_at": why.at,
            "reason": f"{why.reason}: the rules no longer find it",
        }
    )
    return _answering(record, alert, why)
