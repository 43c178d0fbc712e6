"""An allergy list that contradicts itself: a "no known allergy" statement in force beside an
active allergy of a category it covers ("No known drug allergies" and a penicillin allergy).
FHIR expects the statement to be refuted or entered in error once an allergy is recorded; until
someone says which holds, a reader of the list cannot trust either. The drug-allergy rule keeps
judging the allergy meanwhile."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import ClassVar
from uuid import UUID

from projections.queries import active_allergies, no_known_allergy_statements
from projections.state import Kind, UserState, record_address
from projections.views import AllergyView
from rules.base import Finding, Focus, RuleRef, evidence_of, finding_id, kind_to, shared_purpose
from rules.knowledge.model import DrugKnowledge
from rules.resolution import CachedResolver
from schemas.events import AllergyCategory
from schemas.severity import Severity

RULE = RuleRef(
    id="allergy-list-contradiction",
    version=1,
    severity=Severity.WARNING,
    description=(
        "A 'no known allergy' statement in force and an active allergy of a category it covers "
        "are both on the subject's allergy list: one of them needs to be corrected."
    ),
)

_EVERY_CATEGORY = frozenset(AllergyCategory)


@dataclass
class AllergyListRule:
    knowledge: DrugKnowledge
    ref: RuleRef = RULE
    watches: ClassVar[frozenset[Kind]] = frozenset({Kind.ALLERGY})
    _resolve: CachedResolver = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._resolve = CachedResolver(self.knowledge)

    def findings(self, state: UserState, focus: Focus) -> Mapping[UUID, Finding]:
        found: dict[UUID, Finding] = {}
        for statement, allergy in _pairs(state, focus):
            categories, inferred = self._categories(allergy)
            shared = _covered(statement) & categories
            if shared:
                finding = _finding(statement, allergy, shared, inferred)
                found[finding_id(state, finding)] = finding
        return found

    def _categories(self, allergy: AllergyView) -> tuple[frozenset[AllergyCategory], bool]:
        """The allergy's categories, and whether they were read from its substance (a record
        without a category): by the knowledge layer, or every category when it cannot say."""
        if allergy.categories:
            return frozenset(allergy.categories), False
        resolution = self._resolve(allergy.substance, allergy.codes)
        if not (resolution.resolved and resolution.allergy_categories):
            return _EVERY_CATEGORY, True
        return frozenset(AllergyCategory(c) for c in resolution.allergy_categories), True


def _pairs(state: UserState, focus: Focus) -> Iterator[tuple[AllergyView, AllergyView]]:
    """Each statement with each active allergy recorded for its purpose, at least one of them
    in focus."""
    statements = no_known_allergy_statements(state)
    if not statements:
        return
    for allergy in active_allergies(state):
        for statement in statements:
            in_focus = focus is None or {_key(statement), _key(allergy)} & focus
            if in_focus and shared_purpose(statement.record, allergy.record) is not None:
                yield statement, allergy


def _covered(statement: AllergyView) -> frozenset[AllergyCategory]:
    """What a statement says there is no allergy to (every category when it names none)."""
    return frozenset(statement.categories) or _EVERY_CATEGORY


def _finding(
    statement: AllergyView,
    allergy: AllergyView,
    shared: frozenset[AllergyCategory],
    inferred: bool,
) -> Finding:
    kind = "allergy" if allergy.allergy_type is None else allergy.allergy_type.value
    named = ", ".join(sorted(category.value for category in shared))
    read = " (no category recorded; read from the substance)" if inferred else ""
    return Finding(
        rule=RULE,
        cause=tuple(sorted(f"allergy:{view.allergy_id}" for view in (statement, allergy))),
        severity=RULE.severity,
        title=(
            f"Allergy list records {statement.substance!r} as no known allergy but also an "
            f"active {kind_to(kind, allergy.substance)}"
        ),
        detail=(
            f"the statement {statement.allergy_id} ({named}) and the active {kind} "
            f"{allergy.allergy_id} ({allergy.substance}{read}) cannot both hold: confirm the "
            f"{kind}, and refute or enter in error whichever record is wrong"
        ),
        evidence=(
            evidence_of(statement.record, statement.allergy_id, "allergy", statement.substance),
            evidence_of(
                allergy.record, allergy.allergy_id, "allergy", kind_to(kind, allergy.substance)
            ),
        ),
        purpose=allergy.record.purpose,
    )


def _key(allergy: AllergyView) -> tuple[Kind, str]:
    return record_address(Kind.ALLERGY, allergy.allergy_id, allergy.record)
