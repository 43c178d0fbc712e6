""" "No known allergy" statements in words: the texts a record uses to say that there is no
allergy (of some categories) rather than to name a substance.

Read by the FHIR mapping (a record whose code names no substance in these words is a negation),
by the write gate (an `AllergyRecorded` whose uncoded substance is one of them but which is
not `negated` contradicts itself) and by the drug knowledge layer (an uncoded allergy text that
is one of them is judged as no allergy), so the three read one text alike.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Final

from schemas.events import AllergyCategory

_EVERY: Final = tuple(AllergyCategory)
_MEDICATION: Final = (AllergyCategory.MEDICATION,)
_FOOD: Final = (AllergyCategory.FOOD,)
_ENVIRONMENT: Final = (AllergyCategory.ENVIRONMENT,)

NO_KNOWN_ALLERGY_TEXTS: Final[Mapping[str, tuple[AllergyCategory, ...]]] = {
    "nka": _EVERY,
    "no known allergies": _EVERY,
    "no known allergy": _EVERY,
    "nil known": _EVERY,
    "nil known allergies": _EVERY,
    "no allergies": _EVERY,
    "no allergy": _EVERY,
    "no known allergens": _EVERY,
    "none known": _EVERY,
    "denies allergies": _EVERY,
    "nil": _EVERY,
    "none": _EVERY,
    "无已知过敏": _EVERY,
    "无过敏史": _EVERY,
    "否认过敏史": _EVERY,
    "nkda": _MEDICATION,
    "nkma": _MEDICATION,
    "no known drug allergies": _MEDICATION,
    "no known drug allergy": _MEDICATION,
    "no known medication allergies": _MEDICATION,
    "no known medication allergy": _MEDICATION,
    "nil known drug allergies": _MEDICATION,
    "no drug allergies": _MEDICATION,
    "denies drug allergies": _MEDICATION,
    "无药物过敏史": _MEDICATION,
    "无药物过敏": _MEDICATION,
    "否认药物过敏史": _MEDICATION,
    "no known drug or food allergies": (AllergyCategory.FOOD, AllergyCategory.MEDICATION),
    "no known food or drug allergies": (AllergyCategory.FOOD, AllergyCategory.MEDICATION),
    "否认食物药物过敏史": (AllergyCategory.FOOD, AllergyCategory.MEDICATION),
    "否认食物及药物过敏史": (AllergyCategory.FOOD, AllergyCategory.MEDICATION),
    "nkfa": _FOOD,
    "no known food allergies": _FOOD,
    "no known food allergy": _FOOD,
    "nkla": _ENVIRONMENT,
    "no known latex allergy": _ENVIRONMENT,
}
"""Each statement (case-folded, single-spaced) and the categories it says are free of allergy."""


_HEADINGS: Final[Mapping[str, tuple[AllergyCategory, ...]]] = {
    "allergies": _EVERY,
    "allergy": _EVERY,
    "allergy status": _EVERY,
    "allergy history": _EVERY,
    "known allergies": _EVERY,
    "过敏史": _EVERY,
    "drug allergies": _MEDICATION,
    "drug allergy": _MEDICATION,
    "medication allergies": _MEDICATION,
    "medication allergy": _MEDICATION,
    "food allergies": _FOOD,
    "food allergy": _FOOD,
}
"""Words that head a statement ("Allergies: none", "Drug allergies: nil") and the categories
they narrow it to."""

_NEUTRAL_PARTS: Final = frozenset({"confirmed", "verified", "reviewed", "reported", "per patient"})
"""Parts that only say how a statement was obtained ("NKDA - confirmed")."""
_WHO_SAYS: Final = re.compile(r"^(?:(?:the )?(?:patient|pt)(?: has| reports| states)?|has) ")
"""Who the statement is about, before it ("Patient has no known allergies")."""
_HOW_KNOWN: Final = re.compile(r" (?:reported|confirmed|verified|currently|at this time)$")
"""How it is known, after it ("no allergies reported")."""
_KNOWN_LAST: Final = re.compile(r"no ((?:drug |medication |food )?)allerg(?:y|ies) known")
"""The word order "no allergies known" of "no known allergies"."""
_TO_MEDICINES: Final = re.compile(
    r"(?:no known allerg(?:y|ies)|nka) to (?:drugs|medications|medicines)"
)
"""A statement about every allergy narrowed to medicines ("NKA to drugs"): NKDA."""

_DOTTED_INITIALS: Final = re.compile(r"(?<!\w)(?:\w\.\s?){2,}(?!\w)")
"""An abbreviation written with dots: "N.K.D.A.", "n. k. a."."""
_SEPARATORS: Final = re.compile(r"[;,/()\[\]:.\-\u2013\u2014\u3001]")
"""What splits a text (in its NFKC form: a full-width colon is a colon) into the parts read one
by one: "NKDA - no known drug allergies", "No Known Drug Allergies (NKDA)", "NKDA/NKFA"."""


def statement_categories(text: str) -> tuple[AllergyCategory, ...] | None:
    """The categories `text` says there is no known allergy to, when the whole text is such a
    statement ("NKDA", "No known allergies.", "N.K.D.A.", "NKDA - no known drug allergies",
    "Allergies: none"); None when it is not one.

    The text is read in parts split by punctuation and dashes: each part is a statement or a
    heading ("Allergies", "Drug allergies"), at least one is a statement, and a heading narrows
    the statements to its categories (unless none is left: "Food allergies: NKDA" is NKDA).
    Any other word makes it not a statement ("No known allergies except penicillin", "NKDA
    (penicillin - rash)")."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    folded = _DOTTED_INITIALS.sub(lambda found: re.sub(r"[.\s]", "", found.group()) + " ", folded)
    stated: set[AllergyCategory] = set()
    narrowed = set(_EVERY)
    for part in _SEPARATORS.split(folded):
        words = " ".join(part.split()).strip("!?* ")
        if not words:
            continue
        if words in _HEADINGS:
            narrowed.intersection_update(_HEADINGS[words])
            continue
        if words in _NEUTRAL_PARTS:
            continue
        statement = _plain_statement(words)
        if statement not in NO_KNOWN_ALLERGY_TEXTS:
            return None
        stated.update(NO_KNOWN_ALLERGY_TEXTS[statement])
    covered = stated & narrowed or stated
    return tuple(category for category in _EVERY if category in covered) or None


def _plain_statement(words: str) -> str:
    """A part in the words of `NO_KNOWN_ALLERGY_TEXTS`: without who says it or how it is known
    ("Patient has no known allergies", "none reported"), in its usual word order ("no
    allergies known"), and narrowed to medicines when it says so ("NKA to drugs")."""
    words = _HOW_KNOWN.sub("", _WHO_SAYS.sub("", words))
    known_last = _KNOWN_LAST.fullmatch(words)
    if known_last is not None:
        words = f"no known {known_last.group(1)}allergies"
    return "nkda" if _TO_MEDICINES.fullmatch(words) else words
