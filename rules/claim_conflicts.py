"""Contradictions the fold would not settle alone: a quick explicit reversal of a preference,
or equal-rank statements of a fact that disagree. The alert asks for confirmation while the
disagreement is in force at the subject's time: the held claim and a challenger recorded for
its purpose both inside their validity windows (a challenger whose window has closed, or not
yet opened, disputes nothing now; neither does one that challenges a held claim out of its
window, nor one stated for another purpose)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar
from uuid import UUID

from projections.state import Kind, UserState
from projections.views import ClaimView, Conflict, claim_value, valid_at
from rules.base import Finding, Focus, RuleRef, evidence_of, finding_id
from schemas.alerts import Severity

RULE = RuleRef(
    id="claim-needs-confirmation",
    version=2,
    severity=Severity.WARNING,
    description=(
        "Two explicit statements about one preference or fact disagree (a reversal within the "
        "confirmation window, or equal-rank facts) while both are in their validity windows: "
        "the held value stays until confirmed."
    ),
)


@dataclass(frozen=True)
class ClaimConflictRule:
    ref: RuleRef = RULE
    watches: ClassVar[frozenset[Kind]] = frozenset({Kind.PREFERENCE, Kind.FACT})

    def findings(self, state: UserState, focus: Focus) -> Mapping[UUID, Finding]:
        found: dict[UUID, Finding] = {}
        for kind in (Kind.PREFERENCE, Kind.FACT):
            timelines = state.timelines(kind)
            keys = timelines.keys() if focus is None else [key for k, key in focus if k is kind]
            for key in keys:
                timeline = timelines.get(key)
                view: ClaimView | None = None if timeline is None else timeline.resolution
                conflict = None if view is None else view.conflict
                if conflict is not None and _in_force(conflict, state.as_of):
                    finding = _finding(kind, conflict.key, conflict)
                    found[finding_id(state, finding)] = finding
        return found


def _in_force(conflict: Conflict, moment: datetime | None) -> bool:
    if moment is None:
        return True
    challenged = any(valid_at(challenger, moment) for challenger in conflict.challengers)
    return challenged and valid_at(conflict.held, moment)


def _finding(kind: Kind, key: str, conflict: Conflict) -> Finding:
    held, challengers = conflict.held, conflict.challengers
    disputing = " and ".join(f"{claim_value(challenger)!r}" for challenger in challengers)
    return Finding(
        rule=RULE,
        cause=tuple(sorted(f"{kind.value}:{event_id}" for event_id in conflict.claim_ids)),
        severity=RULE.severity,
        title=f"Please confirm {kind.value} {key!r}",
        detail=(
            f"{claim_value(held)!r} (held) and {disputing} (stated later) "
            "disagree; the held value stays until one is confirmed or corrected"
        ),
        evidence=(
            evidence_of(held, held.id, "held", f"{key} = {claim_value(held)!r}"),
            *(
                evidence_of(
                    challenger, challenger.id, "challenger", f"{key} = {claim_value(challenger)!r}"
                )
                for challenger in challengers
            ),
        ),
        purpose=held.purpose,
    )
