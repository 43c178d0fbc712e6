"""AllergyIntolerance -> AllergyRecorded (see `schemas.fhir.mapping` for the decisions). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import partial
from typing import Final

from schemas.allergy_statements import statement_categories
from schemas.events import (
    AllergyCategory,
    AllergyRecorded,
    AllergyType,
    ClinicalStatus,
    Coding,
    Criticality,
    Event,
    EventType,
    Reaction,
    ReactionSeverity,
    VerificationStatus,
)
from schemas.fhir.json_access import (
    IPS_ABSENT_UNKNOWN,
    SNOMED,
    SYSTEM_ALIASES,
    Json,
    NamedConcept,
    Problem,
    Unmappable,
    Unsupported,
    codings_of,
    concept_label,
    concept_text,
    concept_words,
    display_at,
    items_at,
    lookup,
    named_concept,
    notes_of,
    optional_concept,
    required_lookup,
    required_object,
    status_code,
    string_at,
    time_at,
    within,
)
from schemas.fhir.sources import (
    Index,
    Source,
    new_event,
    optional_items,
    optional_part,
    subject_of,
    timing_of,
)

_ALL_CATEGORIES: Final = tuple(AllergyCategory)
_NO_CATEGORIES: Final[tuple[AllergyCategory, ...]] = ()
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
_SUBSTANCE_SYSTEMS: Final = frozenset(
    {
        SNOMED,
        "http://www.nlm.nih.gov/research/umls/rxnorm",
        "urn:oid:2.16.840.1.113883.6.88",
        "http://hl7.org/fhir/sid/ndc",
        "http://hl7.org/fhir/sid/cvx",
        "http://fdasis.nlm.nih.gov",
        "http://www.whocc.no/atc",
    }
)
"""Terminologies whose codes name substances and drugs: a coding in one of them that is not a
negation code makes the record an allergy whatever its words say."""
_ALLERGY_TYPES: Final = {"allergy": AllergyType.ALLERGY, "intolerance": AllergyType.INTOLERANCE}
_CATEGORIES: Final = {category.value: category for category in AllergyCategory}
_CRITICALITIES: Final = {
    "low": Criticality.LOW,
    "high": Criticality.HIGH,
    "unable-to-assess": Criticality.UNABLE_TO_ASSESS,
}
_DSTU2_CRITICALITIES: Final = {"CRITL": "low", "CRITH": "high", "CRITU": "unable-to-assess"}
"""DSTU2's criticality codes, as the R4 codes of the same levels."""
_VERIFICATIONS: Final = {
    "unconfirmed": VerificationStatus.UNCONFIRMED,
    "presumed": VerificationStatus.UNCONFIRMED,
    "confirmed": VerificationStatus.CONFIRMED,
    "refuted": VerificationStatus.REFUTED,
    "entered-in-error": VerificationStatus.ENTERED_IN_ERROR,
}
_CLINICAL_STATUSES: Final = {status.value: status for status in ClinicalStatus}
_DSTU2_STATUSES: Final[dict[str, tuple[str, str]]] = {
    "active": ("clinicalStatus", "active"),
    "inactive": ("clinicalStatus", "inactive"),
    "resolved": ("clinicalStatus", "resolved"),
    "unconfirmed": ("verificationStatus", "unconfirmed"),
    "confirmed": ("verificationStatus", "confirmed"),
    "refuted": ("verificationStatus", "refuted"),
    "entered-in-error": ("verificationStatus", "entered-in-error"),
}
"""DSTU2's single `status` code (R4 split it in two), as the R4 element and code it says: a
refuted or entered-in-error allergy sent in DSTU2 form was read as confirmed and alerted."""
_REACTION_SEVERITIES: Final = {severity.value: severity for severity in ReactionSeverity}


