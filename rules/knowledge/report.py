"""One allergen/drug judgement as JSON-ready data, with its severity.

The severity depends on the match level, and on the one part of the allergy's history that
check-drug knows: a severe cutaneous adverse reaction (SJS, TEN, DRESS, AGEP) the allergy text
or reactions name. After one, as the alerting rules judge an allergy with a severe reaction,
a related drug in need of an evaluation first (`low_risk` with
`test_first_after_severe_reaction`) is a warning and a `partial` one critical. The other
modifiers, the allergy's criticality, verification status and type, are applied by the
alerting rules only.
"""

from __future__ import annotations

from rules.knowledge.model import Coding, CrossReactivity, DrugKnowledge, MatchLevel

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


def severity(verdict: CrossReactivity) -> str:
    """The severity of a judgement: its level's, raised after a severe cutaneous adverse
    reaction the allergy records."""
    if verdict.severe_cutaneous_reaction is None:
        return base_severity(verdict.level)
    if verdict.level is MatchLevel.PARTIAL:
        return "critical"
    if verdict.level is MatchLevel.LOW_RISK and verdict.test_first_after_severe_reaction:
        return "warning"
    return base_severity(verdict.level)


def check_drug(
    knowledge: DrugKnowledge,
    allergy: str,
    drug: str,
    allergy_codes: tuple[Coding, ...] = (),
    drug_codes: tuple[Coding, ...] = (),
    reactions: tuple[str, ...] = (),
) -> dict[str, object]:
    """Judge `drug` for someone allergic to `allergy` (names, codings when known, and the
    recorded reactions' manifestations)."""
    verdict = knowledge.cross_reactivity(allergy, drug, allergy_codes, drug_codes, reactions)
    return {
        "allergen": verdict.allergen,
        "drug": verdict.drug,
        "ingredients": list(verdict.ingredients),
        "matched": list(verdict.matched),
        "level": verdict.level.value,
        "severity": severity(verdict),
        "reason": verdict.reason,
        "source": verdict.source,
        "test_first_after_severe_reaction": verdict.test_first_after_severe_reaction,
        "severe_cutaneous_reaction": verdict.severe_cutaneous_reaction,
        "knowledge_version": knowledge.version,
    }
