"""Reading values out of FHIR JSON. Pure.

Typed field access that fails with an `Unmappable` problem (a missing field, a value of the
wrong type, a code outside its value set) instead of a KeyError, FHIR date-times, codings and
literal references. `Unsupported` marks a well-formed resource that deliberately yields no
event.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone
from enum import StrEnum
from math import isfinite
from typing import Any, Final, NamedTuple, TypeVar

from schemas.events import Coding

Json = Mapping[str, Any]
E = TypeVar("E")
T = TypeVar("T")
SNOMED: Final = "http://snomed.info/sct"
IPS_ABSENT_UNKNOWN: Final = "http://hl7.org/fhir/uv/ips/CodeSystem/absent-unknown-uv-ips"
SYSTEM_ALIASES: Final = {
    "urn:oid:2.16.840.1.113883.6.96": SNOMED,
    "http://snomed.info/sct/": SNOMED,
}
"""Other spellings of a code system, as producers send them."""


class Problem(StrEnum):
    """Why an input could not be mapped (the `reason` of a `FhirError`)."""

    MALFORMED_JSON = "malformed_json"
    NOT_A_RESOURCE = "not_a_resource"
    MISSING_FIELD = "missing_field"
    INVALID_VALUE = "invalid_value"
    UNRESOLVED_REFERENCE = "unresolved_reference"
    INVALID_RECORD = "invalid_record"
    DELETION_NOT_IMPORTED = "deletion_not_imported"
    PATCH_NOT_IMPORTED = "patch_not_imported"
    SOURCE_REPORTED_ERROR = "source_reported_error"
    MODIFIER_NOT_UNDERSTOOD = "modifier_not_understood"
    SUBSETTED_RESOURCE = "subsetted_resource"


class Unmappable(Exception):
    """Why a part of a resource cannot be read. `field` is the path of the part it names
    (`code.coding[0].system`), completed by `within` as the error leaves nested readers, so
    the message names the part in the resource, not only its last key."""

    def __init__(self, problem: Problem, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.problem = problem
        self.detail = message
        self.field = field

    @property
    def message(self) -> str:
        if self.field is None:
            return self.detail
        return f"{self.field} {self.detail}" if self.detail else self.field

    def within(self, where: str, joiner: str = ".") -> Unmappable:
        """This error with `where`, the path of the part read, before the path it names."""
        if self.field is None or not where or _starts_with(self.field, where):
            return self
        return Unmappable(self.problem, self.detail, field=f"{where}{joiner}{self.field}")


def _starts_with(path: str, where: str) -> bool:
    return path == where or path.startswith((f"{where}.", f"{where}["))


def within(where: str, read: Callable[[], T], joiner: str = ".") -> T:
    """What `read` reads from the part at `where`; an error names the part by its full path
    (`clinicalStatus.coding[0].code is not a string`, not `code is not a string`)."""
    try:
        return read()
    except Unmappable as error:
        raise error.within(where, joiner) from None


class Unsupported(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NotForAPatient(Unsupported):
    """A record whose subject is not a Patient (a Group): skipped, and no longer the record of
    the patient an earlier version of it named."""


def first_object(holder: Json, key: str) -> Json:
    return next(iter(objects_at(holder, key)), {})


def quantity_text(quantity: Json) -> str | None:
    """A Quantity as text (`0.5 mL`); None without a value, an error for a value that is not
    a finite number."""
    value, unit = quantity.get("value"), string_at(quantity, "unit") or string_at(quantity, "code")
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or not isfinite(value):
        raise Unmappable(Problem.INVALID_VALUE, "is not a number", field="value")
    return f"{value:g} {unit}" if unit else f"{value:g}"


_UCUM_TIME: Final = {
    "s": timedelta(seconds=1),
    "min": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
    "wk": timedelta(weeks=1),
    "mo": timedelta(days=30.4375),
    "a": timedelta(days=365.25),
}
"""The UCUM time units FHIR's Duration uses, by their UCUM lengths (`mo` and `a` are the mean
Julian month and year)."""
_TIME_WORDS: Final = {
    **dict.fromkeys(("second", "seconds", "sec", "secs"), "s"),
    **dict.fromkeys(("minute", "minutes", "mins"), "min"),
    **dict.fromkeys(("hour", "hours", "hr", "hrs"), "h"),
    **dict.fromkeys(("day", "days", "day(s)"), "d"),
    **dict.fromkeys(("week", "weeks", "week(s)"), "wk"),
    **dict.fromkeys(("month", "months", "month(s)"), "mo"),
    **dict.fromkeys(("year", "years", "year(s)", "yr", "yrs"), "a"),
}
"""A Duration's `unit` text when it has no UCUM `code`."""


