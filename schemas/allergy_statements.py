""" "No known allergy" statements in words: the texts a record uses to say that there is no
allergy (of some categories) rather than to name a substance.

Read by the FHIR mapping (a record whose code names no substance in these words is a negation)
and by the write gate (an `AllergyRecorded` whose uncoded substance is one of them but which is
not `negated` contradicts itself). The drug knowledge layer reads every one of them as a
statement too (a test keeps the two in step).
"""

from __future__ import annotations

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
    "否认食物药物过敏史": (AllergyCategory.FOOD, AllergyCategory.MEDICATION),
    "否认食物及药物过敏史": (AllergyCategory.FOOD, AllergyCategory.MEDICATION),
    "nkfa": _FOOD,
    "no known food allergies": _FOOD,
    "no known food allergy": _FOOD,
    "nkla": _ENVIRONMENT,
    "no known latex allergy": _ENVIRONMENT,
}
"""Each statement (case-folded, single-spaced) and the categories it says are free of allergy."""


def statement_categories(text: str) -> tuple[AllergyCategory, ...] | None:
    """The categories `text` says there is no known allergy to, when the whole text is such a
    statement ("NKDA", "No known allergies."); None when it is not one."""
    return NO_KNOWN_ALLERGY_TEXTS.get(" ".join(text.casefold().split()).rstrip(".;:! "))
