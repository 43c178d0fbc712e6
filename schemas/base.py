"""Shared building blocks of the wire models: frozen config and UTC millisecond timestamps."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from datetime import UTC, date, datetime
from functools import cache
from typing import Annotated, Final, get_args

from pydantic import AfterValidator, AwareDatetime, BaseModel, BeforeValidator, ConfigDict

_NUMERAL: Final = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*")


def not_a_count(value: object) -> object:
    """Refuse a number, or a numeral in text, where a time or date belongs: pydantic would read
    it as seconds or milliseconds since 1970, guessing the unit from its size."""
    if isinstance(value, int | float) or (isinstance(value, str) and _NUMERAL.fullmatch(value)):
        raise ValueError("expected ISO 8601 text, not a number (its unit would be a guess)")
    return value


def to_utc_millis(value: datetime) -> datetime:
    """Normalise a tz-aware time to UTC at millisecond precision (what Avro and ClickHouse keep)."""
    if value.tzinfo is UTC and not value.microsecond % 1000:
        return value
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        raise ValueError("the time is out of the range of dates (years 1 to 9999 in UTC)") from None
    return utc.replace(microsecond=utc.microsecond - utc.microsecond % 1000)


UtcMillis = Annotated[AwareDatetime, BeforeValidator(not_a_count), AfterValidator(to_utc_millis)]
"""A tz-aware timestamp, stored in UTC with millisecond precision. Naive times and numbers are
refused."""

CalendarDate = Annotated[date, BeforeValidator(not_a_count)]
"""A calendar date (`YYYY-MM-DD` in JSON); a number is refused."""


class WireModel(BaseModel):
    """Base of every wire record: frozen, no unknown fields, validated on construction."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)


@cache
def field_names(model: type[BaseModel]) -> tuple[str, ...]:
    """A model class's field names in declaration order, read once per class (pydantic's
    `model_fields` is a property that does work on every read)."""
    return tuple(model.model_fields)


def says_nothing(text: str) -> bool:
    """Whether `text` holds only spaces and characters that do not show (a zero-width space)."""
    if text.isascii():
        return not text.strip()
    return all(char.isspace() or unicodedata.category(char) in _UNSEEN for char in text)


_UNSEEN: Final = frozenset({"Cf", "Cc", "Zs", "Zl", "Zp"})


def blank_required_text(model: BaseModel, path: str = "") -> Iterator[str]:
    """The paths (`payload.codes.0.code`) of text fields that must not be empty (`min_length`)
    but hold spaces or invisible characters only, in `model` and the records it holds."""
    required, nested = _text_fields(type(model))
    for name in required:
        value = getattr(model, name)
        if isinstance(value, str) and says_nothing(value):
            yield f"{path}.{name}" if path else name
    for name in nested:
        value, where = getattr(model, name), f"{path}.{name}" if path else name
        if isinstance(value, BaseModel):
            yield from blank_required_text(value, where)
        elif isinstance(value, tuple):
            for index, item in enumerate(value):
                if isinstance(item, BaseModel):
                    yield from blank_required_text(item, f"{where}.{index}")


@cache
def _text_fields(model: type[BaseModel]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A class's fields that must not be empty, and those that can hold records, read once."""
    fields = model.model_fields.items()
    required = tuple(
        name
        for name, info in fields
        if any(getattr(item, "min_length", 0) for item in info.metadata)
    )
    return required, tuple(name for name, info in fields if _holds_records(info.annotation))


def _holds_records(annotation: object) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(_holds_records(argument) for argument in get_args(annotation))
