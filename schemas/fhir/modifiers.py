"""Whether a resource may be read as the plain R4 record it looks like. Pure.

FHIR marks some content as changing the meaning of what holds it: a `modifierExtension` (on
the resource or on any of its elements: "this reaction was ruled out", "not to be given"), and
`implicitRules` (the record was built under rules the reader must know). A reader that does not
understand such content must not process the resource as if it were absent (R4, Extensibility:
"SHALL either refuse to process the resource or element, or treat it as ..."), and this
importer understands none. A resource tagged `SUBSETTED` (a `_summary` or `_elements` answer)
is only part of the record: an element it lacks (a refutation, an inactive status, an
instruction not to give the drug) cannot be told from one the record does not have, and the
importer reads an absent status as unconfirmed and active. Such resources are errors that say
why, never imported as plain records. So are the resources of a Bundle entry that carries a
modifier extension (on the entry, or on its request, response or search), and those of a
Bundle with `implicitRules` (`bundle_modifier`, `entry_modifier`): the modifier changes what
the entry, or the whole Bundle, means.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple

from schemas.fhir.json_access import Json, Problem, Unmappable

SUBSETTED_SYSTEM: Final = "http://terminology.hl7.org/CodeSystem/v3-ObservationValue"
SUBSETTED_CODE: Final = "SUBSETTED"


def not_plain(resource: Json) -> Unmappable | None:
    """Why `resource` cannot be read as a plain record (a modifier extension anywhere in it,
    contained resources included; `implicitRules`; a SUBSETTED tag), or None when it can."""
    subsetted = _subsetted(resource)
    if subsetted is not None:
        return subsetted
    path, value = _first_modifier(resource)
    return None if path is None else refusal(Modifier(path, value))


class Modifier(NamedTuple):
    """A modifier element: where it is (`reaction[0].modifierExtension`,
    `Bundle.entry.request.modifierExtension`) and its value."""

    path: str
    value: object


_EARLIER_NEGATIONS: Final[Mapping[str, tuple[tuple[str, str, str], ...]]] = {
    "MedicationStatement": (("taken", "n", "STU3"), ("wasNotTaken", "true", "DSTU2")),
    "MedicationAdministration": (("notGiven", "true", "STU3"), ("wasNotGiven", "true", "DSTU2")),
    "Immunization": (("notGiven", "true", "STU3"), ("wasNotGiven", "true", "DSTU2")),
    "MedicationDispense": (("notDone", "true", "STU3"),),
}
"""The modifier elements of earlier releases that say a drug was not taken or not given (STU3
`MedicationStatement.taken` "n", `notGiven`, a dispense's `notDone`; DSTU2 `wasNotTaken`,
`wasNotGiven`): R4 says it with a status (not-taken, not-done, declined). The value that negates, as JSON writes it."""


def earlier_negation(resource: Json) -> str | None:
    """The element of an earlier FHIR release by which `resource` says the drug was not taken
    or not given (`taken 'n' (STU3)`), or None: an R4 record sent with it would otherwise be
    read as taken, as if the modifier were absent."""
    for key, negating, release in _EARLIER_NEGATIONS.get(str(resource.get("resourceType")), ()):
        value = resource.get(key)
        written = ("true" if value else "false") if isinstance(value, bool) else value
        if isinstance(written, str) and written.strip().casefold() == negating:
            shown = written if isinstance(value, bool) else repr(value)
            return f"{key} {shown} ({release})"
    return None


def bundle_modifier(bundle: Json) -> Modifier | None:
    """A modifier of a Bundle itself: its `implicitRules`, or a `modifierExtension` (which R4
    does not define on a Bundle, but whoever wrote one says it changes what the Bundle
    means). It refuses every resource of the Bundle."""
    return _first_present(bundle, "Bundle", ("implicitRules", "modifierExtension"))


def entry_modifier(entry: Json) -> Modifier | None:
    """A modifier extension of a Bundle entry, or of its request, response or search (each a
    BackboneElement that may carry one): it refuses the entry's resource."""
    parts = ("request", "response", "search")
    holders = {"Bundle.entry": entry, **{f"Bundle.entry.{part}": entry.get(part) for part in parts}}
    found = (_first_present(held, path, ("modifierExtension",)) for path, held in holders.items())
    return next((modifier for modifier in found if modifier is not None), None)


def _first_present(holder: object, path: str, keys: tuple[str, ...]) -> Modifier | None:
    """The first of `keys` that `holder` gives a value (not empty), if it is an object."""
    if not isinstance(holder, Mapping):
        return None
    for key in keys:
        if holder.get(key) not in (None, [], ""):
            return Modifier(f"{path}.{key}", holder[key])
    return None


def refusal(modifier: Modifier) -> Unmappable:
    """The error for a record that `modifier` (in it, or around it) refuses."""
    path, value = modifier
    path = path if len(path) <= _QUOTED else f"{path[: _QUOTED // 2]}…{path[-_QUOTED // 2 :]}"
    if path.endswith("implicitRules"):
        return Unmappable(
            Problem.MODIFIER_NOT_UNDERSTOOD,
            f"({_quoted(value)}) says the record was made under rules this importer does not "
            "know and that change what it means: it is not imported as if it had none",
            field=path,
        )
    return Unmappable(
        Problem.MODIFIER_NOT_UNDERSTOOD,
        f"({_urls(value)}) is a modifier extension this importer does not understand: it may "
        "change what the record means (ruled out, not to be given), so the record is not "
        "imported as if it had none",
        field=path,
    )


def _first_modifier(resource: Json) -> tuple[str | None, object]:
    """The path and value of the first `modifierExtension` (non-empty) or `implicitRules` in
    document order. Iterative: a resource may be nested as deep as the JSON reader allows."""
    stack: list[tuple[str, object]] = [("", resource)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, Mapping):
            children = list(value.items())
            for key, child in children:
                if key in _MODIFIERS and child not in (None, [], ""):
                    return _joined(path, str(key)), child
            stack.extend((_joined(path, str(key)), child) for key, child in reversed(children))
        elif isinstance(value, list):
            stack.extend((f"{path}[{n}]", item) for n, item in reversed(list(enumerate(value))))
    return None, None


_MODIFIERS: Final = frozenset({"modifierExtension", "implicitRules"})


def _joined(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _urls(value: object) -> str:
    items = value if isinstance(value, list) else [value]
    urls = [
        item["url"]
        for item in items
        if isinstance(item, Mapping) and isinstance(item.get("url"), str)
    ]
    return ", ".join(_quoted(url) for url in dict.fromkeys(urls)) or "no url"


def _quoted(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _QUOTED else text[: _QUOTED - 1] + "…"


_QUOTED: Final = 200


def _subsetted(resource: Json) -> Unmappable | None:
    meta = resource.get("meta")
    tags = meta.get("tag") if isinstance(meta, Mapping) else None
    for n, tag in enumerate(tags if isinstance(tags, list) else []):
        if (
            isinstance(tag, Mapping)
            and tag.get("code") == SUBSETTED_CODE
            and tag.get("system") in (SUBSETTED_SYSTEM, None)
        ):
            return Unmappable(
                Problem.SUBSETTED_RESOURCE,
                "is SUBSETTED: the source sent only part of the record (a _summary or _elements "
                "answer), and an element it left out (a refutation, an inactive status, an "
                "instruction not to give the drug) cannot be told from one the record does not "
                "have; fetch the whole resource",
                field=f"meta.tag[{n}]",
            )
    return None
