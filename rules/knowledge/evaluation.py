"""Scores any `DrugKnowledge` backend against a table of expected (allergen, drug, level) pairs.

The pair table is CSV (`#` lines are comments) with the columns
`allergen, allergen_codes, drug, drug_codes, expected, topic`; codes are written
`system|code` with `system` one of rxnorm, ndc, snomed, cvx, several separated by `;`.
The unit tests and `scripts/knowledge_eval.py` read the same table.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rules.knowledge.model import Coding, DrugKnowledge, MatchLevel
from rules.knowledge.tables import parse_coding

ALERTING = frozenset({MatchLevel.SAME_INGREDIENT, MatchLevel.SAME_CLASS, MatchLevel.PARTIAL})
NON_ALERTING = frozenset({MatchLevel.NONE, MatchLevel.LOW_RISK})


@dataclass(frozen=True, slots=True)
class Pair:
    allergen: str
    allergen_codes: tuple[Coding, ...]
    drug: str
    drug_codes: tuple[Coding, ...]
    expected: MatchLevel
    topic: str

    @property
    def description(self) -> str:
        allergen = self.allergen or _codes_text(self.allergen_codes)
        drug = self.drug or _codes_text(self.drug_codes)
        return f"given {allergen} allergy when {drug} is checked then {self.expected.value}"


@dataclass(frozen=True, slots=True)
class Score:
    """Recall on the pairs that must alert, false alerts on the pairs that must not."""

    pairs: int
    must_alert: int
    alerted: int
    must_not_alert: int
    false_alerts: int
    exact: int
    confusion: Counter[tuple[MatchLevel, MatchLevel]]

    @property
    def recall(self) -> float:
        return self.alerted / self.must_alert if self.must_alert else 1.0


def read_pairs(text: str) -> tuple[Pair, ...]:
    lines = (line for line in io.StringIO(text) if not line.startswith("#"))
    return tuple(_pair(record) for record in csv.DictReader(lines))


def score(knowledge: DrugKnowledge, pairs: Iterable[Pair]) -> Score:
    judged = [(pair.expected, actual_level(knowledge, pair)) for pair in pairs]
    must_alert = [actual for expected, actual in judged if expected in ALERTING]
    must_not = [actual for expected, actual in judged if expected in NON_ALERTING]
    return Score(
        pairs=len(judged),
        must_alert=len(must_alert),
        alerted=sum(actual in ALERTING for actual in must_alert),
        must_not_alert=len(must_not),
        false_alerts=sum(actual in ALERTING for actual in must_not),
        exact=sum(expected is actual for expected, actual in judged),
        confusion=Counter(judged),
    )


def actual_level(knowledge: DrugKnowledge, pair: Pair) -> MatchLevel:
    verdict = knowledge.cross_reactivity(
        pair.allergen, pair.drug, pair.allergen_codes, pair.drug_codes
    )
    return verdict.level


def summary_lines(result: Score) -> Sequence[str]:
    """A plain-text report: counts, recall, false alerts and a confusion row per level."""
    lines = [
        f"pairs: {result.pairs}",
        f"exact level matches: {result.exact}/{result.pairs}",
        f"recall on must-alert pairs: {result.alerted}/{result.must_alert} = {result.recall:.3f}",
        f"false alerts on must-not-alert pairs: {result.false_alerts}/{result.must_not_alert}",
        "confusion (expected -> actual counts):",
    ]
    for expected in MatchLevel:
        row = {a.value: n for (e, a), n in sorted(result.confusion.items()) if e is expected}
        if row:
            cells = ", ".join(f"{actual}={count}" for actual, count in row.items())
            lines.append(f"  {expected.value:<16} {cells}")
    return lines


def _pair(record: dict[str, str]) -> Pair:
    return Pair(
        allergen=record["allergen"],
        allergen_codes=_codings(record["allergen_codes"]),
        drug=record["drug"],
        drug_codes=_codings(record["drug_codes"]),
        expected=MatchLevel(record["expected"]),
        topic=record["topic"],
    )


def _codings(cell: str) -> tuple[Coding, ...]:
    return tuple(parse_coding(entry) for entry in filter(None, map(str.strip, cell.split(";"))))


def _codes_text(codes: tuple[Coding, ...]) -> str:
    return " ".join(f"{coding.system.rsplit('/', 1)[-1]}:{coding.code}" for coding in codes)
