"""Times written without a zone, read in the zone the importer names: FHIR requires a zone on
every dateTime with a time (`2020-02-01T10:00:00` is invalid), but some exports leave it out.
Without a zone named, such a time is an error of its record (see `parse_fhir_datetime`);
with one, every string of a document that is such a time gets that zone's offset at that local
time before the document is read. A local time that the clocks skipped or passed twice (a
change of clocks) is read with the offset in force before the change."""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo

from schemas.fhir.json_access import time_without_zone


def in_zone(document: object, zone: tzinfo) -> object:
    """`document` (parsed JSON) with every string that is a date and time without a zone given
    `zone`'s offset at that time (`2020-07-01T10:00:00` in Europe/Berlin becomes
    `2020-07-01T10:00:00+02:00`); other values, object keys and strings that are not a valid
    local time (a 13th month) stay as they are. `document` is not changed (its objects and
    arrays are copied), and nesting is walked without recursion, so a deep document cannot
    exhaust the stack."""
    pending: list[dict[str, object] | list[object]] = []
    top = _walked(document, zone, pending)
    while pending:
        container = pending.pop()
        if isinstance(container, dict):
            for key, item in container.items():
                container[key] = _walked(item, zone, pending)
        else:
            for index, item in enumerate(container):
                container[index] = _walked(item, zone, pending)
    return top


def _walked(value: object, zone: tzinfo, pending: list[dict[str, object] | list[object]]) -> object:
    """A string zoned, a copy of an object or array (its members left to `pending`), or any
    other value as it is."""
    if isinstance(value, str):
        return _zoned(value, zone)
    if isinstance(value, dict):
        copied: dict[str, object] = dict(value)
        pending.append(copied)
        return copied
    if isinstance(value, list):
        listed: list[object] = list(value)
        pending.append(listed)
        return listed
    return value


def _zoned(text: str, zone: tzinfo) -> str:
    match = time_without_zone(text)
    if match is None:
        return text
    try:
        local = datetime(
            int(match["year"]),
            int(match["month"]),
            int(match["day"]),
            int(match["hour"]),
            int(match["minute"]),
            min(int(match["second"] or 0), 59),
            tzinfo=zone,
        )
        offset = local.utcoffset()
    except (ValueError, OverflowError):
        return text
    return text.strip() + _offset_text(offset or timedelta(0))


def _offset_text(offset: timedelta) -> str:
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(offset) // timedelta(minutes=1)
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
