"""Judges one allergen concept against one drug concept.

Order of precedence:
1. identity: the same ingredient (or the same class) on both sides;
2. class words: an allergen recorded as a class ("penicillins") covers every member, but the
   members of a subclass a cited row relates to the class ("NSAIDs" vs selective COX-2
   inhibitors: low_risk), which the row judges;
3. side chains: two cephalosporins the side-chain table lists are judged by what their R1 and
   R2 side chains share (`side_chains.SideChainTable.compare`), not by their shared class;
4. the most specific evidence among the cited cross-reactivity rows (applied in both
   directions) and shared classes whose `shared_level` says membership alone implies a risk.
   Specificity: an ingredient key counts 100, a class key its depth in the class tree, so an
   ingredient row ("amoxicillin" vs "cefadroxil": partial) beats a class row ("penicillins" vs
   "cephalosporins": low_risk), and a subclass beats its parent. On a tie an explicit row beats
   class membership, then the stronger level wins;
5. otherwise no known relation (`none`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from itertools import product

from rules.knowledge.model import MatchLevel
from rules.knowledge.tables import CLASS_PREFIX, CrossReactivityRow, KnowledgeTables

STRENGTH: dict[MatchLevel, int] = {
    MatchLevel.NONE: 0,
    MatchLevel.LOW_RISK: 1,
    MatchLevel.UNVERIFIED: 2,
    MatchLevel.PARTIAL: 3,
    MatchLevel.SAME_CLASS: 4,
    MatchLevel.SAME_INGREDIENT: 5,
}
INGREDIENT_SPECIFICITY = 100
DEFINITIONAL_SPECIFICITY = 1000
IDENTITY = "ingredient identity"
NO_KNOWN_ALLERGY = CLASS_PREFIX + "no_known_allergy"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The judgement for one (allergen concept, drug concept) pair."""

    level: MatchLevel
    reason: str
    source: str
    drug_concept: str
    explicit: bool = False
    specificity: int = 0
    test_first_after_severe_reaction: bool = False

    @property
    def rank(self) -> tuple[int, bool, int]:
        return STRENGTH[self.level], self.explicit, self.specificity


def is_class(concept: str) -> bool:
    return concept.startswith(CLASS_PREFIX)


def _rows_both_ways(
    rows: tuple[CrossReactivityRow, ...],
) -> dict[tuple[str, str], list[CrossReactivityRow]]:
    """The rows by (allergen, drug) key, each also under its reverse (a penicillin allergy
    against a cephalosporin is judged as a cephalosporin allergy against a penicillin), except
    where a row is written for the reverse itself: the risk is not always the same both ways
    (after angioedema on an ACE inhibitor most patients tolerate an ARB; after angioedema on an
    ARB an ACE inhibitor's label warns of a higher risk)."""
    by_key: dict[tuple[str, str], list[CrossReactivityRow]] = {}
    for row in rows:
        by_key.setdefault((row.allergen, row.drug), []).append(row)
    written = set(by_key)
    for row in rows:
        if row.allergen != row.drug and (row.drug, row.allergen) not in written:
            by_key.setdefault((row.drug, row.allergen), []).append(row)
    return by_key


