"""Shared building blocks of the wire models: frozen config and UTC millisecond timestamps."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict


def to_utc_millis(value: datetime) -> datetime:
    """Normalise a tz-aware time to UTC at millisecond precision (what Avro and ClickHouse keep)."""
    if value.tzinfo is UTC and not value.microsecond % 1000:
        return value
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        raise ValueError("the time is out of the range of dates (years 1 to 9999 in UTC)") from None
    return utc.replace(microsecond=utc.microsecond - utc.microsecond % 1000)


UtcMillis = Annotated[AwareDatetime, AfterValidator(to_utc_millis)]
"""A tz-aware timestamp, stored in UTC with millisecond precision. Naive times are refused."""


class WireModel(BaseModel):
    """Base of every wire record: frozen, no unknown fields, validated on construction."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)


@cache
def field_names(model: type[BaseModel]) -> tuple[str, ...]:
    """A model class's field names in declaration order, read once per class (pydantic's
    `model_fields` is a property that does work on every read)."""
    return tuple(model.model_fields)