def allergy_events(source: Source, index: Index) -> list[Event]:
    resource = source.resource
    subject_id = subject_of(resource, "patient", index)
    code, where = _allergen_concept(resource)
    concept = named_concept(code, where)
    codes = concept.codes
    if any((c.system, c.code) in _UNKNOWN_ALLERGY_STATUS for c in codes):
        raise Unsupported("allergy status unknown (no information): neither allergy nor negation")
    negation = within(where, lambda: _negated_categories(code, codes))
    if negation is not None:
        _refuse_substances_of_a_negation(resource, where)
    substance, codes = _with_reaction_substances(resource, concept_label(code, where), codes)
    source.concepts.extend((concept, *_reaction_substances(resource, where)))
    source.passed_over.extend(_unread_substances(resource))
    payload = AllergyRecorded(
        allergy_id=source.resource_id,
        substance=substance,
        codes=codes,
        allergy_type=optional_part(
            source, lambda: lookup(_ALLERGY_TYPES, _type_code(resource), "type"), None
        ),
        categories=(
            negation
            if negation is not None
            else optional_part(source, lambda: _allergy_categories(resource), _NO_CATEGORIES)
        ),
        criticality=optional_part(
            source,
            lambda: lookup(_CRITICALITIES, _criticality_code(resource), "criticality"),
            None,
        ),
        verification_status=_verification_status(source),
        clinical_status=lookup(
            _CLINICAL_STATUSES,
            _status(source, "clinicalStatus", _CLINICAL_STATUSES),
            "clinicalStatus",
        ),
        negated=negation is not None,
        reactions=tuple(
            _reaction(source, reaction, where)
            for where, reaction in optional_items(source, resource, "reaction")
        ),
        note=optional_part(source, lambda: notes_of(resource), None),
    )
    candidates = _allergy_dates(source)
    if _no_longer_holds(payload):
        last_updated = time_at(resource, "meta", "lastUpdated")
        candidates = (last_updated, source.document_time, *candidates)
    timing = timing_of(source, candidates)
    return [new_event(source, subject_id, timing, payload, EventType.ALLERGY_RECORDED.value)]


_DATES: Final = (
    ("recordedDate",),
    ("assertedDate",),
    ("onsetDateTime",),
    ("onsetPeriod", "start"),
    ("onset",),
)
"""R4's dates of an allergy, with STU3's `assertedDate` (R4's `recordedDate`) and DSTU2's
`onset` (a dateTime, R4's `onsetDateTime`)."""


def _allergy_dates(source: Source) -> tuple[datetime | None, ...]:
    """When the allergy was recorded, else when it began; a date after the record itself was
    made (`Source.made_at`: a year typed wrong, an onset planned by mistake) is left out with a
    line, so the allergy is dated no later than it was made. Dated in the future, the gate
    refused it (`occurred_in_future`) and the allergy was lost; an allergy known now holds
    now. An onset that cannot be read (`2010-00-00`) is left out with a line when the
    `recordedDate` dates the allergy: it was an error that lost the allergy for a date it did
    not need."""
    resource = source.resource
    made = source.made_at
    recorded = time_at(resource, "recordedDate") or time_at(resource, "assertedDate")
    dates: list[datetime | None] = []
    for path in _DATES:
        date = (
            time_at(resource, *path)
            if recorded is None or path in _DATES[:2]
            else optional_part(source, partial(time_at, resource, *path), None)
        )
        if date is not None and date > made:
            source.passed_over.append(
                f"{'.'.join(path)} {date.isoformat()} is after the record was made "
                f"({made.isoformat()}): the allergy is dated no later than that (imported "
                "without it)"
            )
            date = None
        dates.append(date)
    return tuple(dates)


def _criticality_code(resource: Json) -> str | None:
    """R4's criticality code, DSTU2's (`CRITH`) read as the R4 code of its level."""
    code = string_at(resource, "criticality")
    return _DSTU2_CRITICALITIES.get(code, code) if code is not None else None


def _allergen_concept(resource: Json) -> tuple[Json, str]:
    """The allergy's `code`, else DSTU2's `substance` (R4 renamed it `code`), else (R4 allows
    `code` 0..1) the substance its first reaction names, with the path it came from."""
    if resource.get("code") is not None:
        return required_object(resource, "code"), "code"
    if resource.get("substance") is not None:
        return required_object(resource, "substance"), "substance"
    for where, reaction in items_at(resource, "reaction"):
        if reaction.get("substance") is not None:
            substance = within(where, partial(required_object, reaction, "substance"))
            return substance, f"{where}.substance"
    raise Unmappable(Problem.MISSING_FIELD, "code (and no reaction names a substance)")


def _with_reaction_substances(
    resource: Json, label: str, codes: tuple[Coding, ...]
) -> tuple[str, tuple[Coding, ...]]:
    """The allergen's label and codes with the substances its reactions name: R4's
    `reaction.substance` is the specific agent, often more specific than `code` ("Drug
    allergy" with amoxicillin as the substance), so it is named in the label and its codings
    are the allergy's too. A substance that names nothing is passed over: the allergy stands
    on its code."""
    reactions = resource.get("reaction")
    named = [
        read
        for reaction in (reactions if isinstance(reactions, list) else [])
        if isinstance(reaction, Mapping)
        and (read := optional_concept(reaction.get("substance"))) is not None
    ]
    labels = [concept.label for concept in named if concept.label]
    more = [name for name in dict.fromkeys(labels) if name.casefold() != label.casefold()]
    coded = codes + tuple(coding for concept in named for coding in concept.codes)
    return (f"{label} ({', '.join(more)})" if more else label), tuple(dict.fromkeys(coded))