def duration_of(duration: Json) -> timedelta:
    """A FHIR Duration (`{"value": 7, "code": "d"}`): its UCUM `code`, else its `unit` text
    (`days`); an error for a value that is not a positive number or a unit that is not a time."""
    value = duration.get("value")
    if not isinstance(value, int | float) or isinstance(value, bool) or not isfinite(value):
        raise Unmappable(Problem.INVALID_VALUE, "is not a number", field="value")
    if value <= 0:
        raise Unmappable(Problem.INVALID_VALUE, "is not a positive length of time", field="value")
    code = string_at(duration, "code")
    unit = string_at(duration, "unit")
    symbol = code if code in _UCUM_TIME else _TIME_WORDS.get((unit or "").strip().casefold(), unit)
    if symbol not in _UCUM_TIME:
        named = code or unit
        detail = (
            f"{named!r} is not a unit of time (s, min, h, d, wk, mo, a)" if named else "is missing"
        )
        raise Unmappable(Problem.INVALID_VALUE, detail, field="code")
    try:
        return _UCUM_TIME[symbol] * value
    except OverflowError:
        raise Unmappable(Problem.INVALID_VALUE, "is too long a time", field="value") from None


def unversioned_parts(path: str) -> list[str]:
    """The non-empty `/`-separated parts of a reference's path, its version suffix
    (`/_history/<v>`) dropped."""
    parts = [part for part in path.split("/") if part]
    return parts[: parts.index("_history")] if "_history" in parts else parts


def relative_reference(reference: str) -> str | None:
    """`Type/id` of a relative or absolute literal reference (a version suffix is dropped)."""
    parts = unversioned_parts(reference)
    if len(parts) < 2:
        return None
    return f"{parts[-2]}/{parts[-1]}"


_FHIR_DATE_TIME: Final = re.compile(
    r"(?P<year>\d{4})(?:-(?P<month>\d{2})(?:-(?P<day>\d{2})"
    r"(?:T(?P<hour>\d{2}):(?P<minute>\d{2})(?::(?P<second>\d{2})(?:\.(?P<fraction>\d+))?)?"
    r"(?P<zone>Z|[+-]\d{2}:\d{2})?)?)?)?"
)


def time_without_zone(text: str) -> re.Match[str] | None:
    """The parts of a FHIR dateTime that has a time but no zone (which FHIR forbids and
    `parse_fhir_datetime` refuses), or None for any other text."""
    match = _FHIR_DATE_TIME.fullmatch(text.strip())
    if match is None or match["hour"] is None or match["zone"] is not None:
        return None
    return match


def parse_fhir_datetime(text: str) -> datetime:
    """A FHIR date, dateTime or instant as an aware datetime; a date is midnight UTC."""
    match = _FHIR_DATE_TIME.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a FHIR date or dateTime")
    parts = match.groupdict()
    if parts["hour"] is not None and parts["zone"] is None:
        raise ValueError(f"{text!r} has a time but no time zone")
    fraction = (parts["fraction"] or "").ljust(6, "0")[:6]
    try:
        moment = datetime(
            int(parts["year"]),
            int(parts["month"] or 1),
            int(parts["day"] or 1),
            int(parts["hour"] or 0),
            int(parts["minute"] or 0),
            min(int(parts["second"] or 0), 59),
            int(fraction),
            tzinfo=_zone(parts["zone"]),
        )
        moment.astimezone(UTC)
    except ValueError as error:
        raise ValueError(f"{text!r} is not a valid date: {error}") from None
    except OverflowError:
        raise ValueError(
            f"{text!r} is out of the range of dates (years 1 to 9999 in UTC)"
        ) from None
    return moment


def _zone(text: str | None) -> timezone:
    if text is None or text == "Z":
        return UTC
    sign = -1 if text.startswith("-") else 1
    hours, minutes = int(text[1:3]), int(text[4:6])
    return timezone(sign * timedelta(hours=hours, minutes=minutes))


