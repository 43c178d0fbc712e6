"""Polypharmacy: an aggregate threshold over the subject's medicines. When the number of
different medicines in use at once reaches `THRESHOLD` (ten, "hyperpolypharmacy"), a
medication review is due; the alert stays open while the count stays at or above it, however
the list changes, and is resolved when it falls below.

A medicine is its active ingredients (two orders of one drug, or a tablet and an ointment of
one ingredient, are one medicine; a combination product is one medicine of its own; a fluid
that is only a vehicle, saline in any bag size, one medicine); a drug the knowledge layer cannot
resolve counts by the words it cannot read and what it does read (two strengths or forms of one
unknown drug are one medicine), else by its name. One alert stands for one episode, identified by the moment the count
reached the threshold on the valid-time timeline of every prescription (from its date, or its
`valid_from`, to its stop or its `valid_until`; a prescription entered in error is not on it):
the same history gives the same alert id in any arrival order, a medicine added (on the same day
too) or stopped while the count stays at or above the threshold changes nothing, and a later
episode is a new alert. Prescriptions count per purpose they were recorded for (a claim is used
only for its purpose): version 2 counted them so; version 1 counted every prescription.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import ClassVar, NamedTuple
from uuid import UUID

from projections.queries import active_medications
from projections.state import Kind, UserState
from projections.views import MedicationView
from rules.base import Finding, Focus, RuleRef, evidence_of, finding_id
from rules.knowledge.model import DrugKnowledge
from rules.knowledge.normalise import fold
from rules.resolution import CachedResolver
from schemas.events import Coding
from schemas.severity import Severity

THRESHOLD = 10
"""Different medicines in use at once from which a review is advised."""
EPISODE = "episode"
"""The cause of an alert of this rule is not a claim but an episode: `episode:<purpose>:<the
moment the count reached the threshold>`; its evidence names the prescriptions in use."""

RULE = RuleRef(
    id="polypharmacy",
    version=2,
    severity=Severity.INFO,
    description=(
        f"{THRESHOLD} or more different medicines are in use at once: a medication review is "
        "advised (one alert per episode at or above the threshold)."
    ),
)


class Course(NamedTuple):
    """One prescription on the valid-time timeline: the medicine it is and when it is in use
    (`until` None: still in use)."""

    medicine: Hashable
    start: datetime
    until: datetime | None


@dataclass
class PolypharmacyRule:
    knowledge: DrugKnowledge
    threshold: int = THRESHOLD
    ref: RuleRef = RULE
    watches: ClassVar[frozenset[Kind]] = frozenset({Kind.MEDICATION})
    _medicine: Callable[[str, tuple[Coding, ...]], Hashable] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        resolve = CachedResolver(self.knowledge)

        def medicine(drug: str, codes: tuple[Coding, ...]) -> Hashable:
            resolution = resolve(drug, codes)
            unread = resolution.unread_medicine
            if unread is not None:
                return unread
            if not (resolution.resolved and resolution.ingredients):
                return " ".join(fold(drug).split())
            return tuple(sorted(resolution.active_ingredients or resolution.ingredients))

        self._medicine = lru_cache(maxsize=65536)(medicine)

    def findings(self, state: UserState, focus: Focus) -> Mapping[UUID, Finding]:  # noqa: ARG002
        """The open episode of each purpose, if any (an aggregate: every prescription of the
        purpose counts, whatever the focus)."""
        found: dict[UUID, Finding] = {}
        if state.as_of is None:
            return found
        for purpose, active in _by_purpose(active_medications(state)).items():
            in_use = len({self._medicine(view.drug, view.codes) for view in active})
            if in_use < self.threshold:
                continue
            views = state.medication_views()
            courses = [self._course(v) for v in views if v.prescribed.purpose == purpose]
            start = episode_start(courses, self.threshold, state.as_of)
            if start is not None:
                finding = _finding(start, purpose, active, in_use, self.threshold)
                found[finding_id(state, finding)] = finding
        return found

    def _course(self, view: MedicationView) -> Course:
        """The prescription's time in use; none for one entered in error (it never held)."""
        prescribed = view.prescribed
        start = max(prescribed.occurred_at, prescribed.valid_from or prescribed.occurred_at)
        if view.entered_in_error:
            return Course(self._medicine(view.drug, view.codes), start, start)
        until = prescribed.valid_until
        if view.stopped is not None:
            stopped = view.stopped.occurred_at
            until = stopped if until is None else min(stopped, until)
        return Course(self._medicine(view.drug, view.codes), start, until)


def episode_start(courses: Iterable[Course], threshold: int, now: datetime) -> datetime | None:
    """When the episode open at `now` began: the moment the number of different medicines in
    use last rose from below `threshold` to it (None when fewer are in use at `now`)."""
    changes: dict[datetime, list[tuple[int, Hashable]]] = defaultdict(list)
    for course in courses:
        if course.until is None or course.start < course.until:
            changes[course.start].append((1, course.medicine))
        if course.until is not None and course.start < course.until:
            changes[course.until].append((-1, course.medicine))
    in_use: Counter[Hashable] = Counter()
    start: datetime | None = None
    for moment in sorted(moment for moment in changes if moment <= now):
        before = len(in_use)
        for step, medicine in changes[moment]:
            in_use[medicine] += step
            if not in_use[medicine]:
                del in_use[medicine]
        if len(in_use) < threshold:
            start = None
        elif before < threshold:
            start = moment
    return start


def _by_purpose(medications: Iterable[MedicationView]) -> dict[str, list[MedicationView]]:
    grouped: dict[str, list[MedicationView]] = defaultdict(list)
    for view in medications:
        grouped[view.prescribed.purpose].append(view)
    return grouped


def _finding(
    start: datetime, purpose: str, active: list[MedicationView], count: int, threshold: int
) -> Finding:
    return Finding(
        rule=RULE,
        cause=(f"{EPISODE}:{purpose}:{start.isoformat()}",),
        severity=RULE.severity,
        title=f"Polypharmacy: {count} different medicines in use",
        detail=(
            f"{count} different medicines are in use at once (the review threshold is "
            f"{threshold}) since {start.isoformat()}: review whether each is still needed"
        ),
        evidence=tuple(
            evidence_of(view.prescribed, view.prescription_id, "medication", f"in use: {view.drug}")
            for view in active
        ),
        purpose=purpose,
    )
