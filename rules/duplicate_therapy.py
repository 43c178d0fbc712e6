"""Duplicate therapy: two active prescriptions of the same ingredient, class or therapeutic
group. Two of a class whose local forms act where applied, used at different sites, are a
treatment plan instead (oral prednisone with an inhaled corticosteroid, nystatin by mouth and
on the skin: `rules.administration` reads the sites); topical diclofenac with an oral NSAID, or
timolol eye drops with an oral beta blocker, stay duplicates. Two prescriptions the knowledge
cannot resolve that leave the same words unread ("Zyxoral 10 mg", "Zyxoral 20 mg oral tablet")
are a possible duplicate, flagged for a check by hand rather than passed over in silence."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations
from typing import ClassVar, Final
from uuid import UUID

from projections.queries import active_medications
from projections.state import Kind, UserState, record_address
from projections.views import MedicationView
from rules.administration import Site, act_apart, site_of
from rules.base import Finding, Focus, RuleRef, evidence_of, finding_id, shared_purpose
from rules.knowledge.model import DrugKnowledge, DrugResolution
from rules.resolution import CachedResolver
from schemas.alerts import DuplicateTherapyFinding
from schemas.severity import Severity

RULE = RuleRef(
    id="duplicate-therapy",
    version=1,
    severity=Severity.WARNING,
    description=(
        "Two active prescriptions share an ingredient, a class or a therapeutic group (not two"
        " of a locally acting class used at different sites), or name the same medicine the"
        " knowledge cannot read."
    ),
)


@dataclass
class DuplicateTherapyRule:
    knowledge: DrugKnowledge
    ref: RuleRef = RULE
    watches: ClassVar[frozenset[Kind]] = frozenset({Kind.MEDICATION})
    _resolve: CachedResolver = field(init=False, repr=False)
    _site_of: Callable[[str | None, str], Site | None] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._resolve = CachedResolver(self.knowledge)
        self._site_of = lru_cache(maxsize=65536)(site_of)

    def findings(self, state: UserState, focus: Focus) -> Mapping[UUID, Finding]:
        found: dict[UUID, Finding] = {}
        for first, second in _pairs(active_medications(state), focus):
            purpose = shared_purpose(first.prescribed, second.prescribed)
            finding = None if purpose is None else self._finding(first, second, purpose)
            if finding is not None:
                found[finding_id(state, finding)] = finding
        return found

    def _act_apart(self, first: MedicationView, second: MedicationView) -> bool:
        sites = (self._site_of(m.route, m.drug) for m in (first, second))
        return act_apart(*sites)

    def _resolution(self, medication: MedicationView) -> DrugResolution:
        return self._resolve(medication.drug, medication.codes)

    def _finding(
        self, first: MedicationView, second: MedicationView, purpose: str
    ) -> Finding | None:
        one, two = self._resolution(first), self._resolution(second)
        if not (one.resolved and two.resolved):
            unread = _same_unread_name(one, two)
            if unread is None:
                return None
            detail = (
                f"both active prescriptions name {unread!r}, which the drug knowledge cannot "
                "read: check by hand whether they are one medicine"
            )
            title = f"Possible duplicate therapy (not recognised): {first.drug} and {second.drug}"
            unread_name = (UNREAD_NAME, (unread,))
            return self._duplicate(first, second, unread_name, title, detail, purpose)
        if _site_specific(one, two) and self._act_apart(first, second):
            return None
        shared = _shared(one, two)
        if shared is None:
            return None
        what, common = shared
        detail = f"both active prescriptions share {_named(what, tuple(map(one.label, common)))}"
        title = f"Duplicate therapy: {first.drug} and {second.drug}"
        return self._duplicate(first, second, (what, common), title, detail, purpose)

    def _duplicate(
        self,
        first: MedicationView,
        second: MedicationView,
        shared: tuple[str, tuple[str, ...]],
        title: str,
        detail: str,
        purpose: str,
    ) -> Finding:
        what, common = shared
        return Finding(
            rule=RULE,
            cause=tuple(
                sorted(
                    (f"medication:{first.prescription_id}", f"medication:{second.prescription_id}")
                )
            ),
            severity=RULE.severity,
            title=title,
            detail=detail,
            evidence=tuple(
                evidence_of(m.prescribed, m.prescription_id, "medication", f"prescribed {m.drug}")
                for m in (first, second)
            ),
            purpose=purpose,
            duplicate_therapy=DuplicateTherapyFinding(
                prescription_ids=(first.prescription_id, second.prescription_id),
                drugs=(first.drug, second.drug),
                shared_by=what,
                shared=common,
                knowledge_version=self.knowledge.version,
            ),
        )


def _pairs(
    medications: list[MedicationView], focus: Focus
) -> Iterator[tuple[MedicationView, MedicationView]]:
    """Every pair of the active prescriptions (in their order) with at least one in focus: a
    linear pass per focused prescription, not a pass over all pairs, so a subject with many
    prescriptions is checked in time proportional to their number on each event."""
    if focus is None:
        yield from combinations(medications, 2)
        return
    focused = [n for n, medication in enumerate(medications) if _key(medication) in focus]
    paired: set[int] = set()
    for n in focused:
        for m in range(len(medications)):
            if m != n and m not in paired:
                yield (medications[min(n, m)], medications[max(n, m)])
        paired.add(n)


UNREAD_NAME: Final = "unrecognised name"
"""`shared_by` of two prescriptions the knowledge cannot resolve that name the same unknown
medicine ("Zyxoral 10 mg" and "Zyxoral 20 mg oral tablet")."""


def _same_unread_name(one: DrugResolution, two: DrugResolution) -> str | None:
    """The words both texts leave unread, when they are the same and what each text does
    resolve is the same too: the same unknown medicine, in another strength or form."""
    unread = one.unread_medicine
    if unread is None or unread != two.unread_medicine:
        return None
    return " ".join(one.unrecognised)


def _shared(one: DrugResolution, two: DrugResolution) -> tuple[str, tuple[str, ...]] | None:
    """What two drugs have in common, most specific first: active ingredients, classes, then
    therapeutic groups (two anticoagulants of different classes)."""
    for what, first, second in (
        ("ingredient", one.active_ingredients, two.active_ingredients),
        ("class", one.classes, two.classes),
        ("therapeutic group", one.therapeutic_groups, two.therapeutic_groups),
    ):
        common = tuple(sorted(set(first) & set(second)))
        if common:
            return what, common
    return None


_PLURALS: Final = {"ingredient": "ingredients", "class": "classes"}


def _named(what: str, names: tuple[str, ...]) -> str:
    """'the class propionic acid NSAIDs', or 'the classes NSAIDs; propionic acid NSAIDs' (a
    label may hold commas)."""
    if len(names) == 1:
        return f"the {what} {names[0]}"
    return f"the {_PLURALS.get(what, what + 's')} {'; '.join(names)}"


def _site_specific(one: DrugResolution, two: DrugResolution) -> bool:
    """Whether the two drugs share a class whose local forms act where applied."""
    return bool(set(one.site_specific_classes) & set(two.site_specific_classes))


def _key(medication: MedicationView) -> tuple[Kind, str]:
    return record_address(Kind.MEDICATION, medication.prescription_id, medication.prescribed)