def _reaction_substances(resource: Json, allergen: str) -> list[NamedConcept]:
    """The concepts the reactions name as their substance, those that can be read, but the one
    read as the allergen (`allergen`, its path)."""
    reactions = resource.get("reaction")
    found: list[NamedConcept] = []
    for position, reaction in enumerate(reactions if isinstance(reactions, list) else []):
        where = f"reaction[{position}].substance"
        substance = reaction.get("substance") if isinstance(reaction, Mapping) else None
        if where != allergen and isinstance(substance, Mapping):
            try:
                found.append(named_concept(substance, where))
            except Unmappable:
                continue
    return found


def _no_longer_holds(allergy: AllergyRecorded) -> bool:
    """Refuted, entered in error, inactive or resolved: a status known as of the last update."""
    return allergy.verification_status in (
        VerificationStatus.REFUTED,
        VerificationStatus.ENTERED_IN_ERROR,
    ) or allergy.clinical_status in (ClinicalStatus.INACTIVE, ClinicalStatus.RESOLVED)


def _negated_categories(
    code: Json, codes: tuple[Coding, ...]
) -> tuple[AllergyCategory, ...] | None:
    """The categories a "no known allergy" statement covers; None for a real substance.

    A negation code says it; so do the text and every coding's display together ("NKDA",
    "No known drug allergies") when no coding names a substance in a standard terminology
    (a hospital's local code for NKDA is still a negation, a coded penicillin called "NKA" is
    not)."""
    negations = [
        categories
        for coding in codes
        if (categories := _NEGATIONS.get((_system(coding), coding.code))) is not None
    ]
    substances = [
        coding
        for coding in codes
        if _system(coding) in _SUBSTANCE_SYSTEMS
        and (_system(coding), coding.code) not in _NEGATIONS
    ]
    if negations and substances:
        named = substances[0].display or f"{substances[0].system}|{substances[0].code}"
        raise Unmappable(
            Problem.INVALID_VALUE,
            f"code says both 'no known allergy' and a substance ({named}): one concept cannot "
            "be both, so neither an allergy nor a negation is recorded",
        )
    if negations:
        return negations[0]
    if substances:
        return None
    names = [concept_words(code)]
    names += [display_at(coding) for _, coding in items_at(code, "coding")]
    read = {statement_categories(name) for name in names if name}
    return read.pop() if len(read) == 1 else None


def _unread_substances(resource: Json) -> list[str]:
    """A line for each reaction substance that is no CodeableConcept (a plain string): the
    substance it names is not read, so the allergy stands on its code alone."""
    reactions = resource.get("reaction")
    return [
        f"reaction[{position}].substance is not a JSON object (imported without it)"
        for position, reaction in enumerate(reactions if isinstance(reactions, list) else [])
        if isinstance(reaction, Mapping)
        and reaction.get("substance") is not None
        and not isinstance(reaction.get("substance"), Mapping)
    ]


def _refuse_substances_of_a_negation(resource: Json, allergen: str) -> None:
    """A "no known allergy" record whose reaction names a substance (an anaphylaxis to
    penicillin G) says both that there is no allergy and that there is one: neither reading is
    safe to guess (an allergy dropped, or one invented), so it is an error."""
    for substance in _reaction_substances(resource, allergen):
        named = substance.text or next(
            (coding.display or f"{coding.system}|{coding.code}" for coding in substance.codes),
            None,
        )
        if named is not None:
            raise Unmappable(
                Problem.INVALID_VALUE,
                f"{allergen} says there is no known allergy, but {substance.where} names "
                f"{named!r}: one record cannot be both, so neither an allergy nor a negation "
                "is recorded; correct it at the source",
            )


def _system(coding: Coding) -> str:
    return SYSTEM_ALIASES.get(coding.system, coding.system)


def _type_code(resource: Json) -> str | None:
    """R4's `type` code, or the code of R5's `type` CodeableConcept."""
    if isinstance(resource.get("type"), Mapping):
        return status_code(resource, "type", _ALLERGY_TYPES)
    return string_at(resource, "type")


def _allergy_categories(resource: Json) -> tuple[AllergyCategory, ...]:
    """R4's list of category codes (one code alone, as some producers send it, is read as a
    list of one)."""
    values = resource.get("category", [])
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        raise Unmappable(Problem.INVALID_VALUE, "category is not a list of codes")
    return tuple(required_lookup(_CATEGORIES, value, "category") for value in values)


