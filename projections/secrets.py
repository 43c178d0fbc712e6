"""Screening free text for secrets that must never enter a memory (or a log, or a topic).

Findings name the kind of secret and where it was, never the secret itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from pydantic import BaseModel

from schemas.base import field_names
from schemas.events import Event

_TOKEN_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("an API key", re.compile(r"\b(?:sk|pk|rk)[-_](?:live[-_]|test[-_])?[A-Za-z0-9]{16,}")),
    ("an AWS access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a GitHub token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}")),
    ("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    (
        "a JSON web token",
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ),
    (
        "a credential assignment",
        re.compile(
            r"(?i:\b(?:password|passwd|pwd|passcode|secret|api[_ -]?key|access[_ -]?token|token)"
            r"\s*(?:is|[:=])\s*\S{4,})"
        ),
    ),
)
_ANY_TOKEN = re.compile("|".join(f"(?:{pattern.pattern})" for _, pattern in _TOKEN_PATTERNS))
"""Matches wherever one of the token patterns does: most text matches none, so it is searched
once instead of once per pattern."""
_CARD_CANDIDATE = re.compile(r"(?<![\w+-])(?:\d[ -]?){12,18}\d(?![\w-])")
"""13 to 19 digits, single spaces or hyphens between them; not after a `+`, which starts an
international phone number (`+86 138 0013 8002`, 13 digits that may pass the Luhn check)."""


class SecretFinding(NamedTuple):
    field: str
    kind: str


def luhn_valid(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _card_numbers(text: str) -> Iterator[str]:
    for match in _CARD_CANDIDATE.finditer(text):
        digits = re.sub(r"[ -]", "", match.group())
        if 13 <= len(digits) <= 19 and len(set(digits)) > 1 and luhn_valid(digits):
            yield digits


def secrets_in_text(field: str, text: str) -> list[SecretFinding]:
    findings = (
        [SecretFinding(field, kind) for kind, pattern in _TOKEN_PATTERNS if pattern.search(text)]
        if _ANY_TOKEN.search(text)
        else []
    )
    if any(True for _ in _card_numbers(text)):
        findings.append(SecretFinding(field, "a payment card number"))
    return findings


def text_fields(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every string inside a model, tuple or list, with its dotted path; an integer as its
    digits (a card number sent as a number is still a card number)."""
    if isinstance(value, str):
        yield path, value
        return
    if isinstance(value, BaseModel):
        parts: Iterator[tuple[str, Any]] = (
            (f"{path}.{name}", getattr(value, name)) for name in field_names(type(value))
        )
    elif isinstance(value, tuple | list):
        parts = ((f"{path}[{index}]", item) for index, item in enumerate(value))
    else:
        return
    for part_path, item in parts:
        if isinstance(item, str):
            yield part_path, item
        elif isinstance(item, int) and not isinstance(item, bool):
            yield part_path, str(item)
        elif isinstance(item, BaseModel | tuple | list):
            yield from text_fields(item, part_path)


def _texts(value: Any, found: list[str]) -> None:
    """Append every string `text_fields` yields for `value` to `found`, without their paths
    (naming a path costs more than finding the string, and most values need none)."""
    if isinstance(value, str):
        found.append(value)
    elif isinstance(value, BaseModel):
        for name in field_names(type(value)):
            _part_texts(getattr(value, name), found)
    elif isinstance(value, tuple | list):
        for item in value:
            _part_texts(item, found)


def _part_texts(item: Any, found: list[str]) -> None:
    if isinstance(item, str):
        found.append(item)
    elif isinstance(item, int) and not isinstance(item, bool):
        found.append(str(item))
    elif isinstance(item, BaseModel | tuple | list):
        _texts(item, found)


class FreeText:
    """The strings inside some values (`payload`, `source_ref`...; None holds nothing), gathered
    once for every screen that reads them: `together` holds them one per line."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.values = values
        texts: list[str] = []
        for value in values.values():
            _texts(value, texts)
        self.together = "\n".join(texts)

    def fields(self) -> Iterator[tuple[str, str]]:
        """Every string with its path (naming the paths costs more than gathering the strings:
        a screen asks only when `together` holds what it looks for)."""
        for path, value in self.values.items():
            yield from text_fields(value, path)


def secrets_in(text: FreeText) -> list[SecretFinding]:
    """The secrets in every string of `text`, each named by its path. The strings are first
    searched together, one per line: a line break bounds words and digit runs as the ends of a
    string do, so whatever any pattern matches within one string it also matches there, and
    text with nothing that looks like a secret (most) is searched once, its paths never named."""
    together = text.together
    if not (_ANY_TOKEN.search(together) or _CARD_CANDIDATE.search(together)):
        return []
    return [finding for field, value in text.fields() for finding in secrets_in_text(field, value)]


def note_withheld(event: Event) -> tuple[Event, tuple[str, ...]]:
    """The event with its payload's `note` replaced by a marker when the note holds what looks
    like a secret, and the kinds of secret found (none: the event unchanged).

    For an importer: a clinical record's free-text note is secondary to the record, and the
    gate refuses a whole event with a secret anywhere in it, so a secret-looking number in a
    note (a card-like reference) would otherwise cost the allergy or prescription itself. The
    marker keeps it visible that a note was there; the secret never enters the log."""
    note = getattr(event.payload, "note", None)
    if not isinstance(note, str):
        return event, ()
    kinds = tuple(dict.fromkeys(finding.kind for finding in secrets_in_text("note", note)))
    if not kinds:
        return event, ()
    marker = f"[note withheld at import: it looked like it held {' and '.join(kinds)}]"
    payload = event.payload.model_copy(update={"note": marker})
    return event.model_copy(update={"payload": payload}), kinds