class Judge:
    """Judges concept pairs against one set of tables."""

    def __init__(self, tables: KnowledgeTables) -> None:
        self._tables = tables
        self._rows = _rows_both_ways(tables.rows)
        self.keys: Callable[[str], frozenset[str]] = cache(self._keys)
        self.depth: Callable[[str], int] = cache(self._depth)
        self.members: Callable[[str], tuple[str, ...]] = cache(self._members)

    def label(self, concept: str) -> str:
        if is_class(concept):
            return self._tables.classes[concept.removeprefix(CLASS_PREFIX)].label
        return concept

    def is_non_drug(self, concept: str) -> bool:
        ingredient = self._tables.ingredients.get(concept)
        return ingredient is not None and ingredient.kind == "non_drug"

    def judge(self, allergen: str, drug: str) -> Verdict:
        identity = self._identity(allergen, drug)
        if identity is not None:
            return identity
        side_chain = self._tables.side_chains.compare(allergen, drug)
        if side_chain is not None:
            level, reason, source = side_chain.level, side_chain.reason, side_chain.source
            test_first = side_chain.test_first_after_severe_reaction
            return Verdict(
                level, reason, source, drug, True, 2 * INGREDIENT_SPECIFICITY, test_first
            )
        evidence = list(self._evidence(allergen, drug))
        if not evidence:
            return self._unrelated(allergen, drug)
        return max(evidence, key=lambda v: (v.specificity, v.explicit, STRENGTH[v.level]))

    def _identity(self, allergen: str, drug: str) -> Verdict | None:
        if allergen == drug and not is_class(drug):
            reason = f"{drug} is itself the recorded allergen"
            return Verdict(
                MatchLevel.SAME_INGREDIENT, reason, IDENTITY, drug, True, DEFINITIONAL_SPECIFICITY
            )
        if is_class(allergen) and allergen in self.keys(drug):
            carved_out = self._carved_out(allergen, drug)
            if carved_out is not None:
                return carved_out
            allergen_class = self.label(allergen)
            reason = (
                f"{self.label(drug)} is one of the {allergen_class}, the recorded allergen class"
            )
            return self._membership(allergen, drug, reason)
        if is_class(drug) and drug in self.keys(allergen):
            reason = f"the {self.label(drug)} include the recorded allergen {self.label(allergen)}"
            return self._membership(drug, drug, reason)
        return None

    def _carved_out(self, allergen_class: str, drug: str) -> Verdict | None:
        """A cited row between the recorded class and a subclass the drug belongs to: the
        class word covers its members but those a row judges otherwise ("NSAIDs" recorded,
        a selective COX-2 inhibitor prescribed: the row's `low_risk`, not `same_class`)."""
        subclasses = (
            key
            for key in self.keys(drug)
            if is_class(key) and key != allergen_class and allergen_class in self.keys(key)
        )
        found = [
            Verdict(
                row.level,
                f"{self.label(drug)} is one of the {self.label(key)}: {row.reason}",
                row.source,
                drug,
                True,
                DEFINITIONAL_SPECIFICITY,
            )
            for key in sorted(subclasses, key=self.depth, reverse=True)
            for row in self._rows.get((allergen_class, key), ())
        ]
        return found[0] if found else None

    def _membership(self, cited_class: str, drug: str, reason: str) -> Verdict:
        source = f"class membership: {self.label(cited_class)}"
        return Verdict(MatchLevel.SAME_CLASS, reason, source, drug, True, DEFINITIONAL_SPECIFICITY)

    def _evidence(self, allergen: str, drug: str) -> Iterator[Verdict]:
        allergen_keys, drug_keys = self.keys(allergen), self.keys(drug)
        for allergen_key, drug_key in product(sorted(allergen_keys), sorted(drug_keys)):
            for row in self._rows.get((allergen_key, drug_key), ()):
                reason = f"{self.label(allergen)} vs {self.label(drug)}: {row.reason}"
                specificity = self._specificity(allergen_key) + self._specificity(drug_key)
                yield Verdict(row.level, reason, row.source, drug, True, specificity)
        for shared in sorted(allergen_keys & drug_keys):
            yield from self._shared_class(shared, allergen, drug)
        if is_class(allergen) and not is_class(drug):
            yield from self._culprit_unknown(allergen, drug)

    def _culprit_unknown(self, allergen_class: str, drug: str) -> Iterator[Verdict]:
        """A class recorded as the allergen ("penicillin", "cephalosporins") does not say which
        member caused the reaction: a cited row that flags the drug against one of its members
        (`partial` or stronger: amoxicillin and cephalexin share a side chain) flags it against
        the class too, above the class-to-class row, since that member may be the culprit."""
        for member in self.members(allergen_class):
            for row in self._rows.get((member, drug), ()):
                if STRENGTH[row.level] < STRENGTH[MatchLevel.PARTIAL]:
                    continue
                reason = (
                    f"{self.label(allergen_class)} vs {self.label(drug)}: the recorded class "
                    f"does not say which of its drugs caused the reaction, and for {member}: "
                    f"{row.reason}"
                )
                specificity = INGREDIENT_SPECIFICITY + self._specificity(allergen_class)
                yield Verdict(row.level, reason, row.source, drug, True, specificity)

    def _shared_class(self, shared: str, allergen: str, drug: str) -> Iterator[Verdict]:
        if not is_class(shared):
            return
        level = self._tables.classes[shared.removeprefix(CLASS_PREFIX)].shared_level
        if level is None:
            return
        label = self.label(shared)
        both = f"{self.label(drug)} and the recorded allergen {self.label(allergen)}"
        reason = f"{both} both belong to the {label}"
        source = f"class membership: {label}"
        yield Verdict(level, reason, source, drug, False, 2 * self.depth(shared))

    def _unrelated(self, allergen: str, drug: str) -> Verdict:
        if self.is_non_drug(allergen):
            reason = f"{allergen} is a non-drug allergen with no documented cross-reactivity"
        else:
            reason = "no shared ingredient, class or documented cross-reactivity"
        reason = f"{self.label(allergen)} vs {self.label(drug)}: {reason}"
        return Verdict(MatchLevel.NONE, reason, "no cross-reactivity row or shared class", drug)

    def _specificity(self, key: str) -> int:
        return self.depth(key) if is_class(key) else INGREDIENT_SPECIFICITY

    def _keys(self, concept: str) -> frozenset[str]:
        """The concept itself and every class it belongs to, up to the roots."""
        if is_class(concept):
            direct: tuple[str, ...] = (concept.removeprefix(CLASS_PREFIX),)
        else:
            direct = self._tables.ingredients[concept].classes
        return frozenset({concept, *(CLASS_PREFIX + c for c in self._ancestors(direct))})

    def _members(self, class_concept: str) -> tuple[str, ...]:
        """The ingredients of a class (and of its subclasses), in name order."""
        return tuple(
            sorted(
                name
                for name in self._tables.ingredients
                if class_concept in self.keys(name) and not self.is_non_drug(name)
            )
        )

    def _ancestors(self, class_ids: tuple[str, ...]) -> Iterator[str]:
        for class_id in class_ids:
            current: str | None = class_id
            while current is not None:
                yield current
                current = self._tables.classes[current].parent

    def _depth(self, class_concept: str) -> int:
        parent = self._tables.classes[class_concept.removeprefix(CLASS_PREFIX)].parent
        return 0 if parent is None else 1 + self._depth(CLASS_PREFIX + parent)
