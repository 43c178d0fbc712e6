"""Shared building blocks of the wire models: frozen config and UTC millisecond timestamps."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from functools import cache
from typing import Annotated, Final

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
