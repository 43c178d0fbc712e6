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
  longer has).

Once those records are in the stream, re-judging the same state returns nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from projections.state import UserState
from rules.base import Finding, Rule, level_of, lifecycle_id, lifecycle_record, regrading
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


def active_alerts(records: Iterable[Alert]) -> dict[UUID, Alert]:
    """The alerts a lifecycle stream (in its order) leaves active: each alert's latest record,
    unless that record resolved it."""
    latest: dict[UUID, Alert] = {}
    for record in records:
        latest[record.alert_id] = record
    return {key: alert for key, alert in latest.items() if alert.status is not AlertStatus.RESOLVED}


def rejudged(
    state: UserState, active: Mapping[UUID, Alert], rules: Sequence[Rule], why: Rejudgement
) -> list[Alert]:
    """The records that make the stream's `active` alerts of this subject agree with `rules`."""
    if state.erased:
        return []
    found = {key: finding for rule in rules for key, finding in rule.findings(state, None).items()}
    records = []
    for key in sorted(found):
        change = "newly found" if key not in active else _regrading(active[key], found[key])
        if change:
            reason = f"{why.reason}: {change}"
            records.append(
                lifecycle_record(
                    state, found[key], AlertStatus.RAISED, why.trigger_id, why.at, reason
                )
            )
    return records + [_resolved(active[key], why) for key in sorted(active.keys() - found.keys())]


def _regrading(alert: Alert, finding: Finding) -> str:
    return regrading(alert.severity, level_of(alert.drug_allergy), finding)


def _resolved(alert: Alert, why: Rejudgement) -> Alert:
    return Alert.model_validate(
        alert.model_dump()
        | {
            "lifecycle_id": lifecycle_id(alert.alert_id, AlertStatus.RESOLVED, why.trigger_id),
            "status": AlertStatus.RESOLVED,
            "trigger_event_id": why.trigger_id,
            "occurred_at": why.at,
            "reason": f"{why.reason}: the rules no longer find it",
        }
    )
