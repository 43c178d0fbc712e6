"""One allergen/drug judgement as JSON-ready data, with its base severity.

The base severity depends on the match level only; modifiers such as the allergy's criticality
or an intolerance (rather than an allergy) are applied by the alerting rules, among them
`test_first_after_severe_reaction`, which makes a `low_risk` pair a warning after a severe
reaction.
"""

from __future__ import annotations

from rules.knowledge.model import Coding, DrugKnowledge, MatchLevel

BASE_SEVERITY: dict[MatchLevel, str] = {
    MatchLevel.SAME_INGREDIENT: "critical",
    MatchLevel.SAME_CLASS: "critical",
    MatchLevel.PARTIAL: "warning",
    MatchLevel.UNVERIFIED: "warning",
    MatchLevel.LOW_RISK: "info",
    MatchLevel.NONE: "none",
}


def base_severity(level: MatchLevel) -> str:
    """CDS Hooks style severity implied by a match level alone."""
    return BASE_SEVERITY[level]


def check_drug(
    knowledge: DrugKnowledge,
    allergy: str,
    drug: str,
    allergy_codes: tuple[Coding, ...] = (),
    drug_codes: tuple[Coding, ...] = (),
) -> dict[str, object]:
    """Judge `drug` for someone allergic to `allergy` (names, and codings when known)."""
    verdict = knowledge.cross_reactivity(allergy, drug, allergy_codes, drug_codes)
    return {
        "allergen": verdict.allergen,
        "drug": verdict.drug,
        "ingredients": list(verdict.ingredients),
        "matched": list(verdict.matched),
        "level": verdict.level.value,
        "severity": base_severity(verdict.level),
        "reason": verdict.reason,
        "source": verdict.source,
        "test_first_after_severe_reaction": verdict.test_first_after_severe_reaction,
        "knowledge_version": knowledge.version,
    }
