"""Whether the words and the codes of one concept name the same substance: a drug coded as
amoxicillin (RxNorm 723) whose text says "Ibuprofen" is judged by both, yet a clinician reads
"Ibuprofen" in the alert. Judged through the knowledge layer; a name or a code it cannot
resolve is never said to differ. Pure: each name and code is resolved once per checker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from rules.knowledge.judge import NO_KNOWN_ALLERGY
from rules.knowledge.model import Coding, DrugKnowledge, DrugResolution, MatchLevel
from rules.knowledge.tables import CLASS_PREFIX

_UNRELATED: Final = frozenset({MatchLevel.NONE, MatchLevel.LOW_RISK, MatchLevel.PARTIAL})
"""Levels at which two substances are different ones, related at most (not one the same
ingredient or within the class the other names; not `unverified`: that cannot be told)."""
_STATEMENT: Final = NO_KNOWN_ALLERGY.removeprefix(CLASS_PREFIX)
Levels = Callable[[], set[MatchLevel]]
"""The class a "no known allergy" statement resolves to ("NKDA", SNOMED 716186003)."""


@dataclass(frozen=True)
class NamesDiffer:
    """A name of a concept and one of its codings that name different substances."""

    name: str
    named: str
    """What the name is read as (its ingredients, else its classes)."""
    coding: Coding
    coded: str
    """What the code is read as."""
    absence: bool = False
    """Whether one of them says there is no known allergy and the other names a substance: a
    record cannot be both."""
    displayed: bool = False
    """Whether the coding is read by its display (a code the knowledge layer does not list),
    not by its code."""


class CodedNames:
    """Compares the names and the codes of concepts with one knowledge layer."""

    def __init__(self, knowledge: DrugKnowledge) -> None:
        self._knowledge = knowledge
        self._names: dict[str, DrugResolution] = {}
        self._codes: dict[tuple[str, str], DrugResolution] = {}

    def differ(self, names: Sequence[str], codings: Sequence[Coding]) -> NamesDiffer | None:
        """The first name and coding of a concept (its text, the displays of its codings; each
        coding read by its code alone) that the knowledge layer resolves, both, to different
        substances: ingredients that share none, or, where one names a class only ("Sulfa
        drugs", "Allergy to penicillin"), no class in common and no relation closer than
        `_UNRELATED` either way (a class covers its members: "Opioids" and morphine agree);
        then the first name and the display of a coding whose code it cannot resolve, read as
        words (text "Azithromycin", an NDC displayed "Amoxicillin 500 MG Oral Capsule"); None
        when every pair names the same substance or cannot be told."""
        for name in dict.fromkeys(names):
            by_name = self._resolved_name(name)
            if not _names_something(by_name):
                continue
            for coding in codings:
                by_code = self._resolved_code(coding)
                levels = self._code_levels(name, coding)
                if _names_something(by_code) and self._different(by_name, by_code, levels):
                    return _found(name, by_name, coding, by_code)
        return self._display_differs(names[0], codings) if names else None

    def _display_differs(self, name: str, codings: Sequence[Coding]) -> NamesDiffer | None:
        by_name = self._resolved_name(name)
        if not _names_something(by_name):
            return None
        for coding in codings:
            if coding.display is None or _names_something(self._resolved_code(coding)):
                continue
            by_display = self._resolved_name(coding.display)
            levels = self._word_levels(name, coding.display)
            if _names_something(by_display) and self._different(by_name, by_display, levels):
                return _found(name, by_name, coding, by_display, displayed=True)
        return None

    def _resolved_name(self, name: str) -> DrugResolution:
        if name not in self._names:
            self._names[name] = self._knowledge.resolve(name)
        return self._names[name]

    def _resolved_code(self, coding: Coding) -> DrugResolution:
        key = (coding.system, coding.code)
        if key not in self._codes:
            self._codes[key] = self._knowledge.resolve("", (Coding(*key),))
        return self._codes[key]

    def _different(self, by_name: DrugResolution, by_other: DrugResolution, levels: Levels) -> bool:
        """Whether a name and another reading (a code, or a display read as words) name
        different substances; `levels` judges them against each other, both ways."""
        if by_name.ingredients and by_other.ingredients:
            return not set(by_name.ingredients) & set(by_other.ingredients)
        if set(by_name.classes) & set(by_other.classes):
            return False
        return levels() <= _UNRELATED

    def _code_levels(self, name: str, coding: Coding) -> Levels:
        code = (Coding(coding.system, coding.code),)
        judge = self._knowledge.cross_reactivity
        return lambda: {
            judge(name, "", drug_codes=code).level,
            judge("", name, allergen_codes=code).level,
        }

    def _word_levels(self, name: str, words: str) -> Levels:
        judge = self._knowledge.cross_reactivity
        return lambda: {judge(name, words).level, judge(words, name).level}


def _found(
    name: str,
    by_name: DrugResolution,
    coding: Coding,
    by_other: DrugResolution,
    *,
    displayed: bool = False,
) -> NamesDiffer:
    absence = _STATEMENT in {*by_name.classes, *by_other.classes}
    return NamesDiffer(name, _read_as(by_name), coding, _read_as(by_other), absence, displayed)


def _names_something(resolution: DrugResolution) -> bool:
    """Resolved in full, to ingredients or classes."""
    return resolution.resolved and bool(resolution.ingredients or resolution.classes)


def _read_as(resolution: DrugResolution) -> str:
    if resolution.ingredients:
        return ", ".join(resolution.ingredients)
    return ", ".join(resolution.label(concept) for concept in resolution.classes)
