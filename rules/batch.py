"""Gate + fold + rules over a finite batch of events (a file), in transaction-time order.

Events are processed in `recorded_at` order (ties: valid time, then event id), which is the
order a live system would have learned them in, so the result does not depend on how the file
is sorted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from projections.clock import clock_event, due_bounds
from projections.gate import GateContext, Rejected
from projections.state import UserState, initial_state
from projections.timeline import CAUSAL_RANK
from projections.views import DEFAULT_POLICY, FoldPolicy
from rules.base import Rule
from rules.engine import process
from schemas.alerts import Alert
from schemas.events import Event


@dataclass(frozen=True)
class Submitted:
    """One event of the batch and where it came from (e.g. `line 7`)."""

    origin: str
    event: Event
    encoded_size: int


@dataclass
class SubjectResult:
    """A subject's final state, its alert lifecycle records (none once it is erased: erasure
    reaches the alerts derived from the subject) and the events the gate refused."""

    state: UserState
    alerts: list[Alert] = field(default_factory=list)
    rejections: list[tuple[Submitted, Rejected]] = field(default_factory=list)


ContextFor = Callable[[Submitted, dict[str, str]], GateContext]
"""Builds the gate context of one submitted event, given the batch's claim owners."""


def processing_order(submitted: Submitted) -> tuple[object, ...]:
    """Transaction time, valid time, causal rank (`projections.timeline.CAUSAL_RANK`), event id,
    then the event's content: two different events that reuse one id at one instant are
    processed in the same order whatever the order of the file (the second is refused)."""
    event = submitted.event
    return (
        event.recorded_at,
        event.occurred_at,
        CAUSAL_RANK[event.type],
        event.id,
        event.model_dump_json(),
    )


def replay_batch(
    batch: Sequence[Submitted],
    context_for: ContextFor,
    rules: Sequence[Rule],
    policy: FoldPolicy = DEFAULT_POLICY,
) -> dict[str, SubjectResult]:
    owners = {item.event.id: item.event.key for item in batch}
    results: dict[str, SubjectResult] = {}
    for item in sorted(batch, key=processing_order):
        event = item.event
        result = results.get(event.key) or SubjectResult(
            initial_state(event.tenant_id, event.subject_id)
        )
        outcome = process(result.state, event, context_for(item, owners), rules, policy)
        result.state = outcome.after
        result.alerts.extend(outcome.alerts)
        if outcome.after.erased:
            result.alerts.clear()
        if isinstance(outcome.decision, Rejected):
            result.rejections.append((item, outcome.decision))
        results[event.key] = result
    return dict(sorted(results.items()))


def advance_clocks(
    results: dict[str, SubjectResult],
    moment: datetime,
    context_for: ContextFor,
    rules: Sequence[Rule],
    policy: FoldPolicy = DEFAULT_POLICY,
) -> None:
    """Move each subject's time to `moment` as the worker's clock does when wall-clock time
    passes validity bounds: one `ClockAdvanced` per bound passed through gate + fold + rules,
    so an alert whose cause expired by `moment` (a prescription past its `valid_until`) is
    resolved at that expiry, and one whose cause came into force is raised when it did."""
    for result in results.values():
        for due in due_bounds(result.state, moment):
            tick = Submitted("clock", clock_event(result.state, due, moment), 0)
            outcome = process(result.state, tick.event, context_for(tick, {}), rules, policy)
            result.state = outcome.after
            result.alerts.extend(outcome.alerts)
