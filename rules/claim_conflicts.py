"""Contradictions the fold would not settle alone: a quick explicit reversal of a preference,
or equal-rank statements of a fact that disagree. The alert asks for confirmation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar
from uuid import UUID

from projections.state import Kind, UserState
from projections.views import ClaimView, Conflict, claim_value
from rules.base import Finding, Focus, RuleRef, alert_id, evidence_of
from schemas.alerts import Severity

RULE = RuleRef(
    id="claim-needs-confirmation",
    version=1,
    severity=Severity.WARNING,
    description=(
        "Two explicit statements about one preference or fact disagree (a reversal within the "
        "confirmation window, or equal-rank facts): the held value stays until confirmed."
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
                if view is not None and view.conflict is not None:
                    finding = _finding(kind, view.key, view.conflict)
                    found[alert_id(state.tenant_id, state.subject_id, RULE, finding.cause)] = (
                        finding
                    )
        return found


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
    )