def parse_fhir_period_end(text: str) -> datetime:
    """A FHIR date or dateTime that ends a Period, as the instant the period ends before: a
    value of reduced precision includes the whole year, month or day it names (FHIR
    Period.end), so `2021-03` ends at 2021-04-01T00:00, `2021-03-10` at 2021-03-11T00:00 and
    `2021` at 2022-01-01T00:00 (UTC, as a date is read); a value with a time is that time."""
    moment = parse_fhir_datetime(text)
    match = _FHIR_DATE_TIME.fullmatch(text.strip())
    if match is None or match["hour"] is not None:
        return moment
    try:
        if match["month"] is None:
            return moment.replace(year=moment.year + 1)
        if match["day"] is None:
            return (moment + timedelta(days=31)).replace(day=1)
        return moment + timedelta(days=1)
    except (ValueError, OverflowError):
        raise ValueError(
            f"{text!r} ends at the end of the range of dates (years 1 to 9999 in UTC)"
        ) from None


def time_at(holder: Json, *path: str) -> datetime | None:
    """The date or dateTime at `path`, as the instant it starts."""
    return _read_time(holder, path, parse_fhir_datetime)


def end_time_at(holder: Json, *path: str) -> datetime | None:
    """The date or dateTime that ends a Period at `path`, as the instant the period ends before
    (see `parse_fhir_period_end`)."""
    return _read_time(holder, path, parse_fhir_period_end)


def _read_time(
    holder: Json, path: Sequence[str], parse: Callable[[str], datetime]
) -> datetime | None:
    text = _value_at(holder, path)
    if text is None:
        return None
    where = ".".join(path)
    if not isinstance(text, str):
        raise Unmappable(Problem.INVALID_VALUE, "is not a date or dateTime", field=where)
    try:
        return parse(text)
    except ValueError as error:
        raise Unmappable(Problem.INVALID_VALUE, str(error), field=where) from None


def _value_at(holder: Json, path: Sequence[str]) -> object:
    value: object = holder
    for depth, key in enumerate(path):
        if value is None:
            return None
        mapping = value if isinstance(value, Mapping) else as_object(value, ".".join(path[:depth]))
        value = mapping.get(key)
    return value


def text_among(value: object, options: Collection[str]) -> bool:
    """Whether `value` is text and one of `options` (a list or an object sent where a code
    belongs is none of them, rather than an error of its own)."""
    return isinstance(value, str) and value in options


def a_resource_of_type(kind: object) -> str:
    """A resource of type `kind` with its article ("a Substance", "an AllergyIntolerance")."""
    if not isinstance(kind, str) or not kind:
        return "a resource without a resourceType"
    return f"{'an' if kind[:1] in 'AEIOU' else 'a'} {kind}"


def as_object(value: object, where: str) -> Json:
    if not isinstance(value, Mapping):
        raise Unmappable(Problem.INVALID_VALUE, "is not a JSON object", field=where or None)
    return value


def object_at(holder: Json, key: str) -> Json:
    value = holder.get(key)
    return {} if value is None else as_object(value, key)


def required_object(holder: Json, key: str) -> Json:
    if holder.get(key) is None:
        raise Unmappable(Problem.MISSING_FIELD, "", field=key)
    return as_object(holder[key], key)


def objects_at(holder: Json, key: str) -> list[Json]:
    values = holder.get(key, [])
    if not isinstance(values, list) or not all(isinstance(value, Mapping) for value in values):
        raise Unmappable(Problem.INVALID_VALUE, "is not a list of objects", field=key)
    return values


def items_at(holder: Json, key: str) -> list[tuple[str, Json]]:
    """The objects of the list `key`, each with its path (`coding[0]`)."""
    return [(f"{key}[{n}]", item) for n, item in enumerate(objects_at(holder, key))]


def string_at(holder: Json, key: str, *, at: str | None = None) -> str | None:
    """The string `key` of `holder` (None when absent or blank); `at` is the holder's path."""
    value = holder.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        field = f"{at}.{key}" if at else key
        raise Unmappable(Problem.INVALID_VALUE, "is not a string", field=field)
    return value.strip() or None


def display_at(holder: Json) -> str | None:
    """A coding's or a reference's `display`, None when it is no text (a number, an object): a
    display only shows the code or the target to a person, so one that cannot be read costs
    the display, never the coding or the record (`unreadable_words` reports it)."""
    value = holder.get("display")
    return value.strip() or None if isinstance(value, str) else None


