"""Patients merged at the source (FHIR R4 `Patient.link`): a Patient `replaced-by` another
"must no longer be used" (R4), and a Patient that `replaces` another holds what was merged into
it. The records naming a replaced patient are filed under the patient that replaces it, at the
end of the chain (old -> mid -> new), through the path every patient reference takes
(`sources.Index.current_patient`). A replacement that cannot be followed (a cycle, two
patients replacing one, a link whose patient cannot be told or is on another server) makes
the records naming that patient errors, never filed under a patient guessed; so does a link
whose type is missing or none of R4's four (`merged-into`: it may be a replacement). `refer`
and `seealso` links merge nothing. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final, NamedTuple

from schemas.events import Event
from schemas.fhir.inputs import PassedOver, SourcedResource, server_base_of, version_rank
from schemas.fhir.json_access import (
    Json,
    Unmappable,
    Unsupported,
    items_at,
    objects_at,
    required_code,
    string_at,
    within,
)
from schemas.fhir.sources import (
    Index,
    PatientLinks,
    Replacement,
    subject_id_of,
    subject_of,
)

REPLACED_BY: Final = "replaced-by"
REPLACES: Final = "replaces"
_MERGING: Final = frozenset({REPLACED_BY, REPLACES})
_LINK_TYPES: Final = (REPLACED_BY, REPLACES, "refer", "seealso")
"""R4's link types (a required binding): any other value may be a replacement."""
_EXAMPLES: Final = 3
"""How many of the records filed under the replacing patient a notice names."""


class _Link(NamedTuple):
    """One `Patient.link` entry that merges (or may merge) patients, as read."""

    where: str
    kind: str | None
    """`replaced-by` or `replaces`; None when the entry cannot be read (it may be either)."""
    other: str | None
    """The subject id of the patient it names; None when that cannot be told."""
    problem: str | None


def linked_patients(index: Index, resources: Iterable[SourcedResource]) -> PatientLinks:
    """The replacements the newest version of each Patient of the input set states, followed to
    the end of each chain, and why any cannot be followed."""
    edges: dict[str, set[str]] = {}
    said_by: dict[str, tuple[int, str]] = {}
    problems: dict[str, str] = {}
    notices: list[tuple[str, str, str]] = []
    for item in _newest_patients(resources):
        subject = subject_id_of(item.identity or "")
        for link in _links(item, index.seen_from(item.server_base)):
            if link.other is None:
                problem = f"{link.where} {link.problem}"
                if link.kind == REPLACES:
                    detail = f"{problem}: which patient it replaces cannot be told (read past)"
                    notices.append((item.origin, f"Patient/{subject}", detail))
                else:
                    problems.setdefault(subject, _cannot_follow(problem))
                continue
            old, new = (subject, link.other) if link.kind == REPLACED_BY else (link.other, subject)
            edges.setdefault(old, set()).add(new)
            rank = (0 if link.kind == REPLACED_BY else 1, item.origin)
            said_by[old] = min(said_by.get(old, rank), rank)
    for old, targets in edges.items():
        if len(targets) > 1:
            named = ", ".join(f"Patient/{target}" for target in sorted(targets))
            problems.setdefault(
                old,
                f"is replaced by {len(targets)} patients at the source ({named}, Patient.link): "
                "which one holds its records cannot be told",
            )
    replaced: dict[str, Replacement] = {}
    unfollowed = dict(problems)
    for old in sorted(edges.keys() - problems.keys()):
        chain, why = _followed(old, edges, problems)
        if why is None:
            replaced[old] = Replacement(chain, said_by[old][1])
        else:
            unfollowed[old] = why
    return PatientLinks(replaced, unfollowed, tuple(sorted(notices)))


def _cannot_follow(problem: str) -> str:
    return (
        f"has a link that cannot be followed ({problem}): which patient holds its records "
        "cannot be told"
    )


