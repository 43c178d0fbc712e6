"""Contradictions the fold would not settle alone: a quick explicit reversal of a preference,
or equal-rank statements of a fact that disagree. The alert asks for confirmation while the
disagreement is in force at the subject's time: the key is weighed from its statements in
force then (`claim_view_at`), so a challenger whose window has closed, or not yet opened,
disputes nothing now, and when the held claim's window closes the statements still in force
are weighed among themselves (two of them that disagree ask for confirmation in their turn).
A statement made for another purpose is another key's (`PURPOSE_BOUND`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar
from uuid import UUID

from projections.queries import claim_view_at, claim_views_at
from projections.state import Kind, UserState
from projections.views import (
    DEFAULT_POLICY,
    ClaimView,
    Conflict,
    FoldPolicy,
    claim_value,
    valid_at,
)
from rules.base import Finding, Focus, RuleRef, evidence_of, finding_id
from schemas.severity import Severity

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
    policy: FoldPolicy = DEFAULT_POLICY
    """The fold's conflict policy: the rule weighs the statements in force at the subject's
    `as_of` as the fold weighs them (an expired held claim gives way to its challengers)."""
    watches: ClassVar[frozenset[Kind]] = frozenset({Kind.PREFERENCE, Kind.FACT})

    def findings(self, state: UserState, focus: Focus) -> Mapping[UUID, Finding]:
        found: dict[UUID, Finding] = {}
        for kind in (Kind.PREFERENCE, Kind.FACT):
            for view in self._views(state, kind, focus):
                conflict = view.conflict
                if conflict is not None and _in_force(conflict, state.as_of):
                    finding = _finding(kind, conflict.key, conflict)
                    found[finding_id(state, finding)] = finding
        return found

    def _views(self, state: UserState, kind: Kind, focus: Focus) -> list[ClaimView]:
        """The views at the subject's `as_of` of the keys of `kind` in focus (all when None)."""
        if focus is None:
            return claim_views_at(state, kind, state.as_of, self.policy)
        return [
            view
            for focused, key in focus
            if focused is kind
            and (view := claim_view_at(state, kind, key, state.as_of, self.policy)) is not None
        ]


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
