"""What every mapper works with: the caller's `ImportContext`, the `Index` of the whole input
set (references resolve across files), the resource being mapped, its timing, and the envelope
of the events made from it (deterministic ids). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Final, NamedTuple, TypeVar
from urllib.parse import parse_qs
from uuid import NAMESPACE_URL, uuid5

from schemas.events import Event, EventType, FactAsserted, Origin, Payload, Sensitivity
from schemas.fhir.inputs import (
    CLAIM_TYPES,
    SourcedResource,
    VersionClash,
    VersionRank,
    clashing_versions,
    located,
    reference_key,
    server_base_of,
    version_id,
    version_rank,
    version_slot,
)
from schemas.fhir.json_access import (
    Json,
    NamedConcept,
    NotForAPatient,
    Problem,
    Unmappable,
    object_at,
    relative_reference,
    required_object,
    string_at,
    text_among,
    time_at,
    within,
)

FHIR_IMPORT_NAMESPACE: Final = uuid5(NAMESPACE_URL, "https://uac.example/fhir-import")
JUST_AFTER: Final = timedelta(milliseconds=1)
"""Where a stop with no known time is placed: right after the order it ends."""


@dataclass(frozen=True)
class ImportContext:
    """What the caller decides: who imports for which tenant, and the time of last resort."""

    tenant_id: str
    actor: str
    fallback_time: datetime

    def __post_init__(self) -> None:
        if self.fallback_time.tzinfo is None:
            raise ValueError("fallback_time must be timezone-aware")


def fhir_event_id(
    tenant_id: str, resource_type: str, resource_id: str, version: str, kind: str
) -> str:
    """The deterministic event id of one event made from one version of one resource."""
    name = "/".join((tenant_id, resource_type, resource_id, version, kind))
    return str(uuid5(FHIR_IMPORT_NAMESPACE, name))


class Replacement(NamedTuple):
    """The patients that replace a patient at the source (`Patient.link`), in turn, and where
    the link that says so was read."""

    chain: tuple[str, ...]
    """Subject ids: the patient that replaces it, the one that replaces that one, ...; the last
    holds its records."""
    origin: str


@dataclass(frozen=True)
class PatientLinks:
    """Patients merged at the source, as `Patient.link` says (`schemas.fhir.patient_links`)."""

    replaced: Mapping[str, Replacement] = field(default_factory=dict)
    """Subject id of a patient that another replaces -> the patients replacing it."""
    unfollowed: Mapping[str, str] = field(default_factory=dict)
    """Subject id of a patient whose replacement cannot be followed -> why."""
    notices: tuple[tuple[str, str, str], ...] = ()
    """(origin, record, detail) of each link read past: one whose patient cannot be told."""


@dataclass(frozen=True)
class Index:
    """What references resolve to across the whole input set."""

    medications: Mapping[str, Json]
    """`Medication/<id>` and entry fullUrls -> the newest version of that Medication."""
    patients: Mapping[str, str]
    """Entry fullUrl -> Patient id."""
    orders: Mapping[str, SourcedResource]
    """`MedicationRequest/<id>` and entry fullUrls -> the newest version of that
    MedicationRequest."""
    patient_identifiers: Mapping[tuple[str, str], str | None] = field(default_factory=dict)
    """(identifier system, value) -> Patient id, for references by identifier (None: more than
    one Patient carries it)."""
    order_ends: dict[str, datetime | None] = field(default_factory=dict, compare=False)
    """Order id -> when its own import stops it, filled as records of drugs given name their
    orders (so an order is mapped once more for them all, not once per record)."""
    undecided: Mapping[str, str] = field(default_factory=dict)
    """A key given by two different resources -> why neither can be read as the one meant."""
    """Keys given by two different resources of which neither is the newer version: what they
    name cannot be told (see `version_rank`)."""
    replacing: Mapping[str, tuple[SourcedResource, ...]] = field(default_factory=dict)
    """`MedicationRequest/<id>` or an entry's `urn:uuid:` -> the MedicationRequests (every
    version) whose `priorPrescription` names it, as written."""
    substances: Mapping[str, Json] = field(default_factory=dict)
    """`Substance/<id>` and entry fullUrls -> the newest version of that Substance (what a
    Medication's ingredient may name)."""
    versions: Mapping[str, Mapping[str, Json]] = field(default_factory=dict)
    """`Medication/<id>`, `Substance/<id>` or `MedicationRequest/<id>` (and, from a known
    server, `<base>/Medication/<id>`) -> its versions in the input set by `meta.versionId`, for
    a reference pinned to one (`Medication/m1/_history/1`)."""
    across_servers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """`Type/<id>` -> the server bases (two or more) the input set holds or names it on: ids
    are unique per server only, so `Type/<id>` alone does not say which is meant (see
    `inputs.server_base_of`)."""
    disputed: Mapping[str, str] = field(default_factory=dict)
    """An entry's fullUrl (also as `<server base>/<Type>/<id>`) -> why it names no resource:
    its entry holds a resource of another id (`SourcedResource.identity_conflict`)."""
    base: str | None = None
    """The server base of the resource being mapped, against which its relative references
    resolve first (`seen_from`)."""
    links: PatientLinks = PatientLinks()
    """The patients replaced by others at the source, whose records are filed under the
    patient replacing them (`current_patient`)."""
    order_identifiers: Mapping[tuple[str, str], str | None] = field(default_factory=dict)
    """(identifier system, value) -> MedicationRequest id, for a record that names its order
    by identifier only (None: more than one MedicationRequest carries it)."""
    identifiers_of: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    """(Patient id, identifier system) -> the values of that system the Patient carries, to
    tell an identifier that names another patient than the reference beside it."""
    medication_identifiers: Mapping[tuple[str, str], str | None] = field(default_factory=dict)
    """(identifier system, value) -> Medication id, for a record that names its drug by the
    Medication's identifier only (None: more than one Medication carries it)."""

    @classmethod
    def of(cls, resources: Iterable[SourcedResource]) -> Index:
        medications: dict[str, SourcedResource] = {}
        substances: dict[str, SourcedResource] = {}
        patients: dict[str, str] = {}
        orders: dict[str, SourcedResource] = {}
        identifiers: dict[tuple[str, str], str | None] = {}
        order_identifiers: dict[tuple[str, str], str | None] = {}
        medication_identifiers: dict[tuple[str, str], str | None] = {}
        identified = {
            "Patient": identifiers,
            "MedicationRequest": order_identifiers,
            "Medication": medication_identifiers,
        }
        """By type: (identifier system, value) -> the one id that carries it, else None."""
        ranks: dict[str, VersionRank] = {}
        ties: dict[str, VersionRank] = {}
        newest_by_type = {
            "Medication": medications,
            "Substance": substances,
            "MedicationRequest": orders,
        }
        replacing: dict[str, list[SourcedResource]] = {}
        versions: dict[str, dict[str, Json]] = {}
        servers: dict[str, set[str]] = {}
        collected = list(resources)
        clashes = set(clashing_versions(collected))
        disputed = {
            key: why
            for item in collected
            if item.identity_conflict is not None
            for key, why in _disputed_keys(item).items()
        }
        for item in (item for item in collected if item.identity_conflict is None):
            resource_type, identifier = item.resource_type, item.identity
            full_url = reference_key(item.full_url) if item.full_url else None
            relative = identifier and f"{resource_type}/{identifier}"
            base = item.server_base
            on_server = f"{base}/{relative}" if base and relative else None
            keys = [key for key in (on_server, full_url, relative) if key]
            for named, server in _server_keys(item):
                servers.setdefault(named, set()).add(server)
            newest = newest_by_type.get(resource_type)
            if newest is not None:
                _keep_newest(newest, keys, item, ranks, ties)
            version = version_id(item.resource)
            if resource_type in _VERSIONED_TYPES and relative and version:
                for held_as in (on_server, relative):
                    if held_as:
                        versions.setdefault(held_as, {})[version] = item.resource
            if resource_type == "MedicationRequest":
                prior = _prior_key(item.resource)
                if prior is not None:
                    replacing.setdefault(prior, []).append(item)
            if resource_type == "Patient" and full_url and identifier:
                patients[full_url] = identifier
            carried = identified.get(resource_type)
            if carried is not None and identifier:
                for key in _identifier_keys(item.resource):
                    carried[key] = (
                        identifier if carried.get(key, identifier) == identifier else None
                    )
        undecided = {key: _TIED for key, rank in ties.items() if ranks[key] == rank}
        for held in newest_by_type.values():
            undecided |= {
                key: _CLASHED.format(version=version)
                for key, item in held.items()
                if (version := version_id(item.resource))
                and item.identity is not None
                and VersionClash(item.resource_type, item.identity, item.server_base, version)
                in clashes
            }
        across = {key: tuple(sorted(held)) for key, held in servers.items() if len(held) > 1}
        return cls(
            {key: item.resource for key, item in medications.items()},
            patients,
            orders,
            identifiers,
            undecided=undecided,
            replacing={key: tuple(items) for key, items in replacing.items()},
            substances={key: item.resource for key, item in substances.items()},
            versions=versions,
            across_servers=across,
            disputed=disputed,
            order_identifiers=order_identifiers,
            medication_identifiers=medication_identifiers,
            identifiers_of=_values_by_patient(identifiers),
        )

    def linked(self, links: PatientLinks) -> Index:
        """This index with the patients `links` says are replaced by others."""
        return replace(self, links=links)

    def current_patient(self, subject_id: str) -> str:
        """The subject id the records of a patient are filed under: that of the patient that
        replaces it at the source, at the end of the chain (`Patient.link`), else its own; an
        error for a patient whose replacement cannot be followed (its records are not filed
        under a patient guessed)."""
        why = self.links.unfollowed.get(subject_id)
        if why is not None:
            raise Unmappable(Problem.UNRESOLVED_REFERENCE, f"Patient/{subject_id} {why}")
        replacement = self.links.replaced.get(subject_id)
        return subject_id if replacement is None else replacement.chain[-1]

    def seen_from(self, base: str | None) -> Index:
        """This index as the resource from server `base` sees it: its relative references
        resolve against its own server first."""
        return replace(self, base=base)

    def medication(self, reference: str) -> Json | None:
        """The Medication a reference names (`urn:uuid:...`, `Medication/<id>` or a URL ending
        in it), None if the input set does not hold it."""
        return self._definition(self.medications, reference)

    def substance(self, reference: str) -> Json | None:
        """The Substance a reference names (as `medication` finds a Medication)."""
        return self._definition(self.substances, reference)

    def pinned_version_note(self, reference: str) -> str | None:
        """For a reference pinned to a version (`Medication/m1/_history/1`) that the input set
        does not hold while it holds another: which version was read instead."""
        pinned = _pinned_version(reference)
        if pinned is None:
            return None
        relative, version = pinned
        if version in self.versions.get(relative, {}):
            return None
        held = self.medications if relative.startswith("Medication/") else self.substances
        used = held.get(relative)
        if used is None:
            return None
        return _version_read_instead(relative, version, used)

    def pinned_order_note(self, reference: str) -> str | None:
        """For a reference pinned to a version of a MedicationRequest
        (`MedicationRequest/r1/_history/1`) that is not the newest the input set holds: that the
        order is read as its newest version (its patient, status and end: a later version may
        have stopped it or moved it to another patient), and which version that is."""
        pinned = _pinned_version(reference)
        if pinned is None or not pinned[0].startswith("MedicationRequest/"):
            return None
        relative, version = pinned
        used = self.orders.get(relative)
        if used is None or version_id(used.resource) == version:
            return None
        if version in self.versions.get(relative, {}):
            return (
                f"{reference} names version {version}: the order is read as version "
                f"{version_id(used.resource)}, the newest the input set holds (its patient, "
                "status and end)"
            )
        return f"{reference}: {_version_read_instead(relative, version, used.resource)}"

    def undisputed(self, reference: str) -> None:
        """An error when `reference` names the fullUrl of an entry whose resource has another
        id: which record it names cannot be told."""
        for key in (reference_key(reference.strip()), located(reference, self.base)):
            if key is not None and key in self.disputed:
                raise Unmappable(
                    Problem.UNRESOLVED_REFERENCE, f"{reference} names {self.disputed[key]}"
                )

    def _definition(self, held: Mapping[str, Json], reference: str) -> Json | None:
        self.undisputed(reference)
        on_server = located(reference, self.base)
        pinned = _pinned_version(reference)
        if pinned is not None:
            named, version = pinned
            if on_server is not None and on_server in held:
                named = on_server
            exact = self.versions.get(named, {}).get(version)
            if exact is not None and self._decided(named) in held:
                return exact
        if on_server is not None and on_server in held:
            return held[on_server]
        found = held.get(self._decided(reference_key(reference)))
        relative = relative_reference(reference)
        if found is None and relative is not None:
            found = held.get(self._decided(relative))
        return found

    def order(self, reference: str) -> SourcedResource | None:
        """The MedicationRequest a reference names, None if the input set does not hold it."""
        self.undisputed(reference)
        on_server = located(reference, self.base)
        if on_server is not None and on_server in self.orders:
            return self.orders[on_server]
        return self.orders.get(self._decided(reference_key(reference)))

    def on_one_server(self, relative: str) -> str:
        """`relative` (`Patient/1`), or an error when the input set holds or names it on two
        servers: ids are unique per server only, so their records would become one."""
        servers = self.across_servers.get(relative)
        if servers is not None:
            raise Unmappable(
                Problem.UNRESOLVED_REFERENCE,
                f"{relative} is in the input set from {len(servers)} servers "
                f"({', '.join(servers)}): ids are unique per server only, so which one is meant "
                "cannot be told, and their records would be merged",
            )
        return relative

    def _decided(self, key: str) -> str:
        if relative_reference(key) == key:
            self.on_one_server(key)
        why = self.undecided.get(key)
        if why is not None:
            raise Unmappable(Problem.UNRESOLVED_REFERENCE, f"{key} is given by {why}")
        return key


def _version_read_instead(relative: str, version: str, used: Json) -> str:
    """That the version a reference is pinned to is not in the input set, and what was read."""
    read = version_id(used)
    if read is None:
        return (
            f"the input set holds {relative} without a meta.versionId, so whether it is "
            f"version {version} cannot be told: it was read"
        )
    return (
        f"version {version} is not in the input set: version {read}, the newest it holds, "
        "was read instead"
    )


_DEFINITION_TYPES: Final = frozenset({"Medication", "Substance"})
_VERSIONED_TYPES: Final = _DEFINITION_TYPES | {"MedicationRequest"}
"""The resource types a reference may name a version of (`.../_history/<versionId>`)."""
_SERVER_TYPES: Final = CLAIM_TYPES | _DEFINITION_TYPES


def _disputed_keys(item: SourcedResource) -> dict[str, str]:
    """The keys a reference to the entry of a resource whose id its entry contradicts would
    name it by, and why they name no resource."""
    if item.full_url is None:
        return {}
    why = (
        f"the Bundle entry of fullUrl {item.full_url!r}, which holds "
        f"{item.resource_type}/{item.resource.get('id')}: which record is meant cannot be told"
    )
    keys = (reference_key(item.full_url.strip()), located(item.full_url, None))
    return {key: why for key in keys if key is not None}


def _server_keys(item: SourcedResource) -> list[tuple[str, str]]:
    """(`Type/<id>`, server base) of the resource, when its server is known, and of the patient
    a claim names, when the reference says on which server."""
    found: list[tuple[str, str]] = []
    if item.resource_type in _SERVER_TYPES and item.server_base and item.identity:
        found.append((f"{item.resource_type}/{item.identity}", item.server_base))
    if item.resource_type not in CLAIM_TYPES:
        return found
    for field_name in ("patient", "subject"):
        holder = item.resource.get(field_name)
        reference = holder.get("reference") if isinstance(holder, Mapping) else None
        relative = relative_reference(reference) if isinstance(reference, str) else None
        if isinstance(reference, str) and relative and relative.startswith("Patient/"):
            server = server_base_of(reference, item.server_base)
            found.extend([] if server is None else [(relative, server)])
    return found


def _pinned_version(reference: str) -> tuple[str, str] | None:
    """`Type/id` and the version a reference pinned to one (`.../Type/id/_history/<v>`) names."""
    base, marker, version = reference.partition("/_history/")
    version = version.strip("/")
    relative = relative_reference(base)
    if not marker or not version or "/" in version or relative is None:
        return None
    return relative, version


_TIED: Final = (
    "two different resources, neither a newer version of the other (the same "
    "meta.lastUpdated, and no numeric meta.versionId that orders them): which one is meant "
    "cannot be told"
)
_CLASHED: Final = (
    "two different resources under one meta.versionId ({version!r}): a server gives each "
    "change of a resource a new versionId, so they are not versions of one record (records of "
    "two sources under one id?), and which one is meant cannot be told"
)


def _keep_newest(
    held: dict[str, SourcedResource],
    keys: Sequence[str],
    item: SourcedResource,
    ranks: dict[str, VersionRank],
    ties: dict[str, VersionRank],
) -> None:
    """Index `item` under `keys` where it is the newest version seen (a history Bundle lists
    the newest first, a second file may hold an older copy); two different resources that
    rank alike are a tie at that rank, which leaves their key undecided unless a newer version
    comes (in any order)."""
    rank = version_rank(item.resource)
    for key in keys:
        other, other_rank = held.get(key), ranks.get(key)
        if other is None or other_rank is None or other_rank < rank:
            held[key], ranks[key] = item, rank
        elif other_rank == rank and other.resource != item.resource:
            ties[key] = rank


@dataclass(frozen=True)
class Source:
    """The resource being mapped, its id, and the caller's context."""

    resource: Json
    resource_id: str
    context: ImportContext
    document_time: datetime | None = None
    """The time of the Bundle the resource came in (`inputs.bundle_time`), if any."""
    passed_over: list[str] = field(default_factory=list, compare=False)
    """Why each optional part that could not be read was left out (see `optional_part`)."""
    concepts: list[NamedConcept] = field(default_factory=list, compare=False)
    """The concepts that name the record's drug or allergen, as read."""

    @property
    def resource_type(self) -> str:
        return str(self.resource["resourceType"])

    @property
    def last_resort_time(self) -> datetime:
        """The time of a resource that gives none of its own: its Bundle's, else the caller's
        fallback (so a document imported twice gives its undated resources the same time)."""
        return self.document_time or self.context.fallback_time

    @property
    def made_at(self) -> datetime:
        """When the record itself was made: the later of its `meta.lastUpdated` and
        `last_resort_time`. A date it gives after that (a year typed wrong, an onset planned by
        mistake) cannot be when it was written or recorded."""
        updated = time_at(self.resource, "meta", "lastUpdated")
        return self.last_resort_time if updated is None else max(updated, self.last_resort_time)

    @property
    def last_resort_mark(self) -> str:
        """What `last_resort_time` was taken from, for the version part of the event ids."""
        if self.document_time is not None:
            return f"document={self.document_time.isoformat()}"
        return f"fallback={self.context.fallback_time.isoformat()}"


T = TypeVar("T")


def optional_part(source: Source, read: Callable[[], T], default: T) -> T:
    """What `read` gives from an optional part of the record, or `default` when that part
    cannot be read: the record is imported without it and the reason is kept for the importer
    to report. A criticality "severe", a category "drug", a note or dosage sent as an object
    never costs the allergy or the order it belongs to."""
    try:
        return read()
    except Unmappable as error:
        source.passed_over.append(f"{error.message} (imported without it)")
        return default


def optional_items(source: Source, holder: Json, key: str, at: str = "") -> list[tuple[str, Json]]:
    """The objects of the optional list `key` of `holder` (whose path is `at`), each with its
    path (`reaction[1]`): an item that is no object is left out and reported, so that one
    null item does not cost the others (the anaphylaxis after it); a value that is no list is
    left out whole."""
    values = holder.get(key)
    path = f"{at}.{key}" if at else key
    if values is None:
        return []
    if not isinstance(values, list):
        source.passed_over.append(f"{path} is not a list of objects (imported without it)")
        return []
    items = []
    for position, value in enumerate(values):
        if isinstance(value, Mapping):
            items.append((f"{key}[{position}]", value))
        else:
            source.passed_over.append(f"{path}[{position}] is not an object (imported without it)")
    return items


@dataclass(frozen=True)
class Timing:
    occurred_at: datetime
    recorded_at: datetime
    version: str


Mapper = Callable[[Source, Index], list[Event]]


def new_event(
    source: Source,
    subject_id: str,
    timing: Timing,
    payload: Payload,
    kind: str,
    *,
    valid_until: datetime | None = None,
) -> Event:
    context = source.context
    sensitive = not isinstance(payload, FactAsserted)
    return Event(
        event_id=fhir_event_id(
            context.tenant_id, source.resource_type, source.resource_id, timing.version, kind
        ),
        tenant_id=context.tenant_id,
        subject_id=subject_id,
        actor=context.actor,
        type=EventType(type(payload).__name__),
        occurred_at=timing.occurred_at,
        recorded_at=timing.recorded_at,
        origin=Origin.IMPORTED,
        source_ref=f"{source.resource_type}/{source.resource_id}",
        confidence=1.0,
        sensitivity=Sensitivity.SPECIAL_CATEGORY if sensitive else Sensitivity.NORMAL,
        purpose="care",
        scope="subject",
        valid_until=valid_until,
        payload=payload,
    )


FHIR_ID: Final = re.compile(r"[A-Za-z0-9\-.]{1,64}")
"""The shape of a FHIR id (R4 `id`): letters, digits, `-` and `.`, 1 to 64 of them."""
_UNSAFE_IN_SUBJECT: Final = re.compile(r"[%:\s]")
_FHIR_TYPE_NAME: Final = re.compile(r"[A-Z][A-Za-z]+")
"""The shape of a FHIR resource type name (Patient, Group): a reference whose type segment is
not one (`.../pasient/123`) is an error, not a subject of another type to skip."""


def _prior_key(request: Json) -> str | None:
    """The key of the order a MedicationRequest's `priorPrescription` names, as written (an
    unreadable one names none here; the request's own import reports it)."""
    prior = request.get("priorPrescription")
    reference = prior.get("reference") if isinstance(prior, Mapping) else None
    if not isinstance(reference, str):
        return None
    if reference.lower().startswith("urn:uuid:"):
        return reference_key(reference)
    return relative_reference(reference)


def _values_by_patient(
    identifiers: Mapping[tuple[str, str], str | None],
) -> dict[tuple[str, str], tuple[str, ...]]:
    found: dict[tuple[str, str], list[str]] = {}
    for (system, value), patient_id in identifiers.items():
        if patient_id is not None:
            found.setdefault((patient_id, system), []).append(value)
    return {key: tuple(sorted(values)) for key, values in found.items()}


def _identifier_keys(patient: Json) -> list[tuple[str, str]]:
    identifiers = patient.get("identifier")
    if not isinstance(identifiers, list):
        return []
    return [
        (item["system"], item["value"])
        for item in identifiers
        if isinstance(item, Mapping)
        and isinstance(item.get("system"), str)
        and isinstance(item.get("value"), str)
    ]


def subject_of(resource: Json, field_name: str, index: Index) -> str:
    """The subject id of the patient `field_name` (a Reference) names; a DSTU2 record of a drug
    taken, given or dispensed names it in `patient` (R4's `subject`), and is read by it."""
    if (
        field_name == "subject"
        and resource.get("subject") is None
        and resource.get("patient") is not None
        and text_among(resource.get("resourceType"), _DSTU2_PATIENT_FIELD)
    ):
        field_name = "patient"
    other = _OTHER_PATIENT_FIELD.get(field_name)
    if resource.get(field_name) is None and other is not None and other in resource:
        raise Unmappable(
            Problem.MISSING_FIELD,
            f"(given as {other}, which {resource.get('resourceType')} does not have)",
            field=field_name,
        )
    return within(field_name, lambda: _subject_of(resource, field_name, index))


_SUBJECT_TYPES: Final = frozenset({"Patient", "Group"})
"""What the `subject` of a medication record may name in R4: a Group is skipped (no one
person), any other type is an error (a Practitioner is no subject: the order is not guessed to
be for a patient)."""
_OTHER_PATIENT_FIELD: Final = {"patient": "subject", "subject": "patient"}
_DSTU2_PATIENT_FIELD: Final = frozenset(
    {"MedicationStatement", "MedicationAdministration", "MedicationDispense"}
)
"""The resource types whose DSTU2 form names the patient in `patient`, where R4 says
`subject`: it names the patient all the same (it was an error, and the drug never checked)."""
"""Where a resource names its patient, and where another resource type does instead (an
AllergyIntolerance in `patient`, a MedicationRequest in `subject`)."""


def _subject_of(resource: Json, field_name: str, index: Index) -> str:
    holder = required_object(resource, field_name)
    reference = string_at(holder, "reference")
    if reference is None:
        return _subject_by_identifier(holder, field_name, index)
    if reference.startswith("urn:"):
        return _patient_subject(_patient_entry(reference, field_name, index), index)
    index.undisputed(reference)
    if reference.startswith("#"):
        raise Unmappable(Problem.UNRESOLVED_REFERENCE, "a contained patient is not supported")
    if "#" in reference:
        container = reference.split("#", 1)[0]
        raise Unmappable(
            Problem.UNRESOLVED_REFERENCE,
            f"{field_name}.reference {reference!r} names a resource contained in {container}, "
            f"not {container} itself: which patient is meant is not guessed",
        )
    if "?" in reference:
        return _subject_by_condition(reference, field_name, index)
    relative = relative_reference(reference)
    if relative is None:
        raise Unmappable(
            Problem.INVALID_VALUE,
            f"{field_name}.reference {reference!r} is not a reference to a patient (write it "
            "Patient/<id>, a URL ending in Patient/<id>, or a urn:uuid: of the Bundle)",
        )
    resource_type, identifier = relative.split("/")
    if not _FHIR_TYPE_NAME.fullmatch(resource_type):
        raise Unmappable(
            Problem.INVALID_VALUE,
            f"{field_name}.reference {reference!r} names no FHIR resource type (Patient/<id>)",
        )
    if resource_type != "Patient" and field_name == "patient":
        raise Unmappable(
            Problem.INVALID_VALUE,
            f"patient.reference {reference!r} is not a Patient (the element is Reference(Patient))",
        )
    if field_name == "subject" and resource_type not in _SUBJECT_TYPES:
        raise Unmappable(
            Problem.INVALID_VALUE,
            f"subject.reference {reference!r} is not a Patient (the element is "
            "Reference(Patient | Group))",
        )
    if resource_type != "Patient":
        raise NotForAPatient(f"the subject is a {resource_type}, not a Patient")
    if not FHIR_ID.fullmatch(identifier.strip()):
        raise Unmappable(
            Problem.INVALID_VALUE,
            f"{field_name}.reference {quoted(reference)} names no valid Patient id ({ID_RULE})",
        )
    return _patient_subject(identifier, index)


def _patient_entry(reference: str, field_name: str, index: Index) -> str:
    """The id of the Patient whose Bundle entry's fullUrl a `urn:uuid:` (or `urn:oid:`)
    reference is: such a urn names nothing but an entry of the input set (FHIR R4 Bundle
    reference resolution), so one that matches no Patient entry names no patient, never a
    patient of that id."""
    patient_id = index.patients.get(reference_key(reference))
    if patient_id is None:
        raise Unmappable(
            Problem.UNRESOLVED_REFERENCE,
            f"{field_name}.reference {quoted(reference)} is the fullUrl of no Patient entry of "
            "the input set: a urn names only the Bundle entry it is the fullUrl of, so which "
            "patient is meant cannot be told (import the Patient's entry with it, or name the "
            "patient as Patient/<id>)",
        )
    return patient_id


ID_RULE: Final = "a FHIR id is 1 to 64 letters, digits, '-' or '.'"
_QUOTED_LENGTH: Final = 100


def quoted(text: str) -> str:
    """`text` as an error message quotes it, cut after `_QUOTED_LENGTH` characters (an id of
    thousands of characters is named, not repeated)."""
    if len(text) <= _QUOTED_LENGTH:
        return repr(text)
    return f"{text[:_QUOTED_LENGTH]!r}... ({len(text)} characters)"


def _subject_by_condition(reference: str, field_name: str, index: Index) -> str:
    """The Patient of the input set that a transaction's conditional reference names
    (`Patient?identifier=system|value`, R4 transaction processing)."""
    resource_type, query = reference.split("?", 1)
    values = parse_qs(query).get("identifier", [])
    if resource_type != "Patient" or len(values) != 1 or set(parse_qs(query)) != {"identifier"}:
        raise Unmappable(
            Problem.UNRESOLVED_REFERENCE,
            f"{field_name}.reference {reference!r} is a conditional reference: only "
            "Patient?identifier=system|value is resolved",
        )
    system, _, value = values[0].strip().rpartition("|")
    return _patient_carrying((system, value), field_name, index)


def _subject_by_identifier(holder: Json, field_name: str, index: Index) -> str:
    """The Patient of the input set that a logical reference (by identifier) names."""
    identifier = holder.get("identifier")
    if not isinstance(identifier, Mapping):
        raise Unmappable(Problem.MISSING_FIELD, f"{field_name}.reference")
    system = string_at(identifier, "system", at="identifier")
    value = string_at(identifier, "value", at="identifier")
    return _patient_carrying((system or "", value or ""), field_name, index)


def _patient_carrying(key: tuple[str, str], field_name: str, index: Index) -> str:
    """The id of the one Patient of the input set that carries the identifier `key`."""
    if key not in index.patient_identifiers:
        raise Unmappable(
            Problem.UNRESOLVED_REFERENCE,
            f"{field_name} names the patient only by identifier {key[0]}|{key[1]}, which no "
            "Patient of the input set carries: send Patient/<id> or the Patient with it",
        )
    patient_id = index.patient_identifiers[key]
    if patient_id is None:
        raise Unmappable(
            Problem.UNRESOLVED_REFERENCE,
            f"{field_name} identifier {key[0]}|{key[1]} is carried by more than one Patient",
        )
    return _patient_subject(patient_id, index)


def _patient_subject(patient_id: str, index: Index) -> str:
    """The subject id of a Patient id that names one patient of the input set: a Patient id
    the set holds or names on two servers is two patients, never one subject; a patient
    replaced at the source is the patient replacing it (`Index.current_patient`)."""
    index.on_one_server(f"Patient/{patient_id}")
    return index.current_patient(subject_id_of(patient_id))


def subject_id_of(identifier: str) -> str:
    """The subject id of a Patient id: what a subject id cannot hold (`:` and white space, a
    FHIR id cannot either, but a conditional `system|value` identity does) percent-encoded,
    `%` too, so that two different ids never become one subject."""
    subject = _UNSAFE_IN_SUBJECT.sub(_percent_encoded, identifier.strip())
    if not subject:
        raise Unmappable(Problem.INVALID_VALUE, "the patient id is empty")
    return subject


def _percent_encoded(found: re.Match[str]) -> str:
    return "".join(f"%{byte:02X}" for byte in found.group().encode())


def timing_of(source: Source, candidates: Sequence[datetime | None]) -> Timing:
    """occurred_at from the first present candidate, then meta.lastUpdated, then the time of
    last resort (the Bundle's, else the fallback); recorded_at from meta.lastUpdated, else the
    time of the Bundle it came in (a message or transaction says when it was sent; that time
    is then part of the version, as for undated resources), else occurred_at, placed
    `version_offset` after it so that of two versions recorded at one time (or without a time
    of their own) the later version is the newer knowledge."""
    resource = source.resource
    last_updated = time_at(resource, "meta", "lastUpdated")
    found = next((time for time in (*candidates, last_updated) if time is not None), None)
    version_id = string_at(object_at(resource, "meta"), "versionId", at="meta")
    version = version_id or _raw_last_updated(resource)
    offset = version_offset(version_id)
    if found is None:
        when = source.last_resort_time
        recorded = (last_updated or when) + offset
        return Timing(when, recorded, f"{version}|{source.last_resort_mark}")
    if last_updated is None and source.document_time is not None:
        recorded, version = source.document_time, f"{version}|{source.last_resort_mark}"
        return Timing(found, recorded + offset, version)
    return Timing(found, (last_updated or found) + offset, version)


def recorded_time(item: SourcedResource, context: ImportContext) -> datetime | None:
    """When a version of a resource was recorded, as its events would be (meta.lastUpdated, else
    the Bundle's time, else the fallback, placed by a numeric versionId); None when its meta
    cannot be read."""
    source = Source(item.resource, item.identity or "", context, item.document_time)
    try:
        return timing_of(source, ()).recorded_at
    except Unmappable:
        return None


def version_offset(version_id: str | None) -> timedelta:
    """How far after its recorded time a version is placed: its number in milliseconds (at most
    VERSION_SLOTS), for a numeric `meta.versionId` (FHIR servers number versions 1, 2, ...);
    none for any other."""
    return version_slot(version_id) * JUST_AFTER


def _raw_last_updated(resource: Json) -> str:
    return string_at(object_at(resource, "meta"), "lastUpdated", at="meta") or ""


def patient_identity_notes(resource: Json, index: Index) -> list[str]:
    """A line for each patient reference (`patient`, `subject`) whose `reference` and
    `identifier` name different patients of the input set: the reference is followed (FHIR
    prefers the literal reference), but one of the two is wrong, and a record filed under the
    wrong patient was filed without a word."""
    notes = []
    for field_name in _OTHER_PATIENT_FIELD:
        holder = resource.get(field_name)
        if not isinstance(holder, Mapping):
            continue
        reference, identifier = holder.get("reference"), holder.get("identifier")
        if not isinstance(reference, str) or not isinstance(identifier, Mapping):
            continue
        system, value = identifier.get("system"), identifier.get("value")
        named = _patient_id_named(reference, index)
        if not isinstance(system, str) or not isinstance(value, str) or named is None:
            continue
        carrier = index.patient_identifiers.get((system, value))
        own = index.identifiers_of.get((named, system), ())
        if carrier is not None and carrier != named:
            why = f"Patient/{carrier} carries it"
        elif carrier is None and (system, value) not in index.patient_identifiers and own:
            why = f"Patient/{named} carries {system}|{', '.join(own)}"
        else:
            continue
        notes.append(
            f"{field_name}.reference {quoted(reference)} names Patient/{named}, but its "
            f"identifier {system}|{value} names another patient ({why}): the record is filed "
            f"under Patient/{named}, as the reference says; check at the source which patient "
            "is meant"
        )
    return notes


def _patient_id_named(reference: str, index: Index) -> str | None:
    """The Patient id a literal reference names (a `urn:` through its Bundle entry), if any."""
    if reference.startswith("urn:"):
        return index.patients.get(reference_key(reference))
    relative = relative_reference(reference)
    if relative is None or not relative.startswith("Patient/"):
        return None
    return relative.split("/", 1)[1]