def _followed(
    old: str, edges: Mapping[str, set[str]], problems: Mapping[str, str]
) -> tuple[tuple[str, ...], str | None]:
    """The patients that replace `old` in turn, or why the chain cannot be followed (a cycle,
    or a patient in it whose own replacement cannot be followed)."""
    chain: list[str] = []
    current = old
    while True:
        if current in problems:
            return (), f"is replaced by Patient/{current}, whose replacement cannot be followed"
        if current not in edges:
            return tuple(chain), None
        (following,) = edges[current]
        if following == old or following in chain:
            cycle = " -> ".join(f"Patient/{name}" for name in (old, *chain, following))
            return (), (
                f"is in a cycle of replacements at the source ({cycle}, Patient.link): which "
                "patient holds its records cannot be told"
            )
        chain.append(following)
        current = following


def _newest_patients(resources: Iterable[SourcedResource]) -> list[SourcedResource]:
    """The newest version of each Patient (all of those that rank alike), in a stable order."""
    versions: dict[str, list[SourcedResource]] = {}
    for item in resources:
        if item.resource_type == "Patient" and item.identity and item.identity_conflict is None:
            versions.setdefault(item.identity, []).append(item)
    newest: list[SourcedResource] = []
    for held in versions.values():
        top = max(version_rank(item.resource) for item in held)
        newest.extend(item for item in held if version_rank(item.resource) == top)
    return sorted(newest, key=lambda item: item.origin)


def _links(item: SourcedResource, index: Index) -> list[_Link]:
    """The entries of a Patient's `link` that merge patients, each with the patient it names."""
    try:
        entries = items_at(item.resource, "link")
    except Unmappable as error:
        return [_Link("link", None, None, error.detail)]
    links: list[_Link] = []
    for where, entry in entries:
        try:
            kind = string_at(entry, "type", at=where)
        except Unmappable as error:
            links.append(_Link(where, None, None, f"type {error.detail}"))
            continue
        if kind is None:
            links.append(_Link(where, None, None, "type is missing"))
            continue
        spelled = required_code(entry, "type", _LINK_TYPES)
        if spelled in _MERGING:
            links.append(_linked(item, index, where, entry, spelled))
        elif spelled not in _LINK_TYPES:
            named = ", ".join(_LINK_TYPES)
            links.append(_Link(where, None, None, f"type {kind!r} is none of {named}"))
    return links


def _linked(item: SourcedResource, index: Index, where: str, entry: Json, kind: str) -> _Link:
    """The patient one merging link names, on the Patient's own server."""
    label = f"({kind})"
    try:
        other = within(where, lambda: subject_of(entry, "other", index))
    except Unmappable as error:
        return _Link(where, kind, None, f"{label}: {error.message}")
    except Unsupported as skip:
        return _Link(where, kind, None, f"{label} names no Patient ({skip.reason})")
    holder = entry.get("other")
    reference = holder.get("reference") if isinstance(holder, Mapping) else None
    server = server_base_of(reference, item.server_base) if isinstance(reference, str) else None
    if item.server_base is not None and server is not None and server != item.server_base:
        return _Link(
            where,
            kind,
            None,
            f"{label} names a patient on another server ({server}): a replacement is followed "
            "on the patient's own server only",
        )
    if other == subject_id_of(item.identity or ""):
        return _Link(where, kind, None, f"{label} names the patient itself")
    return _Link(where, kind, other, None)


def named_subject(resource: Json, index: Index) -> str | None:
    """The subject id of the patient a record names as written (`patient`, else `subject`),
    before any replacement is followed; None when it names none that can be read."""
    as_written = index.linked(PatientLinks())
    for field_name in ("patient", "subject"):
        if resource.get(field_name) is not None:
            try:
                return subject_of(resource, field_name, as_written)
            except (Unmappable, Unsupported):
                return None
    return None


