"""What an allergy text says besides the substance it names: a negation, or another person's
allergy. Pure.

The recogniser reads names, so "not allergic to penicillin", "penicillin allergy ruled out" or
"mother allergic to penicillin" name penicillin without recording an allergy of the patient.
Judged as an allergy, such a text raises a false critical alert; judged as no allergy, a
heuristic would decide that an alert is silenced. It is neither: the judgement is `unverified`
and names the cue, for someone to read the record.
"""

from __future__ import annotations

import re
from typing import Final

from rules.knowledge.normalise import fold

_NEGATION: Final = re.compile(
    r"\b(?:not|never|no longer)\s+allergic\b"
    r"|^\W*(?:no|nil|nkda|nka|denies|denied)\b"
    r"|\bno\s+(?:reaction|reactions|allergy|allergies)\b"
    r"|\b(?:ruled\s+out|excluded|de-?labell?ed|removed|refuted|disproven|in\s+error)\b"
    r"|\b(?:negative|neg)\b"
    r"|否认|阴性|^\W*无.*过敏"
)
_OTHER_PERSON: Final = re.compile(
    r"\bfamily\s+(?:history|hx)\b|\bfhx?\b"
    r"|\b(?:mother|father|mum|mom|dad|sister|brother|son|daughter|parents?|siblings?"
    r"|grandmother|grandfather|relatives?)(?:'s)?\s+(?:is\s+|was\s+|has\s+|had\s+)?"
    r"(?:allergic|allergy|allergies)\b"
    r"|家族史|(?:母亲|父亲)(?:对)?.*过敏"
)
"""A relative's allergy, not a relative reporting the patient's ("penicillin, per mother")."""


def doubt_in(text: str) -> str | None:
    """What makes an allergy text more than the name of the patient's allergen, if anything:
    e.g. `a negation ('not allergic')` or `another person's allergy ('mother')`."""
    folded = fold(text)
    for pattern, meaning in (
        (_NEGATION, "a negation"),
        (_OTHER_PERSON, "another person's allergy"),
    ):
        found = pattern.search(folded)
        if found is not None:
            return f"{meaning} ({found.group().strip(' ,;:-')!r})"
    return None
