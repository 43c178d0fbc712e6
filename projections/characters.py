"""Characters a record must not hold.

Anywhere in it: a control character other than tab and the line breaks (an escape sequence rewrites
the terminal that shows the record, a NUL ends the string for C code that reads it). In the
names of who and what it is about (tenant, subject, actor, purpose, scope) and of the claim it
keys (an allergy, prescription or trip id, a preference or fact key, the alert id it
acknowledges, the claim id it retracts): any character that
does not print (a zero-width space after "alice" shows as "alice" while it keys another
person, whose allergies then never meet alice's prescriptions), and any character that Unicode's
NFKC form writes otherwise (a full-width "p-1", U+FF50 for the "p", reads as "p-1" and is folded into it by text
search, yet keys another person: an erased subject would come back under it).

Findings name the field and the character's code point, never the text.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from typing import Final, NamedTuple

from pydantic import BaseModel

from projections.secrets import FreeText
from schemas.base import field_names
from schemas.events import Event

NAMES: Final = ("tenant_id", "subject_id", "actor", "purpose", "scope")
"""The envelope fields that name who and what a record is about; they must print as they key."""
PAYLOAD_NAMES: Final = ("allergy_id", "prescription_id", "trip_id", "key", "alert_id", "claim_id")
"""The payload fields that key a claim or name the one it follows: they must print as they key
too (an allergy id "alg-1" with a zero-width space after it is another allergy, which the
status change of "alg-1" never reaches; a preference key in full-width letters is another key)."""

_CONTROL: Final = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f]")
"""Control characters but tab and those that break lines (LF, VT, FF, CR, NEL)."""


class UnprintableCharacter(NamedTuple):
    field: str
    code_point: int
    kind: str

    def describe(self) -> str:
        return f"{self.field} holds {self.kind} (U+{self.code_point:04X})"


def unprintable_characters(event: Event, text: FreeText) -> list[UnprintableCharacter]:
    """The first offending character of each field that holds one: the names, and `text`, the
    event's free text (its other fields are typed: ids, times, enumerations). None for most
    records, found after one pass over the names and one search of the free text."""
    names = [(name, getattr(event, name)) for name in NAMES]
    names += [
        (f"payload.{name}", value)
        for name in _keying_fields(type(event.payload))
        if isinstance(value := getattr(event.payload, name), str)
    ]
    found = [
        _first_unprintable(name, value) if not value.isprintable() else _first_folded(name, value)
        for name, value in names
        if not value.isprintable() or not unicodedata.is_normalized("NFKC", value)
    ]
    if _CONTROL.search(text.together) is None:
        return found
    named = {name for name, _ in names}
    return found + [
        UnprintableCharacter(path, ord(match.group()), "a control character")
        for path, value in text.fields()
        if path not in named and (match := _CONTROL.search(value)) is not None
    ]


@cache
def _keying_fields(payload: type[BaseModel]) -> tuple[str, ...]:
    """The fields of `PAYLOAD_NAMES` a payload class has, found once per class (asking a model
    for a field it lacks raises inside pydantic, about a microsecond each, for every event)."""
    return tuple(name for name in PAYLOAD_NAMES if name in field_names(payload))


def _first_unprintable(field: str, text: str) -> UnprintableCharacter:
    character = next(character for character in text if not character.isprintable())
    control = unicodedata.category(character) == "Cc"
    kind = "a control character" if control else "a character that does not print"
    return UnprintableCharacter(field, ord(character), kind)


def _first_folded(field: str, text: str) -> UnprintableCharacter:
    """The first character from which `text` is no longer in NFKC form (a full-width letter, a
    ligature, a mark that composes with the letter before it)."""
    end = next(
        end for end in range(1, len(text) + 1) if not unicodedata.is_normalized("NFKC", text[:end])
    )
    return UnprintableCharacter(
        field, ord(text[end - 1]), "a character its NFKC form writes otherwise"
    )
