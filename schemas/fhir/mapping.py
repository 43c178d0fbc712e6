"""FHIR R4 JSON resources -> UaC events. Pure: no I/O, no clock, no randomness.

Input is JSON text (a Bundle of any type, a single resource, or bulk-export NDJSON lines),
parsed into `SourcedResource`s that remember where they came from (`file.ndjson:12`,
`bundle.json#entry[3]`). `import_fhir` maps them all at once, so a `Medication/x` reference is
resolved against every resource of the input set, whichever file it came in. Every resource ends
in exactly one place: events, an explained skip, or an error.

Mapping decisions
-----------------
Identity: a resource's `id`; a resource without one (a new resource in a document or
transaction Bundle) is identified by its entry's fullUrl: the uuid of `urn:uuid:<uuid>`, the oid
of `urn:oid:<oid>`, or `<id>` of a URL ending in `<resourceType>/<id>`. With neither, the
resource is an error (no stable event id is possible).

Envelope: `origin=imported`, `source_ref=ResourceType/id`, `confidence=1.0`, `purpose=care`,
`scope=subject`, tenant and actor from the caller; allergies and medications are
`special_category`, the home-country fact is `normal`. `subject_id` is the FHIR Patient id (from
`Patient/<id>`, an absolute `.../Patient/<id>[/_history/n]` URL, or a `urn:uuid:` matched to a
Patient entry's `fullUrl`, else the uuid itself), with `:` and white space replaced by `-`.

Times: `occurred_at` is the first present of
  - AllergyIntolerance: recordedDate, onsetDateTime, onsetPeriod.start, meta.lastUpdated; for
    a record that no longer holds (refuted, entered-in-error, inactive, resolved) meta.lastUpdated
    comes first, because recordedDate is when the allergy was first recorded, not when it was
    refuted (so a refuting re-import resolves alerts at the time of the refutation)
  - MedicationRequest: authoredOn, meta.lastUpdated
  - MedicationStatement: effectiveDateTime, effectivePeriod.start, dateAsserted, meta.lastUpdated
  - Patient (home country): the address's period.start, meta.lastUpdated
and the caller's `fallback_time` when none is present (a clock is never read). `recorded_at` is
meta.lastUpdated, else `occurred_at`. A FHIR date without a time (`2015-01-15`, `2015-01`,
`2015`) is midnight UTC of its first day. A time without a zone is invalid FHIR and an error.

Event ids: uuid5 of (tenant, resource type, resource id, resource version, event kind), where the
version is meta.versionId, else meta.lastUpdated, else empty. The same input always gives the
same ids (the gate drops the repeats); an updated resource (new version) gives new events that
the fold orders after the old ones. When `fallback_time` was used it is part of the version, so
two imports with different fallbacks do not reuse one id for two different events.

AllergyIntolerance -> AllergyRecorded: id, substance (code.text, else the first coding
display, else its code), codes, type, categories, criticality, clinicalStatus, notes, reactions
(the manifestations of one reaction joined with "; ", its severity). verificationStatus
`presumed` (R5) counts as unconfirmed, and an absent verificationStatus is `unconfirmed`, never
`confirmed`: the allergy stays active and alerts, but nothing is claimed that the source did not
say. "No known allergy" records (SNOMED 716186003 and 160244002 NKA, 409137002 NKDA, 429625007
NKFA, 428607008 no known environmental allergy, 716184000 no known latex allergy, the IPS
absent-unknown codes, or a text-only code such as "NKDA") become `negated=True` with the
categories the statement covers, so they never become an allergy, whatever their verification
status. IPS `no-allergy-info` is skipped: "unknown" is neither an allergy nor a negation.

MedicationRequest -> MedicationPrescribed: id, drug text (the Medication's code.text, else its
first coding display, else its ingredient names, else the reference's display), codes, dose
text (dosageInstruction[0].text), route and notes. The Medication is `medicationCodeableConcept`,
a contained `#id`, or a `Medication/id` / `fullUrl` found anywhere in the input set; a missing
one is an error. Intents order, original-order, reflex-order, filler-order, instance-order and
plan are prescriptions; proposal and option are skipped (a suggestion is not a prescription), as
are `draft` requests and `doNotPerform` ones (an instruction NOT to give the drug). Statuses
stopped, completed, cancelled and entered-in-error also yield a MedicationStopped (reason = the
status, plus statusReason text), dated at the end of therapy (latest dosage boundsPeriod.end),
else the dispense validityPeriod.end, capped at meta.lastUpdated, or without it at the fallback
time (the terminal status was known by then), else meta.lastUpdated; a candidate counts only
when it is after the order. With none,
the stop time is unknown and the stop is placed 1 ms after the order: the order is checked once
(its alerts are raised and then resolved), and it does not stay active for ever. An
entered-in-error request yields the MedicationStopped only: it never was a prescription, so it
raises no alert, and it ends an earlier version of the same request (same id) if one was
imported.

MedicationStatement -> MedicationPrescribed: the patient takes (status active, intended,
on-hold, unknown) or took (completed, stopped) the drug, mapped like a request (medication,
dosage[0] text and route, notes). Its prescription id is the MedicationRequest it is `basedOn`
(so a statement about an imported order updates that order instead of duplicating it), else
`MedicationStatement/<id>`. `occurred_at`: effectiveDateTime, effectivePeriod.start,
dateAsserted, meta.lastUpdated. Completed and stopped statements also yield a MedicationStopped
at effectivePeriod.end (capped and defaulted as for requests); entered-in-error yields only
the stop; not-taken is skipped (the patient does not take the drug), and so is an IPS "no
known medications" or "no medication information" statement (absent-unknown code, or that
text without a code): it names no drug.

Drugs given. A record that names its order (a MedicationAdministration's `request`, a
MedicationDispense's `authorizingPrescription`) is news of that prescription, like a statement
`basedOn` it: a MedicationPrescribed with the order's id and the drug as given (a substitute
replaces the ordered drug), never a stop (one dose given or one fill dispensed does not end the
order; an entered-in-error record leaves the order alone and is skipped). When the order is in
the input set (by `MedicationRequest/<id>` or its entry's `urn:uuid`) and its own import ends it
before the record, the record is skipped: it would restart the order with no end, and the order
was checked while it ran. A record that names no order is a course of its own,
`<ResourceType>/<id>`:
  - Immunization (vaccineCode, dose from doseQuantity, route; `occurred_at` occurrenceDateTime,
    recorded, meta.lastUpdated; subject `patient`): completed is a single dose, a prescription
    and its stop 1 ms later (checked once: alerts raised, then resolved); entered-in-error only
    the stop; not-done and IPS absent-unknown codes are skipped.
  - MedicationAdministration (dosage text, else its dose quantity, and route; `occurred_at`
    effectiveDateTime, effectivePeriod.start): completed, stopped and unknown end at
    effectivePeriod.end (capped and defaulted as for requests), or 1 ms after an
    effectiveDateTime (one dose); in-progress and on-hold do not stop (an infusion running);
    entered-in-error only the stop; not-done is skipped.
  - MedicationDispense (dosageInstruction; `occurred_at` whenHandedOver, whenPrepared): checked
    once, stopped 1 ms after (which course a fill belongs to is unknown, and counting each
    fill as a course of its own would make every early refill a duplicate therapy);
    entered-in-error only the stop. Cancelled and declined dispenses are skipped.

Patient -> FactAsserted(home_country, ISO 3166-1 alpha-2) from the first `home` address, else
the first address: any ISO alpha-2 code, and a small table of alpha-3 codes and English names;
anything else is skipped with the value in the reason, never guessed.

Medication -> no event of its own (it only resolves references); every other resource type is
skipped as unsupported. Missing required fields, malformed JSON and unresolved references are
errors with their origin.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from enum import StrEnum
from typing import Any, Final, TypeVar
from uuid import NAMESPACE_URL, uuid5

from pydantic import ValidationError

from schemas.errors import MalformedJson
from schemas.events import (
    AllergyCategory,
    AllergyRecorded,
    AllergyType,
    ClinicalStatus,
    Coding,
    Criticality,
    Event,
    EventType,
    FactAsserted,
    MedicationPrescribed,
    MedicationStopped,
    Origin,
    Payload,
    Reaction,
    ReactionSeverity,
    Sensitivity,
    VerificationStatus,
)
from schemas.json_lines import NotUtf8, strict_json, validation_summary

Json = Mapping[str, Any]
E = TypeVar("E")

FHIR_IMPORT_NAMESPACE: Final = uuid5(NAMESPACE_URL, "https://uac.example/fhir-import")
HOME_COUNTRY: Final = "home_country"
JUST_AFTER: Final = timedelta(milliseconds=1)
"""Where a stop with no known time is placed: right after the order it ends."""

SNOMED: Final = "http://snomed.info/sct"
IPS_ABSENT_UNKNOWN: Final = "http://hl7.org/fhir/uv/ips/CodeSystem/absent-unknown-uv-ips"
_SYSTEM_ALIASES: Final = {
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


@dataclass(frozen=True)
class ImportContext:
    """What the caller decides: who imports for which tenant, and the time of last resort."""

    tenant_id: str
    actor: str
    fallback_time: datetime

    def __post_init__(self) -> None:
        if self.fallback_time.tzinfo is None:
            raise ValueError("fallback_time must be timezone-aware")


@dataclass(frozen=True)
class SourcedResource:
    """One FHIR resource and where it came from; `full_url` is its Bundle entry's fullUrl."""

    origin: str
    resource: Json
    full_url: str | None = None

    @property
    def resource_type(self) -> str:
        return str(self.resource["resourceType"])

    @property
    def identity(self) -> str | None:
        """The resource's id; without one, the id its Bundle entry's fullUrl gives it (the
        uuid of `urn:uuid:<uuid>`, the oid of `urn:oid:<oid>`, or `<id>` of a URL ending in
        `<resourceType>/<id>`), as document and transaction Bundles identify new resources."""
        identifier = self.resource.get("id")
        if isinstance(identifier, str) and identifier.strip():
            return identifier
        return _id_in_full_url(self.full_url, self.resource_type)


