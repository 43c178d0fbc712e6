"""Gate + fold + rules over a finite batch of events (a file), in transaction-time order.

Events are processed in `recorded_at` order (ties: valid time, then event id), which is the
order a live system would have learned them in, so the result does not depend on how the file
is sorted; a correction comes after the event of the batch it corrects.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from projections.clock import clock_event, due_bounds
from projections.gate import GateContext, Rejected
from projections.state import UserState, initial_state
from projections.timeline import CAUSAL_RANK
from projections.views import DEFAULT_POLICY, FoldPolicy
from rules.base import Rule
from rules.engine import process
from schemas.alerts import Alert
from schemas.events import ClaimRetracted, Event, EventType


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


ARRIVAL_RANK: Final = {
    **CAUSAL_RANK,
    EventType.MEDICATION_STOPPED: CAUSAL_RANK[EventType.CONSENT_CHANGED] + 0.5,
}
"""`CAUSAL_RANK`, but a stop comes before the prescriptions of its instant: an order replaced at
the instant its successor starts (a dose change) is stopped before the successor is judged,
so the two are never a duplicate therapy for no time at all. A stop that arrives before its own
prescription still ends it: the fold places it after the prescription in valid time."""


def processing_order(submitted: Submitted) -> tuple[object, ...]:
    """Transaction time, valid time, arrival rank (`ARRIVAL_RANK`), event id, then the event's
    content: two different events that reuse one id at one instant are processed in the same
    order whatever the order of the file (the second is refused)."""
    event = submitted.event
    return (
        event.recorded_at,
        event.occurred_at,
        ARRIVAL_RANK[event.type],
        event.id,
        event.model_dump_json(),
    )


def in_processing_order(batch: Sequence[Submitted]) -> list[Submitted]:
    """The batch in `processing_order`, except that an event correcting (`supersedes`) or
    retracting (`ClaimRetracted`) another event of the batch comes after it: a correction sent
    with its claim, at the same `recorded_at` and dated earlier (an onset moved back) or sorting
    first at the same instant, is not refused as correcting an unknown claim, nor a retraction
    sent with its claim (an override and its retraction at one instant) as retracting one.
    Events that name each other in a loop keep `processing_order`."""
    ordered = sorted(batch, key=processing_order)
    present = {item.event.id for item in ordered}
    placed_ids: set[str] = set()
    placed_items: set[int] = set()
    waiting: dict[str, list[Submitted]] = {}
    result: list[Submitted] = []

    def place(first: Submitted) -> None:
        due = [first]
        while due:
            item = due.pop()
            if id(item) in placed_items:
                continue
            result.append(item)
            placed_items.add(id(item))
            placed_ids.add(item.event.id)
            due.extend(reversed(waiting.pop(item.event.id, [])))

    for item in ordered:
        target = _claim_named(item.event)
        if target is not None and target in present and target not in placed_ids:
            waiting.setdefault(target, []).append(item)
        else:
            place(item)
    for item in sorted((i for items in waiting.values() for i in items), key=processing_order):
        place(item)
    return result


def _claim_named(event: Event) -> str | None:
    """The event that `event` corrects or retracts, if any."""
    if isinstance(event.payload, ClaimRetracted):
        return event.payload.claim_id
    return event.supersedes


def replay_batch(
    batch: Sequence[Submitted],
    context_for: ContextFor,
    rules: Sequence[Rule],
    policy: FoldPolicy = DEFAULT_POLICY,
) -> dict[str, SubjectResult]:
    ordered = in_processing_order(batch)
    owners: dict[str, str] = {}
    for item in ordered:
        owners.setdefault(item.event.id, item.event.key)
    results: dict[str, SubjectResult] = {}
    for item in ordered:
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