def concept_words(concept: Json) -> str | None:
    """A CodeableConcept's `text`. One that is no text is passed over (None) when the concept
    has codings to read it by (`unreadable_words` reports it); without any, it is an error,
    the concept naming nothing."""
    if concept.get("coding") and not isinstance(concept.get("text"), str | None):
        return None
    return string_at(concept, "text")


def unreadable_words(resource: Json) -> list[str]:
    """A line for each display (of a coding, of a reference) in `resource`, contained
    resources too, that is neither text nor absent (`"display": 500`), and for each text of a
    concept with codings that is not text: each is read without it."""
    lines: list[str] = []
    if not _any_unreadable_word(resource):
        return lines
    stack: list[tuple[str, object]] = [("", resource)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, Mapping):
            stack.extend(
                (f"{path}.{key}" if path else str(key), child)
                for key, child in reversed(list(value.items()))
            )
            lines += [_unread(path, key, value[key]) for key in _unreadable_keys(value)]
        elif isinstance(value, list):
            stack.extend((f"{path}[{n}]", item) for n, item in reversed(list(enumerate(value))))
    return lines


def _any_unreadable_word(resource: Json) -> bool:
    """Whether `unreadable_words` has anything to say: a scan without paths, as most resources
    have nothing."""
    stack: list[object] = [resource]
    while stack:
        value = stack.pop()
        if isinstance(value, Mapping):
            if _unreadable_keys(value):
                return True
            stack.extend(child for child in value.values() if isinstance(child, Mapping | list))
        elif isinstance(value, list):
            stack.extend(item for item in value if isinstance(item, Mapping | list))
    return False


def _unreadable_keys(holder: Mapping[str, object]) -> tuple[str, ...]:
    """The words of `holder` that are there but not text: its `display`, and its `text` when
    it has codings to be read by."""
    display_unread = not isinstance(holder.get("display"), str | None)
    text_unread = bool(holder.get("coding")) and not isinstance(holder.get("text"), str | None)
    return (("display",) if display_unread else ()) + (("text",) if text_unread else ())


def _unread(path: str, key: str, value: object) -> str:
    shown = json.dumps(value, ensure_ascii=False)
    shown = shown if len(shown) <= _SHOWN else f"{shown[: _SHOWN - 1]}…"
    where = f"{path}.{key}" if path else key
    if key == "display" and _CODING_PATH.search(path):
        return f"{where} is not text ({shown}): the coding is read without its display"
    return f"{where} is not text ({shown}) (imported without it)"


_SHOWN: Final = 60
_CODING_PATH: Final = re.compile(r"(?:^|\.)coding\[\d+\]$")


def required_string(holder: Json, key: str) -> str:
    value = string_at(holder, key)
    if value is None:
        raise Unmappable(Problem.MISSING_FIELD, "", field=key)
    return value


def required_code(holder: Json, key: str, known: Collection[str]) -> str:
    """A plain code field (a request's `status` or `intent`): as sent, or the `known` code it
    spells in other letters (`Active`, `ON_HOLD`, `Entered in error`), as a status concept's
    code is read (`status_code`); any other value is returned as sent, for the caller's check
    to report."""
    code = required_string(holder, key)
    spelled = _spelled_code(code)
    return spelled if code not in known and spelled in known else code


def lookup(table: Mapping[str, E], code: str | None, where: str) -> E | None:
    return None if code is None else required_lookup(table, code, where)


def required_lookup(table: Mapping[str, E], code: str, where: str) -> E:
    """The entry of `code`, or of the code it spells in other letters (`HIGH`, `Severe`,
    `Unable to assess`); an error naming the allowed codes when it spells none."""
    found = table.get(code)
    if found is None:
        found = table.get(_spelled_code(code))
    if found is None:
        allowed = ", ".join(sorted(table))
        raise Unmappable(Problem.INVALID_VALUE, f"{code!r} is not one of {allowed}", field=where)
    return found


