"""One allergen/drug judgement as JSON-ready data, with its severity.

The severity depends on the match level, and on the part of the allergy's history that
check-drug knows, its text and recorded reactions, judged as the alerting rules judge a record
that does not say its type: after a severe cutaneous adverse reaction (SJS, TEN, DRESS, AGEP),
or after anaphylaxis, named by the allergy's text ("amoxicillin - anaphylaxis") or a recorded
reaction's manifestation (`--reaction Anaphylaxis`),
a related drug in need of an evaluation first (`low_risk` with
`test_first_after_severe_reaction`) is a warning and a `partial` one critical; when every
recorded reaction is a known side effect of the substance (`side_effect`: "codeine -
nausea"), an intolerance, the severity is one step lower (never below info). The other
modifiers, the allergy's criticality, verification status and type, are applied by the
alerting rules only.
"""

from __future__ import annotations

from rules.knowledge.model import Coding, CrossReactivity, DrugKnowledge, MatchLevel
from schemas.severe_reactions import life_threatening_reaction

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


_ORDER = ("info", "warning", "critical")


def severity(verdict: CrossReactivity, allergy_texts: tuple[str, ...] = ()) -> str:
    """The severity of a judgement: its level's, raised after a severe cutaneous adverse
    reaction the allergy records or an anaphylaxis or angioedema one of `allergy_texts` (its text, its
    reactions' manifestations) names, one step lower for an intolerance its reactions show."""
    base = base_severity(verdict.level)
    if base == "none":
        return base
    if (
        verdict.severe_cutaneous_reaction is not None
        or life_threatening_reaction(*allergy_texts) is not None
    ):
        if verdict.level is MatchLevel.PARTIAL:
            return "critical"
        if verdict.level is MatchLevel.LOW_RISK and verdict.test_first_after_severe_reaction:
            return "warning"
    if verdict.side_effect is not None:
        return _ORDER[max(_ORDER.index(base) - 1, 0)]
    return base


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
        "severity": severity(verdict, (allergy, *reactions)),
        "reason": verdict.reason,
        "source": verdict.source,
        "test_first_after_severe_reaction": verdict.test_first_after_severe_reaction,
        "severe_cutaneous_reaction": verdict.severe_cutaneous_reaction,
        "side_effect": verdict.side_effect,
        "knowledge_version": knowledge.version,
    }
