"""Duplicate therapy: two active prescriptions of the same ingredient, class or therapeutic
group. Two of a class whose local forms act where applied, used at different sites, are a
treatment plan instead (oral prednisone with an inhaled corticosteroid, nystatin by mouth and
on the skin: `rules.administration` reads the sites); topical diclofenac with an oral NSAID, or
timolol eye drops with an oral beta blocker, stay duplicates. Two prescriptions the knowledge
cannot resolve that leave the same words unread ("Zyxoral 10 mg", "Zyxoral 20 mg oral tablet")
are a possible duplicate, flagged for a check by hand rather than passed over in silence."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import ClassVar, Final
from uuid import UUID

from projections.queries import active_medications
from projections.state import Kind, UserState, record_address
from projections.views import MedicationView
from rules.administration import Site, act_apart, site_of
from rules.base import Finding, Focus, RuleRef, evidence_of, finding_id
from rules.knowledge.model import DrugKnowledge, DrugResolution
from rules.resolution import CachedResolver
from schemas.alerts import DuplicateTherapyFinding
from schemas.events import Coding
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
    _concepts: Callable[[str, tuple[Coding, ...]], tuple[Concept, ...]] = field(
        init=False, repr=False
    )
    _indexes: dict[int, tuple[UserState, _Index]] = field(
        default_factory=dict, init=False, repr=False
    )
    """The index of the last two states judged (the before and after of a transition, each
    asked for its reach and its findings), by identity."""

    def __post_init__(self) -> None:
        self._resolve = CachedResolver(self.knowledge)
        self._site_of = lru_cache(maxsize=65536)(site_of)
        self._concepts = lru_cache(maxsize=65536)(self._concepts_of)

    def findings(self, state: UserState, focus: Focus) -> Mapping[UUID, Finding]:
        found: dict[UUID, Finding] = {}
        if focus is not None and not _any_unended(state, focus):
            return found
        index = self._index(state)
        for earlier, later in self._anchored(index, focus):
            finding = self._finding(earlier.medication, later.medication, earlier.purpose)
            if finding is not None:
                found[finding_id(state, finding)] = finding
        return found

    def reach(self, state: UserState, focus: frozenset[tuple[Kind, str]]) -> frozenset[Key]:
        """The prescriptions whose pairing a change of the `focus` ones can change: those that
        share a concept with one of them and started after it (its anchor may be the one)."""
        if not _any_unended(state, focus):
            return frozenset()
        index = self._index(state)
        return frozenset(entry.address for entry in _later_sharers(index, index.focused(focus)))

    def _index(self, state: UserState) -> _Index:
        held = self._indexes.get(id(state))
        if held is not None and held[0] is state:
            return held[1]
        index = self._indexed(state)
        if len(self._indexes) >= 2:
            del self._indexes[next(iter(self._indexes))]
        self._indexes[id(state)] = (state, index)
        return index

    def _indexed(self, state: UserState) -> _Index:
        entries = [self._entry(medication) for medication in active_medications(state)]
        entries.sort(key=_rank)
        by_concept: dict[tuple[str, Concept], list[_Entry]] = {}
        for entry in entries:
            for concept in entry.concepts:
                by_concept.setdefault((entry.purpose, concept), []).append(entry)
        return _Index(entries, by_concept)

    def _entry(self, medication: MedicationView) -> _Entry:
        prescribed = medication.prescribed
        start = prescribed.valid_from or prescribed.occurred_at
        concepts = self._concepts(medication.drug, medication.codes)
        rank = (start, medication.prescription_id)
        return _Entry(rank, _key(medication), medication, concepts)

    def _anchored(self, index: _Index, focus: Focus) -> Iterator[tuple[_Entry, _Entry]]:
        """Each active prescription paired with the first-started active prescription before it
        that shares each of its concepts (one pair per prescription it duplicates, not one per
        pair of all the prescriptions that share a concept), limited to the pairs with a member
        in `focus`."""
        if focus is None:
            later: Iterable[_Entry] = index.entries
        else:
            focused = index.focused(focus)
            later = sorted({*focused, *_later_sharers(index, focused)}, key=_rank)
        for entry in later:
            for anchor in self._anchors(index, entry):
                if focus is None or anchor.address in focus or entry.address in focus:
                    yield anchor, entry

    def _anchors(self, index: _Index, entry: _Entry) -> dict[_Entry, None]:
        """The first-started prescription before `entry` that it duplicates, for each of its
        concepts (a prescription of a locally acting class used at another site is passed by)."""
        anchors: dict[_Entry, None] = {}
        for concept in entry.concepts:
            for other in index.by_concept[(entry.purpose, concept)]:
                if other.rank >= entry.rank:
                    break
                if concept[0] == UNREAD_NAME or not self._apart(other, entry):
                    anchors[other] = None
                    break
        return anchors

    def _apart(self, first: _Entry, second: _Entry) -> bool:
        one, two = (self._resolution(entry.medication) for entry in (first, second))
        return _site_specific(one, two) and self._act_apart(first.medication, second.medication)

    def _concepts_of(self, drug: str, codes: tuple[Coding, ...]) -> tuple[Concept, ...]:
        return _concepts_of(self._resolve(drug, codes))

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


Key = tuple[Kind, str]
Concept = tuple[str, object]
"""What a prescription may share with another: ("ingredient", "ibuprofen"), ("class", ...),
("therapeutic group", ...), or (UNREAD_NAME, the words it leaves unread) when the knowledge
cannot resolve it."""


@dataclass(frozen=True, slots=True, eq=False)
class _Entry:
    """An active prescription, with when it started (then its id: the order of the pairing) and
    the concepts it may share."""

    rank: tuple[datetime, str]
    address: Key
    medication: MedicationView
    concepts: tuple[Concept, ...]

    @property
    def purpose(self) -> str:
        """The purpose the prescription was recorded for (only prescriptions of one purpose
        are paired)."""
        return self.medication.prescribed.purpose


@dataclass(frozen=True, slots=True)
class _Index:
    entries: list[_Entry]
    """The active prescriptions, first started first."""
    by_concept: dict[tuple[str, Concept], list[_Entry]]
    """The entries (in that order) that hold each concept, by purpose and concept."""

    def focused(self, focus: frozenset[Key]) -> list[_Entry]:
        """The entries of the `focus` prescriptions."""
        return [entry for entry in self.entries if entry.address in focus]


def _concepts_of(resolution: DrugResolution) -> tuple[Concept, ...]:
    """What a prescription of `resolution` shares with another that makes them duplicates (as
    `DuplicateTherapyRule._finding` judges them)."""
    if not resolution.resolved:
        unread = resolution.unread_medicine
        return () if unread is None else ((UNREAD_NAME, unread),)
    return (
        *(("ingredient", name) for name in resolution.active_ingredients),
        *(("class", name) for name in resolution.classes),
        *(("therapeutic group", name) for name in resolution.therapeutic_groups),
    )


def _rank(entry: _Entry) -> tuple[datetime, str]:
    return entry.rank


def _any_unended(state: UserState, focus: frozenset[Key]) -> bool:
    """Whether one of the `focus` claims is a prescription neither stopped nor ended (without
    one, no pair has a member in focus, and none can move)."""
    unended = state.unended_medications
    return any(kind is Kind.MEDICATION and key in unended for kind, key in focus)


def _later_sharers(index: _Index, focused: list[_Entry]) -> list[_Entry]:
    """The entries that share a concept with a `focused` entry and started after it."""
    first: dict[tuple[str, Concept], tuple[datetime, str]] = {}
    for entry in focused:
        for concept in entry.concepts:
            held = first.get((entry.purpose, concept))
            first[(entry.purpose, concept)] = entry.rank if held is None else min(held, entry.rank)
    return [
        entry
        for shared, rank in first.items()
        for entry in index.by_concept[shared]
        if entry.rank > rank
    ]


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
