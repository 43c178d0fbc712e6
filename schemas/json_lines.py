"""The JSON form of events (one per line in NDJSON files): the Avro record's fields, with the
payload as an object chosen by `type`."""

from __future__ import annotations

import json

from pydantic import ValidationError

from schemas.errors import InvalidRecord, MalformedJson
from schemas.events import Event


def validation_summary(error: ValidationError, limit: int = 5) -> str:
    """Field paths and messages only, never the offending values (they may be secrets)."""
    problems = [
        f"{'.'.join(str(part) for part in item['loc']) or '<record>'}: {item['msg']}"
        for item in error.errors(include_input=False, include_url=False)
    ]
    more = f" (+{len(problems) - limit} more)" if len(problems) > limit else ""
    return "; ".join(problems[:limit]) + more


def parse_event(text: str) -> Event:
    """One event from its JSON text; raises `MalformedJson` or `InvalidRecord`."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise MalformedJson(f"not JSON: {error.msg} at column {error.colno}") from None
    if not isinstance(document, dict):
        raise InvalidRecord(f"expected a JSON object, got {type(document).__name__}")
    try:
        return Event.model_validate(document)
    except ValidationError as error:
        raise InvalidRecord(validation_summary(error)) from None
