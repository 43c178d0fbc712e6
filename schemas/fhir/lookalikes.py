"""Words spelled with letters of two scripts (amoxicillin with a Cyrillic a, U+0430). Pure.

A letter of another script that looks like a Latin one reads the same to a person but not to
the drug knowledge: the name is not recognised, and the alert on it is a warning that the drug
cannot be checked, with nothing that says why. A word mixing Latin letters with Cyrillic, Greek
or Armenian ones is such a spelling (a whole word in another script is a name in that
language, and is left alone); the record is imported as written and one line names the word
and the letters.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Final

from schemas.events import AllergyRecorded, Event, MedicationPrescribed
from schemas.fhir.json_access import NamedConcept

_LOOKALIKE_SCRIPTS: Final = ("CYRILLIC", "GREEK", "ARMENIAN")
_MICRO: Final = frozenset({"\u03bc", "\u00b5"})
"""The Greek mu and the micro sign: the prefix of a unit glued to its Latin letters (`500\u03bcg`),
not a lookalike."""
_WORD: Final = re.compile(r"[^\W\d_]+")
_SHOWN: Final = 80


def lookalike_notes(concepts: Iterable[NamedConcept], events: Iterable[Event]) -> list[str]:
    """A line for each text of the record's drug or allergen (a concept's text, a coding's
    display, the name its events carry) with a word that mixes scripts."""
    named: list[tuple[str, str]] = []
    for concept in concepts:
        if concept.text:
            named.append((f"{concept.where}.text", concept.text))
        named.extend(
            (f"{concept.where} coding {coding.system}|{coding.code} display", coding.display)
            for coding in concept.codes
            if coding.display
        )
    for event in events:
        payload = event.payload
        if isinstance(payload, MedicationPrescribed):
            named.append(("the drug's name", payload.drug))
        elif isinstance(payload, AllergyRecorded):
            named.append(("the allergen's name", payload.substance))
    notes: list[str] = []
    seen: set[str] = set()
    for where, text in named:
        line = _mixed_word(text)
        if line is not None and text not in seen:
            seen.add(text)
            shown = text if len(text) <= _SHOWN else f"{text[: _SHOWN - 1]}…"
            notes.append(f"{where} {shown!r}: {line}")
    return notes


def _mixed_word(text: str) -> str | None:
    """What is amiss with the first word of `text` that mixes Latin letters with letters of a
    script that has Latin lookalikes, or None."""
    if text.isascii():
        return None
    for word in _WORD.findall(text):
        if word.isascii():
            continue
        scripts = {letter: _script(letter) for letter in word}
        foreign = [
            letter
            for letter, script in scripts.items()
            if script in _LOOKALIKE_SCRIPTS and letter not in _MICRO
        ]
        if foreign and "LATIN" in scripts.values():
            letters = ", ".join(
                f"{letter!r} (U+{ord(letter):04X} {unicodedata.name(letter, '?')})"
                for letter in foreign[:3]
            )
            return (
                f"the word {word!r} mixes Latin letters with {letters}, which looks like a Latin "
                "letter but is not read as one: the name may not be recognised, so the drug "
                "knowledge may not check it; check the spelling at the source"
            )
    return None


def _script(letter: str) -> str:
    return unicodedata.name(letter, "").split(" ", 1)[0]