def _id_in_full_url(full_url: str | None, resource_type: str) -> str | None:
    if full_url is None:
        return None
    for prefix in ("urn:uuid:", "urn:oid:"):
        if full_url.startswith(prefix):
            return full_url.removeprefix(prefix).strip() or None
    relative = _relative(full_url)
    if relative is None or relative.split("/")[0] != resource_type:
        return None
    return relative.split("/")[1]


@dataclass(frozen=True)
class Skipped:
    """A well-formed input that deliberately yields no event, and why."""

    origin: str
    resource_type: str
    resource_id: str | None
    reason: str


@dataclass(frozen=True)
class FhirError:
    """An input that should have been mapped but could not be (same fields as a line error)."""

    origin: str
    reason: str
    message: str


@dataclass(frozen=True)
class ParsedInput:
    """Resources read from one or more JSON documents, with what reading already rejected."""

    resources: tuple[SourcedResource, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    errors: tuple[FhirError, ...] = ()


def combine(parts: Iterable[ParsedInput]) -> ParsedInput:
    collected = list(parts)
    return ParsedInput(
        resources=tuple(r for part in collected for r in part.resources),
        skipped=tuple(s for part in collected for s in part.skipped),
        errors=tuple(e for part in collected for e in part.errors),
    )


@dataclass(frozen=True)
class FhirImport:
    """Every input accounted for: `(origin, event)` pairs, explained skips and errors."""

    events: list[tuple[str, Event]] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    errors: list[FhirError] = field(default_factory=list)

    def skip_counts(self) -> dict[str, int]:
        """How many inputs were skipped for each reason, most frequent first."""
        return dict(Counter(skip.reason for skip in self.skipped).most_common())


class _Unmappable(Exception):
    def __init__(self, problem: Problem, message: str) -> None:
        super().__init__(message)
        self.problem = problem
        self.message = message


class _Unsupported(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# Reading JSON documents


def parse_json_document(text: str, source: str) -> ParsedInput:
    """The resources of one JSON document (a Bundle is unpacked, nested Bundles too)."""
    try:
        document = strict_json(text)
    except json.JSONDecodeError as error:
        message = f"not JSON: {error.msg} at line {error.lineno} column {error.colno}"
        return ParsedInput(errors=(FhirError(source, Problem.MALFORMED_JSON.value, message),))
    except MalformedJson as error:
        return ParsedInput(errors=(FhirError(source, Problem.MALFORMED_JSON.value, str(error)),))
    return unpack(document, source)


def parse_ndjson(lines: Iterable[str | NotUtf8], source: str) -> ParsedInput:
    """Bulk-export NDJSON: one resource per line, origins `source:<line number>`; a line that
    is not UTF-8 is an error of its own."""
    return combine(
        _parsed_line(line, f"{source}:{number}")
        for number, line in enumerate(lines, start=1)
        if isinstance(line, NotUtf8) or line.strip()
    )


def _parsed_line(line: str | NotUtf8, origin: str) -> ParsedInput:
    if isinstance(line, NotUtf8):
        return ParsedInput(errors=(FhirError(origin, Problem.MALFORMED_JSON.value, line.message),))
    return parse_json_document(line, origin)


def unpack(document: object, origin: str, full_url: str | None = None) -> ParsedInput:
    """One parsed JSON value as resources: a Bundle's entries, or the resource itself."""
    if not isinstance(document, Mapping) or not isinstance(document.get("resourceType"), str):
        message = "expected a FHIR resource: a JSON object with a resourceType"
        return ParsedInput(errors=(FhirError(origin, Problem.NOT_A_RESOURCE.value, message),))
    if document["resourceType"] == "Bundle":
        return _bundle_entries(document, origin)
    return ParsedInput(resources=(SourcedResource(origin, document, full_url),))


def _bundle_entries(bundle: Json, origin: str) -> ParsedInput:
    entries = bundle.get("entry", [])
    if not isinstance(entries, list):
        error = FhirError(origin, Problem.INVALID_VALUE.value, "Bundle.entry is not a list")
        return ParsedInput(errors=(error,))
    return combine(_bundle_entry(entry, f"{origin}#entry[{n}]") for n, entry in enumerate(entries))


def _bundle_entry(entry: object, origin: str) -> ParsedInput:
    if not isinstance(entry, Mapping):
        error = FhirError(origin, Problem.INVALID_VALUE.value, "a Bundle entry is not an object")
        return ParsedInput(errors=(error,))
    resource = entry.get("resource")
    if resource is None:
        reason = "bundle entry without a resource (request or response only)"
        return ParsedInput(skipped=(Skipped(origin, "Bundle.entry", None, reason),))
    full_url = entry.get("fullUrl")
    return unpack(resource, origin, full_url if isinstance(full_url, str) else None)


# Mapping


def import_fhir(parsed: ParsedInput, context: ImportContext) -> FhirImport:
    """Map every resource of the input set to events, skips or errors (in input order)."""
    index = _Index.of(parsed.resources)
    result = FhirImport(skipped=list(parsed.skipped), errors=list(parsed.errors))
    for item in parsed.resources:
        resource_type, resource_id = item.resource_type, item.identity
        label = f"{resource_type}/{resource_id}" if resource_id else resource_type
        try:
            events = _events_of(item, index, context)
        except _Unsupported as skip:
            result.skipped.append(Skipped(item.origin, resource_type, resource_id, skip.reason))
        except _Unmappable as error:
            message = f"{label}: {error.message}"
            result.errors.append(FhirError(item.origin, error.problem.value, message))
        except ValidationError as error:
            message = f"{label}: {validation_summary(error)}"
            result.errors.append(FhirError(item.origin, Problem.INVALID_RECORD.value, message))
        else:
            result.events.extend((item.origin, event) for event in events)
    return result


def fhir_event_id(
    tenant_id: str, resource_type: str, resource_id: str, version: str, kind: str
) -> str:
    """The deterministic event id of one event made from one version of one resource."""
    name = "/".join((tenant_id, resource_type, resource_id, version, kind))
    return str(uuid5(FHIR_IMPORT_NAMESPACE, name))


@dataclass(frozen=True)
class _Index:
    """What references resolve to across the whole input set."""

    medications: Mapping[str, Json]
    """`Medication/<id>` and entry fullUrls -> Medication resource."""
    patients: Mapping[str, str]
    """Entry fullUrl -> Patient id."""
    orders: Mapping[str, SourcedResource]
    """`MedicationRequest/<id>` and entry fullUrls -> MedicationRequest."""

    @classmethod
    def of(cls, resources: Iterable[SourcedResource]) -> _Index:
        medications: dict[str, Json] = {}
        patients: dict[str, str] = {}
        orders: dict[str, SourcedResource] = {}
        for item in resources:
            resource_type, identifier = item.resource_type, item.identity
            keys = [item.full_url, f"{resource_type}/{identifier}" if identifier else None]
            if resource_type == "Medication":
                medications.update((key, item.resource) for key in keys if key)
            if resource_type == "MedicationRequest":
                orders.update((key, item) for key in keys if key)
            if resource_type == "Patient" and item.full_url and identifier:
                patients[item.full_url] = identifier
        return cls(medications, patients, orders)


@dataclass(frozen=True)
class _Source:
    """The resource being mapped, its id, and the caller's context."""

    resource: Json
    resource_id: str
    context: ImportContext

    @property
    def resource_type(self) -> str:
        return str(self.resource["resourceType"])


@dataclass(frozen=True)
class _Timing:
    occurred_at: datetime
    recorded_at: datetime
    version: str


Mapper = Callable[[_Source, _Index], list[Event]]


def _events_of(item: SourcedResource, index: _Index, context: ImportContext) -> list[Event]:
    mapper = _MAPPERS.get(item.resource_type)
    if mapper is None:
        raise _Unsupported(f"unsupported resource type {item.resource_type}")
    if item.identity is None:
        raise _Unmappable(
            Problem.MISSING_FIELD,
            "id is missing (and no urn:uuid or resource URL fullUrl): no stable event id is possible",
        )
    return mapper(_Source(item.resource, item.identity, context), index)


def _event(source: _Source, subject_id: str, timing: _Timing, payload: Payload, kind: str) -> Event:
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
        payload=payload,
    )


# AllergyIntolerance

_ALL_CATEGORIES: Final = tuple(AllergyCategory)
_NEGATIONS: Final[dict[tuple[str, str], tuple[AllergyCategory, ...]]] = {
    (SNOMED, "716186003"): _ALL_CATEGORIES,
    (SNOMED, "160244002"): _ALL_CATEGORIES,
    (SNOMED, "409137002"): (AllergyCategory.MEDICATION,),
    (SNOMED, "429625007"): (AllergyCategory.FOOD,),
    (SNOMED, "428607008"): (AllergyCategory.ENVIRONMENT,),
    (SNOMED, "716184000"): (AllergyCategory.ENVIRONMENT,),
    (IPS_ABSENT_UNKNOWN, "no-known-allergies"): _ALL_CATEGORIES,
    (IPS_ABSENT_UNKNOWN, "no-known-medication-allergies"): (AllergyCategory.MEDICATION,),
    (IPS_ABSENT_UNKNOWN, "no-known-food-allergies"): (AllergyCategory.FOOD,),
    (IPS_ABSENT_UNKNOWN, "no-known-environmental-allergies"): (AllergyCategory.ENVIRONMENT,),
}
"""Codes that state the absence of allergies, and the categories each statement covers."""
_UNKNOWN_ALLERGY_STATUS: Final = frozenset({(IPS_ABSENT_UNKNOWN, "no-allergy-info")})
_NEGATION_TEXTS: Final[dict[str, tuple[AllergyCategory, ...]]] = {
    "nka": _ALL_CATEGORIES,
    "no known allergies": _ALL_CATEGORIES,
    "no known allergy": _ALL_CATEGORIES,
    "nkda": (AllergyCategory.MEDICATION,),
    "no known drug allergies": (AllergyCategory.MEDICATION,),
    "no known drug allergy": (AllergyCategory.MEDICATION,),
    "nkfa": (AllergyCategory.FOOD,),
    "no known food allergies": (AllergyCategory.FOOD,),
    "no known food allergy": (AllergyCategory.FOOD,),
    "nkla": (AllergyCategory.ENVIRONMENT,),
    "no known latex allergy": (AllergyCategory.ENVIRONMENT,),
}
"""Text-only negations (used only when the code has no codings at all)."""

_ALLERGY_TYPES: Final = {"allergy": AllergyType.ALLERGY, "intolerance": AllergyType.INTOLERANCE}
_CATEGORIES: Final = {category.value: category for category in AllergyCategory}
_CRITICALITIES: Final = {
    "low": Criticality.LOW,
    "high": Criticality.HIGH,
    "unable-to-assess": Criticality.UNABLE_TO_ASSESS,
}
_VERIFICATIONS: Final = {
    "unconfirmed": VerificationStatus.UNCONFIRMED,
    "presumed": VerificationStatus.UNCONFIRMED,
    "confirmed": VerificationStatus.CONFIRMED,
    "refuted": VerificationStatus.REFUTED,
    "entered-in-error": VerificationStatus.ENTERED_IN_ERROR,
}
_CLINICAL_STATUSES: Final = {status.value: status for status in ClinicalStatus}
_REACTION_SEVERITIES: Final = {severity.value: severity for severity in ReactionSeverity}


def _allergy_events(source: _Source, index: _Index) -> list[Event]:
    resource = source.resource
    subject_id = _subject_of(resource, "patient", index)
    code = _required_object(resource, "code")
    codes = _codings(code)
    if any((c.system, c.code) in _UNKNOWN_ALLERGY_STATUS for c in codes):
        raise _Unsupported("allergy status unknown (no information): neither allergy nor negation")
    negation = _negated_categories(code, codes)
    payload = AllergyRecorded(
        allergy_id=source.resource_id,
        substance=_concept_label(code, "code"),
        codes=codes,
        allergy_type=_lookup(_ALLERGY_TYPES, _string(resource, "type"), "type"),
        categories=negation if negation is not None else _allergy_categories(resource),
        criticality=_lookup(_CRITICALITIES, _string(resource, "criticality"), "criticality"),
        verification_status=_verification_status(resource),
        clinical_status=_lookup(
            _CLINICAL_STATUSES, _status_code(resource, "clinicalStatus"), "clinicalStatus"
        ),
        negated=negation is not None,
        reactions=tuple(_reaction(reaction) for reaction in _objects(resource, "reaction")),
        note=_notes(resource),
    )
    candidates: tuple[datetime | None, ...] = (
        _time_at(resource, "recordedDate"),
        _time_at(resource, "onsetDateTime"),
        _time_at(resource, "onsetPeriod", "start"),
    )
    if _no_longer_holds(payload):
        candidates = (_time_at(resource, "meta", "lastUpdated"), *candidates)
    timing = _timing(source, candidates)
    return [_event(source, subject_id, timing, payload, EventType.ALLERGY_RECORDED.value)]


def _no_longer_holds(allergy: AllergyRecorded) -> bool:
    """Refuted, entered in error, inactive or resolved: a status known as of the last update."""
    return allergy.verification_status in (
        VerificationStatus.REFUTED,
        VerificationStatus.ENTERED_IN_ERROR,
    ) or allergy.clinical_status in (ClinicalStatus.INACTIVE, ClinicalStatus.RESOLVED)


def _negated_categories(
    code: Json, codes: tuple[Coding, ...]
) -> tuple[AllergyCategory, ...] | None:
    """The categories a "no known allergy" statement covers; None for a real substance."""
    for coding in codes:
        system = _SYSTEM_ALIASES.get(coding.system, coding.system)
        categories = _NEGATIONS.get((system, coding.code))
        if categories is not None:
            return categories
    if codes or not isinstance(code.get("text"), str):
        return None
    return _NEGATION_TEXTS.get(" ".join(str(code["text"]).casefold().split()))


def _allergy_categories(resource: Json) -> tuple[AllergyCategory, ...]:
    values = resource.get("category", [])
    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        raise _Unmappable(Problem.INVALID_VALUE, "category is not a list of codes")
    return tuple(_required_lookup(_CATEGORIES, value, "category") for value in values)


def _verification_status(resource: Json) -> VerificationStatus:
    code = _status_code(resource, "verificationStatus")
    if code is None:
        return VerificationStatus.UNCONFIRMED
    return _required_lookup(_VERIFICATIONS, code, "verificationStatus")


def _reaction(reaction: Json) -> Reaction:
    names = [label for m in _objects(reaction, "manifestation") if (label := _concept_text(m))]
    manifestation = "; ".join(names) or _string(reaction, "description")
    return Reaction(
        manifestation=manifestation or "unspecified manifestation",
        severity=_lookup(_REACTION_SEVERITIES, _string(reaction, "severity"), "reaction.severity"),
    )


# MedicationRequest

_PRESCRIBING_INTENTS: Final = frozenset(
    {"order", "original-order", "reflex-order", "filler-order", "instance-order", "plan"}
)
_NOT_PRESCRIBING_INTENTS: Final = frozenset({"proposal", "option"})
_REQUEST_STATUSES: Final = frozenset(
    {
        "active",
        "on-hold",
        "cancelled",
        "completed",
        "entered-in-error",
        "stopped",
        "draft",
        "unknown",
    }
)
_IN_ERROR: Final = "entered-in-error"
_ENDED_STATUSES: Final = frozenset({"stopped", "completed", "cancelled", _IN_ERROR})


@dataclass(frozen=True)
class _Drug:
    text: str
    codes: tuple[Coding, ...]


def _medication_request_events(source: _Source, index: _Index) -> list[Event]:
    resource = source.resource
    status = _prescription_status(resource)
    course = _Course(
        prescription_id=source.resource_id,
        subject_id=_subject_of(resource, "subject", index),
        drug=_drug_of(resource, index),
        dosage=_dosage(_first(resource, "dosageInstruction")),
        starts=(_time_at(resource, "authoredOn"),),
        in_error=status == _IN_ERROR,
        stop=_stopped_by(source, _request_ends) if status in _ENDED_STATUSES else None,
        stop_reason=_stop_reason(resource, status),
    )
    return _course_events(source, course)


@dataclass(frozen=True)
class _Dosage:
    dose: str | None = None
    route: str | None = None


@dataclass(frozen=True)
class _Course:
    """What one FHIR record says about a course of a drug: which prescription, which drug, when
    it started, and whether (and when) it is over."""

    prescription_id: str
    subject_id: str
    drug: _Drug
    dosage: _Dosage
    starts: tuple[datetime | None, ...]
    """Candidates for when it started, first present wins (then meta.lastUpdated)."""
    in_error: bool = False
    """Entered in error: only the stop (it never was a prescription)."""
    stop: Callable[[datetime], datetime | None] | None = None
    """For a course that is over: when it stopped, given when it started (None: not yet)."""
    stop_reason: str | None = None


def _course_events(source: _Source, course: _Course) -> list[Event]:
    """The prescription (none when entered in error) and, for a course that is over, its stop."""
    payload = MedicationPrescribed(
        prescription_id=course.prescription_id,
        drug=course.drug.text,
        codes=course.drug.codes,
        dose=course.dosage.dose,
        route=course.dosage.route,
        note=_notes(source.resource),
    )
    timing = _timing(source, course.starts)
    kind = EventType.MEDICATION_PRESCRIBED.value
    events = [] if course.in_error else [_event(source, course.subject_id, timing, payload, kind)]
    stopped_at = course.stop(timing.occurred_at) if course.stop is not None else None
    if stopped_at is not None:
        stop_timing = _Timing(stopped_at, max(timing.recorded_at, stopped_at), timing.version)
        stop = MedicationStopped(prescription_id=course.prescription_id, reason=course.stop_reason)
        kind = EventType.MEDICATION_STOPPED.value
        events.append(_event(source, course.subject_id, stop_timing, stop, kind))
    return events


def _stopped_by(
    source: _Source, ends: Callable[[Json], Sequence[datetime | None]]
) -> Callable[[datetime], datetime]:
    """The stop of an ended course: the first of `ends` after its start (see `_stop_time`)."""

    def stopped_at(started: datetime) -> datetime:
        fallback = source.context.fallback_time
        return _stop_time(source.resource, started, fallback, ends(source.resource))

    return stopped_at


def _first(holder: Json, key: str) -> Json:
    return next(iter(_objects(holder, key)), {})


def _dosage(dosage: Json, dose: Json | None = None) -> _Dosage:
    """A Dosage's text (else the text of `dose`, a Quantity) and route."""
    route = dosage.get("route")
    return _Dosage(
        dose=_string(dosage, "text") or (_quantity_text(dose) if dose else None),
        route=_concept_text(route) if isinstance(route, Mapping) else None,
    )


def _quantity_text(quantity: Json) -> str | None:
    value, unit = quantity.get("value"), _string(quantity, "unit") or _string(quantity, "code")
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    return f"{value:g} {unit}" if unit else f"{value:g}"


def _prescription_status(resource: Json) -> str:
    """The request's status, or why this request is not a prescription."""
    status = _required_string(resource, "status")
    intent = _required_string(resource, "intent")
    if status not in _REQUEST_STATUSES:
        raise _Unmappable(Problem.INVALID_VALUE, f"status {status!r} is not a request status")
    if intent in _NOT_PRESCRIBING_INTENTS:
        raise _Unsupported(f"MedicationRequest intent {intent} is not a prescription")
    if intent not in _PRESCRIBING_INTENTS:
        raise _Unmappable(Problem.INVALID_VALUE, f"intent {intent!r} is not a request intent")
    if status == "draft":
        raise _Unsupported("MedicationRequest status draft is not yet a prescription")
    if resource.get("doNotPerform") is True:
        raise _Unsupported("MedicationRequest doNotPerform: an instruction not to give the drug")
    return status


def _drug_of(resource: Json, index: _Index) -> _Drug:
    concept = resource.get("medicationCodeableConcept")
    if concept is not None:
        concept = _as_object(concept, "medicationCodeableConcept")
        return _Drug(_concept_label(concept, "medicationCodeableConcept"), _codings(concept))
    reference = resource.get("medicationReference")
    if reference is None:
        raise _Unmappable(
            Problem.MISSING_FIELD, "medication[x] (medicationCodeableConcept or Reference)"
        )
    reference = _as_object(reference, "medicationReference")
    medication = _referenced_medication(resource, reference, index)
    display = _string(reference, "display")
    if medication is None:
        if display is None:
            raise _Unmappable(Problem.MISSING_FIELD, "medicationReference has no reference")
        return _Drug(display, ())
    return _drug_from_medication(medication, display)


def _referenced_medication(resource: Json, reference: Json, index: _Index) -> Json | None:
    target = _string(reference, "reference")
    if target is None:
        return None
    if target.startswith("#"):
        return _contained(resource, target[1:])
    found = index.medications.get(target) or index.medications.get(_relative(target) or "")
    if found is None:
        raise _Unmappable(
            Problem.UNRESOLVED_REFERENCE, f"{target} is not among the imported resources"
        )
    return found


def _contained(resource: Json, identifier: str) -> Json:
    for contained in _objects(resource, "contained"):
        if contained.get("resourceType") == "Medication" and contained.get("id") == identifier:
            return contained
    raise _Unmappable(Problem.UNRESOLVED_REFERENCE, f"contained Medication #{identifier} not found")


def _drug_from_medication(medication: Json, display: str | None) -> _Drug:
    code = medication.get("code")
    concept = _as_object(code, "Medication.code") if code is not None else {}
    text = (
        _concept_text(concept) or _ingredient_names(medication) or display or _first_code(concept)
    )
    if text is None:
        raise _Unmappable(
            Problem.MISSING_FIELD, "the Medication has no code, ingredient names or display"
        )
    return _Drug(text, _codings(concept))


def _ingredient_names(medication: Json) -> str | None:
    names = []
    for ingredient in _objects(medication, "ingredient"):
        item = ingredient.get("itemCodeableConcept") or ingredient.get("itemReference")
        if isinstance(item, Mapping):
            name = _concept_text(item) or _string(item, "display")
            if name:
                names.append(name)
    return " / ".join(names) or None


def _request_ends(resource: Json) -> tuple[datetime | None, ...]:
    """A request's therapy end (latest dosage bounds), then its dispense validity end."""
    validity_end = _time_at(resource, "dispenseRequest", "validityPeriod", "end")
    return (_latest(_bounds_ends(resource)), validity_end)


def _stop_time(
    resource: Json, started: datetime, fallback: datetime, ends: Sequence[datetime | None]
) -> datetime:
    """When an ended therapy stopped: the first of `ends` after its start, capped at when the
    end was known (see the module docstring for the order of preference)."""
    last_updated = _after(_time_at(resource, "meta", "lastUpdated"), started)
    end = next((time for time in (_after(end, started) for end in ends) if time), None)
    known_by = last_updated or _after(fallback, started)
    if end is not None:
        return min(end, known_by) if known_by is not None else end
    return last_updated or started + JUST_AFTER


def _bounds_ends(resource: Json) -> list[datetime | None]:
    return [
        _time_at(dosage, "timing", "repeat", "boundsPeriod", "end")
        for dosage in _objects(resource, "dosageInstruction")
    ]


def _latest(times: Iterable[datetime | None]) -> datetime | None:
    return max((time for time in times if time is not None), default=None)


def _after(time: datetime | None, start: datetime) -> datetime | None:
    return time if time is not None and time > start else None


def _stop_reason(resource: Json, status: str) -> str:
    """The status, and the text of its statusReason (one concept in a request, a list in a
    statement: the first)."""
    reason = resource.get("statusReason")
    if isinstance(reason, list):
        reason = next(iter(reason), None)
    detail = _concept_text(reason) if isinstance(reason, Mapping) else None
    return f"{status}: {detail}" if detail else status


# MedicationStatement

_TAKING_STATUSES: Final = frozenset({"active", "intended", "on-hold", "unknown"})
_TAKEN_STATUSES: Final = frozenset({"completed", "stopped", _IN_ERROR})


def _medication_statement_events(source: _Source, index: _Index) -> list[Event]:
    resource = source.resource
    status = _statement_status(resource)
    course = _Course(
        prescription_id=_based_on_request(resource, "basedOn", index)
        or f"{source.resource_type}/{source.resource_id}",
        subject_id=_subject_of(resource, "subject", index),
        drug=_drug_of(resource, index),
        dosage=_dosage(_first(resource, "dosage")),
        starts=(
            _time_at(resource, "effectiveDateTime"),
            _time_at(resource, "effectivePeriod", "start"),
            _time_at(resource, "dateAsserted"),
        ),
        in_error=status == _IN_ERROR,
        stop=_stopped_by(source, _statement_ends) if status in _TAKEN_STATUSES else None,
        stop_reason=_stop_reason(resource, status),
    )
    return _course_events(source, course)


def _statement_ends(resource: Json) -> tuple[datetime | None, ...]:
    return (_time_at(resource, "effectivePeriod", "end"),)


_NO_MEDICATION_CODES: Final = frozenset(
    {(IPS_ABSENT_UNKNOWN, "no-known-medications"), (IPS_ABSENT_UNKNOWN, "no-medication-info")}
)
_NO_MEDICATION_TEXTS: Final = frozenset(
    {
        "no known medications",
        "no known medication",
        "no current medications",
        "no medications",
        "no medication information",
        "none",
    }
)


def _statement_status(resource: Json) -> str:
    """The statement's status, or why it records no medication taken."""
    status = _required_string(resource, "status")
    if status == "not-taken":
        raise _Unsupported("MedicationStatement not-taken: the patient does not take the drug")
    if _states_no_medication(resource):
        raise _Unsupported("MedicationStatement states that no medication is known (or no info)")
    if status not in _TAKING_STATUSES | _TAKEN_STATUSES:
        raise _Unmappable(Problem.INVALID_VALUE, f"status {status!r} is not a statement status")
    return status


def _states_no_medication(resource: Json) -> bool:
    """An IPS "no known medications" / "no information" statement (by code, or by its text
    alone), which names no drug."""
    concept = resource.get("medicationCodeableConcept")
    if not isinstance(concept, Mapping):
        return False
    codes = {(_SYSTEM_ALIASES.get(c.system, c.system), c.code) for c in _codings(concept)}
    if codes & _NO_MEDICATION_CODES:
        return True
    text = _concept_text(concept)
    return (
        not codes and text is not None and " ".join(text.casefold().split()) in _NO_MEDICATION_TEXTS
    )


def _based_on_request(resource: Json, field_name: str, index: _Index) -> str | None:
    """The id of the MedicationRequest a record reports on (a statement's `basedOn`, an
    administration's `request`, a dispense's `authorizingPrescription`), if it names one: the
    record is then news of that prescription, not a second one. A `urn:uuid:` reference is
    resolved against the input set's entries."""
    value = resource.get(field_name)
    references = [value] if isinstance(value, Mapping) else _objects(resource, field_name)
    for reference in references:
        target = _string(reference, "reference")
        entry = index.orders.get(target) if target is not None else None
        if entry is not None and entry.identity is not None:
            return entry.identity
        relative = _relative(target) if target is not None else None
        if relative is not None and relative.startswith("MedicationRequest/"):
            return relative.split("/", 1)[1]
    return None


# Immunization, MedicationAdministration, MedicationDispense


def _immunization_events(source: _Source, index: _Index) -> list[Event]:
    resource = source.resource
    status = _required_string(resource, "status")
    if status == "not-done":
        raise _Unsupported("Immunization not-done: the vaccine was not given")
    if status not in ("completed", _IN_ERROR):
        raise _Unmappable(Problem.INVALID_VALUE, f"status {status!r} is not an immunization status")
    vaccine = _required_object(resource, "vaccineCode")
    codes = _codings(vaccine)
    if any(_SYSTEM_ALIASES.get(c.system, c.system) == IPS_ABSENT_UNKNOWN for c in codes):
        raise _Unsupported("Immunization states that no immunization is known (or no info)")
    route = resource.get("route")
    course = _Course(
        prescription_id=f"{source.resource_type}/{source.resource_id}",
        subject_id=_subject_of(resource, "patient", index),
        drug=_Drug(_concept_label(vaccine, "vaccineCode"), codes),
        dosage=_Dosage(
            dose=_quantity_text(_object_at(resource, "doseQuantity")),
            route=_concept_text(route) if isinstance(route, Mapping) else None,
        ),
        starts=(_time_at(resource, "occurrenceDateTime"), _time_at(resource, "recorded")),
        in_error=status == _IN_ERROR,
        stop=_one_dose,
        stop_reason=f"{status}: a single dose",
    )
    return _course_events(source, course)


def _one_dose(started: datetime) -> datetime:
    return started + JUST_AFTER


_ADMINISTRATION_STATUSES: Final = frozenset(
    {"in-progress", "not-done", "on-hold", "completed", _IN_ERROR, "stopped", "unknown"}
)
_ADMINISTRATION_UNDER_WAY: Final = frozenset({"in-progress", "on-hold"})


def _medication_administration_events(source: _Source, index: _Index) -> list[Event]:
    resource = source.resource
    status = _required_string(resource, "status")
    if status not in _ADMINISTRATION_STATUSES:
        message = f"status {status!r} is not an administration status"
        raise _Unmappable(Problem.INVALID_VALUE, message)
    if status == "not-done":
        raise _Unsupported("MedicationAdministration not-done: the drug was not given")
    starts = (
        _time_at(resource, "effectiveDateTime"),
        _time_at(resource, "effectivePeriod", "start"),
    )
    order = _reported_order(source, index, "request", starts)
    if order is not None and status == _IN_ERROR:
        raise _Unsupported(
            f"MedicationAdministration entered-in-error: MedicationRequest/{order} is unchanged"
        )
    dosage = _object_at(resource, "dosage")
    one_dose = _time_at(resource, "effectiveDateTime") is not None
    over = order is None and status not in _ADMINISTRATION_UNDER_WAY
    course = _Course(
        prescription_id=order or f"{source.resource_type}/{source.resource_id}",
        subject_id=_subject_of(resource, "subject", index),
        drug=_drug_of(resource, index),
        dosage=_dosage(dosage, _object_at(dosage, "dose")),
        starts=starts,
        in_error=status == _IN_ERROR,
        stop=(_one_dose if one_dose else _stopped_by(source, _period_end)) if over else None,
        stop_reason=_stop_reason(resource, status),
    )
    return _course_events(source, course)


def _reported_order(
    source: _Source, index: _Index, field_name: str, starts: tuple[datetime | None, ...]
) -> str | None:
    """The order a record of a drug given reports on, if it names one. When that order is in
    the input set and had ended before the record, the record is skipped: reported on the
    order, it would restart it (with no end), and the order was checked while it ran."""
    order = _based_on_request(source.resource, field_name, index)
    ordered = index.orders.get(f"MedicationRequest/{order}") if order is not None else None
    if ordered is None:
        return order
    ended = _order_end(ordered, index, source.context)
    given = _timing(source, starts).occurred_at
    if ended is not None and given >= ended:
        raise _Unsupported(
            f"{source.resource_type} after MedicationRequest/{order} ended (it would restart the order)"
        )
    return order


def _order_end(order: SourcedResource, index: _Index, context: ImportContext) -> datetime | None:
    """When an order of the input set stopped, as its own import says (None: not stopped, or
    not importable)."""
    if order.identity is None:
        return None
    try:
        events = _medication_request_events(_Source(order.resource, order.identity, context), index)
    except (_Unsupported, _Unmappable, ValidationError):
        return None
    stops = [e.occurred_at for e in events if e.type == EventType.MEDICATION_STOPPED]
    return min(stops, default=None)


def _period_end(resource: Json) -> tuple[datetime | None, ...]:
    return (_time_at(resource, "effectivePeriod", "end"),)


_DISPENSE_STATUSES: Final = frozenset(
    {
        "preparation",
        "in-progress",
        "cancelled",
        "on-hold",
        "completed",
        _IN_ERROR,
        "stopped",
        "declined",
        "unknown",
    }
)
_NOT_DISPENSED: Final = frozenset({"cancelled", "declined"})


def _medication_dispense_events(source: _Source, index: _Index) -> list[Event]:
    resource = source.resource
    status = _required_string(resource, "status")
    if status not in _DISPENSE_STATUSES:
        raise _Unmappable(Problem.INVALID_VALUE, f"status {status!r} is not a dispense status")
    if status in _NOT_DISPENSED:
        raise _Unsupported(f"MedicationDispense {status}: nothing was dispensed")
    starts = (_time_at(resource, "whenHandedOver"), _time_at(resource, "whenPrepared"))
    order = _reported_order(source, index, "authorizingPrescription", starts)
    if order is not None and status == _IN_ERROR:
        raise _Unsupported(
            f"MedicationDispense entered-in-error: MedicationRequest/{order} is unchanged"
        )
    course = _Course(
        prescription_id=order or f"{source.resource_type}/{source.resource_id}",
        subject_id=_subject_of(resource, "subject", index),
        drug=_drug_of(resource, index),
        dosage=_dosage(_first(resource, "dosageInstruction")),
        starts=starts,
        in_error=status == _IN_ERROR,
        stop=None if order is not None else _one_dose,
        stop_reason=f"{status}: checked once (the dispense names no prescription)",
    )
    return _course_events(source, course)


# Patient

_ISO_ALPHA_2_CODES: Final = """
    AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR
    BS BT BV BW BY BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ
    EC EE EG EH ER ES ET FI FJ FK FM FO FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW
    GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO JP KE KG KH KI KM KN KP KR KW KY
    KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ MR MS MT MU MV
    MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR PS PT PW PY
    QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF TG
    TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM
    ZW
    """
_ISO_ALPHA_2: Final = frozenset(_ISO_ALPHA_2_CODES.split())
"""ISO 3166-1 alpha-2 codes (the 249 officially assigned, as in tzdata's iso3166.tab)."""
_COUNTRY_ALIASES: Final = {
    "USA": "US", "UNITED STATES": "US", "UNITED STATES OF AMERICA": "US",
    "GBR": "GB", "UK": "GB", "UNITED KINGDOM": "GB",
    "CAN": "CA", "CANADA": "CA", "MEX": "MX", "MEXICO": "MX",
    "DEU": "DE", "GERMANY": "DE", "DEUTSCHLAND": "DE", "FRA": "FR", "FRANCE": "FR",
    "NLD": "NL", "NETHERLANDS": "NL", "THE NETHERLANDS": "NL", "BEL": "BE", "BELGIUM": "BE",
    "ESP": "ES", "SPAIN": "ES", "ITA": "IT", "ITALY": "IT", "PRT": "PT", "PORTUGAL": "PT",
    "CHE": "CH", "SWITZERLAND": "CH", "AUT": "AT", "AUSTRIA": "AT", "IRL": "IE", "IRELAND": "IE",
    "SWE": "SE", "SWEDEN": "SE", "NOR": "NO", "NORWAY": "NO", "DNK": "DK", "DENMARK": "DK",
    "FIN": "FI", "FINLAND": "FI", "POL": "PL", "POLAND": "PL",
    "AUS": "AU", "AUSTRALIA": "AU", "NZL": "NZ", "NEW ZEALAND": "NZ",
    "JPN": "JP", "JAPAN": "JP", "CHN": "CN", "CHINA": "CN", "中国": "CN",
    "IND": "IN", "INDIA": "IN", "BRA": "BR", "BRAZIL": "BR", "ZAF": "ZA", "SOUTH AFRICA": "ZA",
}  # fmt: skip
"""Alpha-3 codes and English names mapped without doubt; anything else is reported."""


def country_code(text: str) -> str | None:
    """ISO 3166-1 alpha-2 code of a FHIR address country, or None when it is not certain."""
    key = " ".join(text.replace(".", "").upper().split())
    if key in _ISO_ALPHA_2:
        return key
    return _COUNTRY_ALIASES.get(key)


def _patient_events(source: _Source, _index: _Index) -> list[Event]:
    address = _home_address(source.resource)
    country = None if address is None else _string(address, "country")
    if address is None or country is None:
        raise _Unsupported("Patient without an address country: no home_country fact")
    code = country_code(country)
    if code is None:
        raise _Unsupported(f"Patient address country {country!r} is not an ISO 3166-1 code or name")
    timing = _timing(source, (_time_at(address, "period", "start"),))
    payload = FactAsserted(key=HOME_COUNTRY, value=code)
    subject_id = _subject_id(source.resource_id)
    return [
        _event(
            source, subject_id, timing, payload, f"{EventType.FACT_ASSERTED.value}:{HOME_COUNTRY}"
        )
    ]


def _home_address(resource: Json) -> Json | None:
    addresses = _objects(resource, "address")
    homes = [address for address in addresses if address.get("use") == "home"]
    return next(iter(homes or addresses), None)


def _medication_definition(_source: _Source, _index: _Index) -> list[Event]:
    raise _Unsupported("Medication: no event of its own (it resolves medication references)")


_MAPPERS: Final[dict[str, Mapper]] = {
    "AllergyIntolerance": _allergy_events,
    "MedicationRequest": _medication_request_events,
    "MedicationStatement": _medication_statement_events,
    "MedicationAdministration": _medication_administration_events,
    "MedicationDispense": _medication_dispense_events,
    "Immunization": _immunization_events,
    "Patient": _patient_events,
    "Medication": _medication_definition,
}


# References and subjects

_UNSAFE_IN_SUBJECT: Final = re.compile(r"[:\s]+")


def _subject_of(resource: Json, field_name: str, index: _Index) -> str:
    reference = _string(_required_object(resource, field_name), "reference")
    if reference is None:
        raise _Unmappable(Problem.MISSING_FIELD, f"{field_name}.reference")
    if reference.startswith("urn:"):
        return _subject_id(index.patients.get(reference) or reference.rsplit(":", 1)[-1])
    if reference.startswith("#"):
        raise _Unmappable(Problem.UNRESOLVED_REFERENCE, "a contained patient is not supported")
    relative = _relative(reference)
    if relative is None:
        raise _Unmappable(Problem.INVALID_VALUE, f"{field_name}.reference {reference!r}")
    resource_type, identifier = relative.split("/")
    if resource_type != "Patient":
        raise _Unsupported(f"the subject is a {resource_type}, not a Patient")
    return _subject_id(identifier)


def _subject_id(identifier: str) -> str:
    subject = _UNSAFE_IN_SUBJECT.sub("-", identifier.strip())
    if not subject:
        raise _Unmappable(Problem.INVALID_VALUE, "the patient id is empty")
    return subject


def _relative(reference: str) -> str | None:
    """`Type/id` of a relative or absolute literal reference (a version suffix is dropped)."""
    parts = [part for part in reference.split("/") if part]
    if "_history" in parts:
        parts = parts[: parts.index("_history")]
    if len(parts) < 2:
        return None
    return f"{parts[-2]}/{parts[-1]}"


# Times

_FHIR_DATE_TIME: Final = re.compile(
    r"(?P<year>\d{4})(?:-(?P<month>\d{2})(?:-(?P<day>\d{2})"
    r"(?:T(?P<hour>\d{2}):(?P<minute>\d{2})(?::(?P<second>\d{2})(?:\.(?P<fraction>\d+))?)?"
    r"(?P<zone>Z|[+-]\d{2}:\d{2})?)?)?)?"
)


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
        return datetime(
            int(parts["year"]),
            int(parts["month"] or 1),
            int(parts["day"] or 1),
            int(parts["hour"] or 0),
            int(parts["minute"] or 0),
            min(int(parts["second"] or 0), 59),
            int(fraction),
            tzinfo=_zone(parts["zone"]),
        )
    except ValueError as error:
        raise ValueError(f"{text!r} is not a valid date: {error}") from None


def _zone(text: str | None) -> timezone:
    if text is None or text == "Z":
        return UTC
    sign = -1 if text.startswith("-") else 1
    hours, minutes = int(text[1:3]), int(text[4:6])
    return timezone(sign * timedelta(hours=hours, minutes=minutes))


def _time_at(holder: Json, *path: str) -> datetime | None:
    text = _at(holder, path)
    if text is None:
        return None
    where = ".".join(path)
    if not isinstance(text, str):
        raise _Unmappable(Problem.INVALID_VALUE, f"{where} is not a date or dateTime")
    try:
        return parse_fhir_datetime(text)
    except ValueError as error:
        raise _Unmappable(Problem.INVALID_VALUE, f"{where}: {error}") from None


def _timing(source: _Source, candidates: Sequence[datetime | None]) -> _Timing:
    """occurred_at from the first present candidate, then meta.lastUpdated, then the fallback."""
    resource, fallback = source.resource, source.context.fallback_time
    last_updated = _time_at(resource, "meta", "lastUpdated")
    found = next((time for time in (*candidates, last_updated) if time is not None), None)
    version = _string(_object_at(resource, "meta"), "versionId") or _raw_last_updated(resource)
    if found is None:
        return _Timing(
            fallback, last_updated or fallback, f"{version}|fallback={fallback.isoformat()}"
        )
    return _Timing(found, last_updated or found, version)


def _raw_last_updated(resource: Json) -> str:
    return _string(_object_at(resource, "meta"), "lastUpdated") or ""


# JSON access


def _at(holder: Json, path: Sequence[str]) -> object:
    value: object = holder
    for key in path:
        if value is None:
            return None
        value = _as_object(value, key).get(key)
    return value


def _as_object(value: object, where: str) -> Json:
    if not isinstance(value, Mapping):
        raise _Unmappable(Problem.INVALID_VALUE, f"{where} is not a JSON object")
    return value


def _object_at(holder: Json, key: str) -> Json:
    value = holder.get(key)
    return {} if value is None else _as_object(value, key)


def _required_object(holder: Json, key: str) -> Json:
    if holder.get(key) is None:
        raise _Unmappable(Problem.MISSING_FIELD, key)
    return _as_object(holder[key], key)


def _objects(holder: Json, key: str) -> list[Json]:
    values = holder.get(key, [])
    if not isinstance(values, list) or not all(isinstance(value, Mapping) for value in values):
        raise _Unmappable(Problem.INVALID_VALUE, f"{key} is not a list of objects")
    return values


def _string(holder: Json, key: str) -> str | None:
    value = holder.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _Unmappable(Problem.INVALID_VALUE, f"{key} is not a string")
    return value.strip() or None


def _required_string(holder: Json, key: str) -> str:
    value = _string(holder, key)
    if value is None:
        raise _Unmappable(Problem.MISSING_FIELD, key)
    return value


def _lookup(table: Mapping[str, E], code: str | None, where: str) -> E | None:
    return None if code is None else _required_lookup(table, code, where)


def _required_lookup(table: Mapping[str, E], code: str, where: str) -> E:
    found = table.get(code)
    if found is None:
        allowed = ", ".join(sorted(table))
        raise _Unmappable(Problem.INVALID_VALUE, f"{where} {code!r} is not one of {allowed}")
    return found


def _status_code(resource: Json, key: str) -> str | None:
    """The code of a status CodeableConcept (e.g. clinicalStatus), or None when absent."""
    concept = resource.get(key)
    if concept is None:
        return None
    codes = (_string(coding, "code") for coding in _objects(_as_object(concept, key), "coding"))
    found = next((code for code in codes if code), None)
    if found is None:
        raise _Unmappable(Problem.MISSING_FIELD, f"{key}.coding.code")
    return found


def _codings(concept: Json) -> tuple[Coding, ...]:
    """The usable codings of a CodeableConcept (those with a system and a code)."""
    found = []
    for coding in _objects(concept, "coding"):
        system, code = _string(coding, "system"), _string(coding, "code")
        if system is not None and code is not None:
            found.append(Coding(system=system, code=code, display=_string(coding, "display")))
    return tuple(found)


def _concept_text(concept: Json) -> str | None:
    """A CodeableConcept's text, else its first coding display."""
    text = _string(concept, "text")
    if text is not None:
        return text
    displays = (_string(coding, "display") for coding in _objects(concept, "coding"))
    return next((display for display in displays if display), None)


def _first_code(concept: Json) -> str | None:
    return next((coding.code for coding in _codings(concept)), None)


def _concept_label(concept: Json, where: str) -> str:
    label = _concept_text(concept) or _first_code(concept)
    if label is None:
        raise _Unmappable(Problem.MISSING_FIELD, f"{where} has no text, display or code")
    return label


def _notes(resource: Json) -> str | None:
    texts = [text for note in _objects(resource, "note") if (text := _string(note, "text"))]
    return "\n".join(texts) or None