def _verification_status(source: Source) -> VerificationStatus:
    """The allergy's verification status. Not given (absent, or a concept with neither a
    coding nor a text: a data-absent-reason extension alone), FHIR says nothing of it: it is
    not "unconfirmed", which would lower the alert of a low-criticality allergy nobody called
    uncertain. UaC's contract has no "not stated": an `AllergyRecorded` that states none is
    `confirmed`, its default, and so is this one, with a line that says the source gave none."""
    resource = source.resource
    code = (
        _status(source, "verificationStatus", _VERIFICATIONS)
        if not _not_given(resource, "verificationStatus") or _earlier_status(source)
        else None
    )
    if code is None:
        source.passed_over.append(
            "verificationStatus is not given: the allergy is imported as an allergy whose "
            "verification is not stated, which UaC records as confirmed (the default of its "
            "events), not as unconfirmed, which the source did not say; check at the source "
            "whether it was verified"
        )
        return VerificationStatus.CONFIRMED
    return required_lookup(_VERIFICATIONS, code, "verificationStatus")


def _status(source: Source, key: str, known: Mapping[str, object]) -> str | None:
    """The code of R4's `clinicalStatus` or `verificationStatus` (`key`), else the code DSTU2's
    `status` gives for it. Both given and naming different codes, R4's holds, with a line."""
    resource = source.resource
    given = None if _not_given(resource, key) else status_code(resource, key, known)
    earlier = _earlier_status(source)
    said = earlier[1] if earlier is not None and earlier[0] == key else None
    if given is None:
        return said
    if said is not None and said != given:
        source.passed_over.append(
            f"status {said!r} (DSTU2) says otherwise than {key} {given!r}: the {key} is read"
        )
    return given


def _earlier_status(source: Source) -> tuple[str, str] | None:
    """The R4 element and code that DSTU2's `status` of the allergy says, if it has one (a
    value DSTU2 does not define is passed over with a line)."""
    value = source.resource.get("status")
    if value is None:
        return None
    code = value.strip().casefold() if isinstance(value, str) else None
    said = _DSTU2_STATUSES.get(code or "")
    line = (
        f"status {value!r} is none of DSTU2's allergy statuses "
        f"({', '.join(_DSTU2_STATUSES)}) (imported without it)"
    )
    if said is None and line not in source.passed_over:
        source.passed_over.append(line)
    return said


def _not_given(resource: Json, key: str) -> bool:
    """Whether a status concept is absent or says nothing (no coding, no text: an extension
    alone, such as a data-absent-reason)."""
    concept = resource.get(key)
    return concept is None or (
        isinstance(concept, Mapping) and not concept.get("coding") and concept.get("text") is None
    )


def _reaction(source: Source, reaction: Json, where: str) -> Reaction:
    """A reaction's manifestations (else its description) and severity; either, unreadable, is
    left out and the reaction kept."""
    manifestation = optional_part(
        source, lambda: within(where, lambda: _manifestation(source, reaction, where)), None
    )
    return Reaction(
        manifestation=manifestation or "unspecified manifestation",
        severity=optional_part(
            source,
            lambda: within(
                where,
                lambda: lookup(_REACTION_SEVERITIES, string_at(reaction, "severity"), "severity"),
            ),
            None,
        ),
    )


def _manifestation(source: Source, reaction: Json, at: str) -> str | None:
    """The reaction's manifestations, with its description after them ("Hives (went into
    anaphylactic shock, intubated)"): the description of the event as a whole may say what
    the coded manifestations do not, and the grade of an alert reads both."""
    names = [
        label
        for where, manifestation in optional_items(source, reaction, "manifestation", at)
        if (label := within(where, partial(_manifestation_name, _concept_of(manifestation))))
    ]
    description = string_at(reaction, "description")
    if names and description and description.casefold() not in {n.casefold() for n in names}:
        return f"{'; '.join(names)} ({description})"
    return "; ".join(names) or description


def _manifestation_name(concept: Json) -> str | None:
    """A manifestation's text or display, else its codes ("SNOMED CT 39579001"): a reaction
    coded only (anaphylaxis, Stevens-Johnson syndrome by their SNOMED CT codes) is still read
    as what it is, never as an unspecified one."""
    text = concept_text(concept)
    if text is not None:
        return text
    codes = [
        f"{'SNOMED CT' if coding.system == SNOMED else coding.system} {coding.code}"
        for coding in codings_of(concept)
    ]
    return ", ".join(codes) or None


def _concept_of(manifestation: Json) -> Json:
    """An R4 manifestation CodeableConcept, or the `concept` of an R5 CodeableReference."""
    concept = manifestation.get("concept")
    return concept if isinstance(concept, Mapping) else manifestation