def replacement_notices(
    links: PatientLinks, filed: Mapping[str, Sequence[str]]
) -> list[PassedOver]:
    """One line per replaced patient: which patient replaces it, and which records naming it
    (`filed`: subject id -> `Type/id` of each) are filed under that patient; then each link
    read past."""
    lines = [PassedOver(*notice) for notice in links.notices]
    for old, replacement in sorted(links.replaced.items()):
        final = f"Patient/{replacement.chain[-1]}"
        by = ", then ".join(f"Patient/{name}" for name in replacement.chain)
        records = filed.get(old, ())
        if records:
            named = ", ".join(records[:_EXAMPLES])
            more = len(records) - _EXAMPLES
            named += f" and {more:,} more" if more > 0 else ""
            said = f"its {len(records):,} record(s) are filed under {final} ({named})"
        else:
            said = "no record of the input set names it"
        detail = f"replaced by {by} at the source (Patient.link): {said}"
        lines.append(PassedOver(replacement.origin, f"Patient/{old}", detail))
    return lines


def shared_identifier_notices(
    index: Index, resources: Iterable[SourcedResource]
) -> list[PassedOver]:
    """One line per business identifier (`system|value`) that Patients filed as different
    subjects carry alike (one MRN under two resource ids): the import keeps them apart, as
    their ids say, and names them so one person is not split without a word (a conditional
    create or update, or a `Patient.link`, makes them one). The value is not repeated: only
    its system and the Patients."""
    holders: dict[tuple[str, str], dict[str, SourcedResource]] = {}
    lines: list[PassedOver] = []
    for item in _newest_patients(resources):
        if item.identity is None:
            continue
        try:
            subject = index.current_patient(subject_id_of(item.identity))
            identifiers = objects_at(item.resource, "identifier")
        except Unmappable as error:
            if error.field == "identifier":
                detail = f"{error.message}: not compared with other Patients' identifiers"
                lines.append(PassedOver(item.origin, f"Patient/{item.identity}", detail))
            continue
        for identifier in identifiers:
            system, value = identifier.get("system"), identifier.get("value")
            if isinstance(value, str) and value.strip():
                key = (system if isinstance(system, str) else "", value.strip())
                holders.setdefault(key, {}).setdefault(subject, item)
    for (system, _), subjects in holders.items():
        if len(subjects) < 2:
            continue
        first, *others = subjects.values()
        named = ", ".join(f"Patient/{other.identity}" for other in others)
        detail = (
            f"it carries an identifier of system {system or '(none)'!r} with the value "
            f"{named} carries: filed as {len(subjects)} subjects, as their ids say; if they are "
            "one person, send one Patient id, a conditional create (ifNoneExist: "
            "identifier=system|value) or a Patient.link"
        )
        lines.append(PassedOver(first.origin, f"Patient/{first.identity}", detail))
    return lines


def case_variant_notices(
    resources: Iterable[SourcedResource], events: Iterable[tuple[str, Event]]
) -> list[PassedOver]:
    """One line per patient that records name by an id the input set holds no Patient under,
    while it holds one whose id differs in letter case only (`Patient/P1` beside Patient `p1`):
    FHIR ids are case-sensitive, so they are filed as named, but a record meant for the patient
    would stand apart from its allergies or orders without a word."""
    held = {
        subject_id_of(item.identity)
        for item in resources
        if item.resource_type == "Patient" and item.identity
    }
    by_case: dict[str, set[str]] = {}
    for subject in held:
        by_case.setdefault(subject.casefold(), set()).add(subject)
    named: dict[str, tuple[str, list[str]]] = {}
    for origin, event in events:
        subject, record = event.subject_id, event.source_ref
        if subject in held or subject.casefold() not in by_case or record is None:
            continue
        records = named.setdefault(subject, (origin, []))[1]
        if record not in records:
            records.append(record)
    lines: list[PassedOver] = []
    for subject, (origin, records) in sorted(named.items()):
        others = ", ".join(f"Patient/{other}" for other in sorted(by_case[subject.casefold()]))
        listed = ", ".join(records[:_EXAMPLES])
        more = len(records) - _EXAMPLES
        listed += f" and {more:,} more" if more > 0 else ""
        detail = (
            f"named by {len(records):,} record(s) ({listed}), while the input set holds no "
            f"Patient of this id but {others}, whose id differs in letter case only: FHIR ids "
            "are case-sensitive, so they are filed under the patient as named, apart from "
            f"{others}; check the references at the source"
        )
        lines.append(PassedOver(origin, f"Patient/{subject}", detail))
    return lines
