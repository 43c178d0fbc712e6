"""Cephalosporin against cephalosporin, judged by side chains (`side_chains.csv`,
`side_chain_levels.csv`).

Two cephalosporins share a class, but allergic cross-reactivity between them follows their
side chains: a shared R1 (position 7) side chain is the class-wide risk, a shared R2 (position 3)
side chain alone a partial one, and dissimilar side chains a low risk. Only the ingredients the
table lists are compared; every other pair is left to the rows and classes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final

from rules.knowledge.errors import KnowledgeDataError
from rules.knowledge.model import MatchLevel


class Shared(StrEnum):
    """What two compared ingredients have in common."""

    R1 = "r1"
    R2 = "r2"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class SideChains:
    """The R1 and R2 groups of one ingredient (more than one where its chain resembles
    several)."""

    r1: frozenset[str]
    r2: frozenset[str]


@dataclass(frozen=True, slots=True)
class SideChainJudgement:
    """A level with its cited reason: a row of `side_chain_levels.csv`, or the judgement of
    one pair (the row's reason after what the pair's side chains share)."""

    level: MatchLevel
    reason: str
    source: str
    test_first_after_severe_reaction: bool = False


@dataclass(frozen=True)
class SideChainTable:
    chains: Mapping[str, SideChains]
    levels: Mapping[Shared, SideChainJudgement]

    def compare(self, allergen: str, drug: str) -> SideChainJudgement | None:
        """The side-chain judgement of two listed ingredients, None unless both are listed."""
        first, second = self.chains.get(allergen), self.chains.get(drug)
        if first is None or second is None:
            return None
        common_r1, common_r2 = first.r1 & second.r1, first.r2 & second.r2
        r1 = f"R1 side chains differ ({_names(first.r1)} / {_names(second.r1)})"
        r2 = f"R2 side chains differ ({_names(first.r2)} / {_names(second.r2)})"
        if common_r1:
            shared, detail = Shared.R1, f"R1 side chains alike ({_names(common_r1)})"
        elif common_r2:
            shared, detail = Shared.R2, f"{r1}, R2 side chains alike ({_names(common_r2)})"
        else:
            shared, detail = Shared.NONE, f"{r1}, {r2}"
        found = self.levels[shared]
        return replace(found, reason=f"{allergen} vs {drug}: {detail}. {found.reason}")


def _names(groups: frozenset[str]) -> str:
    return " or ".join(sorted(groups))


TEST_FIRST: Final = {"yes": True, "no": False}
ALLOWED_LEVELS: Final = frozenset({MatchLevel.SAME_CLASS, MatchLevel.PARTIAL, MatchLevel.LOW_RISK})


def side_chain_table(
    chain_records: Iterable[Mapping[str, str]],
    level_records: Iterable[Mapping[str, str]],
    ingredients: frozenset[str],
) -> SideChainTable:
    """Both files read and checked: every ingredient known and listed once with both side
    chains and a source, and a cited level for each of r1, r2 and none."""
    chains: dict[str, SideChains] = {}
    for record in chain_records:
        name = record["ingredient"]
        found = SideChains(_groups(record["r1"]), _groups(record["r2"]))
        if name not in ingredients or name in chains or not found.r1 or not found.r2:
            raise KnowledgeDataError(
                f"side chains of {name}: needs a known ingredient listed once, with r1 and r2"
            )
        if not record["source"]:
            raise KnowledgeDataError(f"side chains of {name}: needs a source")
        chains[name] = found
    levels: dict[Shared, SideChainJudgement] = {}
    for record in level_records:
        shared, level, test_first = record["shared"], record["level"], record["test_first"]
        if (
            shared not in set(Shared)
            or Shared(shared) in levels
            or level not in ALLOWED_LEVELS
            or test_first not in TEST_FIRST
            or not record["reason"]
            or not record["source"]
        ):
            raise KnowledgeDataError(
                f"side-chain level {shared}: needs one row for each of r1, r2 and none, a level"
                f" of {', '.join(sorted(ALLOWED_LEVELS))}, test_first yes or no, a reason and a"
                " source"
            )
        levels[Shared(shared)] = SideChainJudgement(
            MatchLevel(level), record["reason"], record["source"], TEST_FIRST[test_first]
        )
    if chains and set(levels) != set(Shared):
        raise KnowledgeDataError("side_chain_levels.csv needs a row for each of r1, r2, none")
    return SideChainTable(chains, levels)


def _groups(cell: str) -> frozenset[str]:
    return frozenset(part.strip() for part in cell.split(";") if part.strip())