def status_code(resource: Json, key: str, known: Collection[str] = ()) -> str | None:
    """The code of a status CodeableConcept (e.g. clinicalStatus), or None when absent: the
    first of its codings' codes that is `known` (a concept may carry a local coding next to the
    standard one), else the code its text spells when that is known (a local code "A" with the
    text "Active"), else the first code that spells a known one in other letters (`Active`,
    `ENTERED_IN_ERROR`: read as its text would be), else the first code, which the caller's
    lookup then reports. A concept with no coded value but a text is read as the code it spells
    (`Entered in error` -> `entered-in-error`), so the caller's lookup accepts it only if it
    names a code; so is a bare code where R4 wants a concept (`"clinicalStatus": "active"`, the
    DSTU2/STU3 form)."""
    concept = resource.get(key)
    if concept is None:
        return None
    if isinstance(concept, str):
        return _spelled_code(concept)
    return within(key, lambda: _concept_code(as_object(concept, key), known))


def _concept_code(concept: Json, known: Collection[str]) -> str:
    codes = [
        code
        for where, coding in items_at(concept, "coding")
        if (code := string_at(coding, "code", at=where))
    ]
    text = string_at(concept, "text")
    spelled = _spelled_code(text) if text is not None else None
    found = next((code for code in codes if code in known), None)
    if found is None and spelled is not None and spelled in known:
        return spelled
    if found is None:
        found = next(
            (as_spelled for code in codes if (as_spelled := _spelled_code(code)) in known), None
        )
    found = found or next(iter(codes), spelled)
    if found is None:
        raise Unmappable(Problem.MISSING_FIELD, "", field="coding.code")
    return found


def _spelled_code(text: str) -> str:
    """The code a status's text or bare code spells (`Entered in error` -> `entered-in-error`)."""
    return "-".join(text.casefold().replace("_", " ").split())


def codings_of(concept: Json) -> tuple[Coding, ...]:
    """The usable codings of a CodeableConcept (those with a system and a code)."""
    found = []
    for where, coding in items_at(concept, "coding"):
        system, code = string_at(coding, "system", at=where), string_at(coding, "code", at=where)
        display = display_at(coding)
        if system is not None and code is not None:
            found.append(Coding(system=system, code=code, display=display))
    return tuple(found)


def concept_text(concept: Json) -> str | None:
    """A CodeableConcept's text, else its first coding display."""
    text = concept_words(concept)
    if text is not None:
        return text
    displays = (display_at(coding) for _, coding in items_at(concept, "coding"))
    return next((display for display in displays if display), None)


def first_code(concept: Json) -> str | None:
    return next((coding.code for coding in codings_of(concept)), None)


class ReadConcept(NamedTuple):
    label: str | None
    codes: tuple[Coding, ...]


class NamedConcept(NamedTuple):
    """A CodeableConcept that names a drug or an allergen, as read: where it is in the record,
    its text and its codings (each with its display), so that whether its words and its codes
    name the same substance can be checked where drug knowledge is at hand."""

    where: str
    text: str | None
    codes: tuple[Coding, ...]


def named_concept(concept: Json, where: str) -> NamedConcept:
    return within(where, lambda: NamedConcept(where, concept_words(concept), codings_of(concept)))


def optional_concept(value: object) -> ReadConcept | None:
    """The label (text, else a coding's display, else the reference's display, else the first
    code) and codings of an optional CodeableConcept or Reference, or None when it cannot be
    read: a malformed optional part of a record is passed over, it never costs the record."""
    if not isinstance(value, Mapping):
        return None
    try:
        label = concept_text(value) or display_at(value) or first_code(value)
        return ReadConcept(label, codings_of(value))
    except Unmappable:
        return None


def concept_label(concept: Json, where: str) -> str:
    label = within(where, lambda: concept_text(concept) or first_code(concept))
    if label is None:
        why = _unsystemed(concept, where)
        raise Unmappable(Problem.MISSING_FIELD, f"{where} has no text, display or code{why}")
    return label


def _unsystemed(concept: Json, where: str) -> str:
    """Why a concept's codes name nothing when a coding has a code but no system: the code
    alone (`7980`) cannot be told apart from the same digits in another terminology."""
    for at, coding in items_at(concept, "coding"):
        code = string_at(coding, "code", at=at)
        if code is not None and string_at(coding, "system", at=at) is None:
            return (
                f" with a system ({where}.{at} has the code {code!r} but no system: which "
                "terminology it is from, and so what it names, cannot be told)"
            )
    return ""


def notes_of(resource: Json) -> str | None:
    texts = [
        text
        for where, note in items_at(resource, "note")
        if (text := string_at(note, "text", at=where))
    ]
    return "\n".join(texts) or None
