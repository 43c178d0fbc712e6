"""The JSON form of events (one per line in NDJSON files): the Avro record's fields, with the
payload as an object chosen by `type`."""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any, NoReturn

from pydantic import ValidationError

from schemas.errors import InvalidRecord, MalformedJson
from schemas.events import Event


@dataclass(frozen=True)
class NotUtf8:
    """A line of an input file whose bytes are not UTF-8 (its line number still counts)."""

    message: str


_DATE_TIME_FORM = (
    "a date-time is ISO 8601 with a zone offset in hours and minutes, 2024-03-05T10:00:00Z or "
    "2024-03-05T15:30:00+05:30: hours 00 to 23 and seconds 00 to 59, so neither 24:00 nor a "
    "leap second"
)
_HINTS = {
    "datetime_parsing": _DATE_TIME_FORM,
    "datetime_from_date_parsing": _DATE_TIME_FORM,
}
"""What a message of pydantic's says in terms of the JSON form ('unexpected extra characters
at the end of the input' for `23:59:60Z`), by the error's type."""


def validation_summary(error: ValidationError, limit: int = 5) -> str:
    """Field paths and messages only, never the offending values (they may be secrets)."""
    items = error.errors(include_input=False, include_url=False)
    problems = [
        f"{'.'.join(str(part) for part in item['loc']) or '<record>'}: {item['msg']}"
        for item in items
    ]
    more = f" (+{len(problems) - limit} more)" if len(problems) > limit else ""
    hints = dict.fromkeys(_HINTS[item["type"]] for item in items if item["type"] in _HINTS)
    return "; ".join(problems[:limit]) + more + "".join(f" ({hint})" for hint in hints)


def _not_a_number(literal: str) -> NoReturn:
    raise MalformedJson(f"not JSON: {literal} is not a JSON number")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) < len(pairs):
        counts = Counter(key for key, _ in pairs)
        repeated = next(key for key, count in counts.items() if count > 1)
        raise MalformedJson(
            f"not JSON this reader takes: the key {repeated[:80]!r} appears twice in one object"
            " (which value is meant is not said)"
        )
    return document


def strict_json(text: str) -> Any:
    """JSON text as RFC 8259 defines it. Python's reader also takes `NaN` and `Infinity` and
    `\\ud800`-style escapes of unpaired surrogates, which no record can carry (Avro strings are
    UTF-8, canonical JSON has no NaN), and keeps the last of two values under one key of an
    object (RFC 8259 leaves that open, and a record must not depend on the reader); those raise
    `MalformedJson`, as do nesting deeper than the reader's recursion allows and an integer too
    long for Python to convert, and `json.JSONDecodeError` is raised for text that is not JSON
    at all."""
    try:
        document = json.loads(text, parse_constant=_not_a_number, object_pairs_hook=_unique_keys)
        if "\\u" in text:
            json.dumps(document, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise MalformedJson("not JSON text: an escape names an unpaired surrogate") from None
    except RecursionError:
        raise MalformedJson(
            "not JSON this reader takes: arrays or objects nested too deep"
        ) from None
    except json.JSONDecodeError:
        raise
    except ValueError:
        raise MalformedJson(
            f"not JSON this reader takes: a number longer than {sys.get_int_max_str_digits():,}"
            " digits"
        ) from None
    return document


def where_json_fails(error: json.JSONDecodeError) -> str:
    """The reader's message and where: the column alone in a text of one line (a line of a
    file, whose origin gives its number), else the line and the column; or that the line or
    the file stops before its value is complete (cut short: the reader's position would point
    past the end)."""
    one_line = "\n" not in error.doc.rstrip("\r\n")
    if error.pos >= len(error.doc.rstrip()):
        text = "line" if one_line else "file"
        return f"not JSON: the {text} ends before its JSON value is complete"
    where = f"column {error.colno}" if one_line else f"line {error.lineno} column {error.colno}"
    return f"not JSON: {error.msg.removesuffix(' at')} at {where}"


def json_type(value: object) -> str:
    """The JSON name of a decoded value's type (`null`, `array`, `string`...), as a producer
    wrote it, not Python's."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def parse_event(text: str) -> Event:
    """One event from its JSON text; raises `MalformedJson` or `InvalidRecord`."""
    try:
        document = strict_json(text)
    except json.JSONDecodeError as error:
        raise MalformedJson(where_json_fails(error)) from None
    if not isinstance(document, dict):
        raise InvalidRecord(f"expected a JSON object, got {json_type(document)}")
    try:
        return Event.model_validate(document)
    except ValidationError as error:
        raise InvalidRecord(validation_summary(error)) from None
