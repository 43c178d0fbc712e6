"""Drugs given: Immunization, MedicationAdministration and MedicationDispense -> the course of
the order they report on, or a course of their own (see `schemas.fhir.mapping`). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Final

from schemas.events import Event
from schemas.fhir.json_access import (
    IPS_ABSENT_UNKNOWN,
    SYSTEM_ALIASES,
    Json,
    Problem,
    Unmappable,
    Unsupported,
    concept_label,
    end_time_at,
    named_concept,
    object_at,
    required_object,
    required_string,
    time_at,
)
from schemas.fhir.medications import (
    IN_ERROR,
    NO_DOSAGE,
    Course,
    Drug,
    course_events,
    dosage_of,
    drug_of,
    first_dosage,
    named_as_ordered,
    order_planned_end,
    reported_order,
    stop_reason_of,
    stopped_by,
)
from schemas.fhir.modifiers import earlier_negation
from schemas.fhir.sources import (
    JUST_AFTER,
    Index,
    Source,
    optional_part,
    subject_of,
)


def immunization_events(source: Source, index: Index) -> list[Event]:
    resource = source.resource
    status = required_string(resource, "status")
    if status == "not-done":
        raise Unsupported("Immunization not-done: the vaccine was not given")
    negation = earlier_negation(resource)
    if negation is not None:
        raise Unsupported(
            f"Immunization {negation}, an earlier release's not-done: the vaccine was not given"
        )
    if status not in ("completed", IN_ERROR):
        raise Unmappable(Problem.INVALID_VALUE, f"status {status!r} is not an immunization status")
    vaccine = required_object(resource, "vaccineCode")
    concept = named_concept(vaccine, "vaccineCode")
    codes = concept.codes
    if any(SYSTEM_ALIASES.get(c.system, c.system) == IPS_ABSENT_UNKNOWN for c in codes):
        raise Unsupported("Immunization states that no immunization is known (or no info)")
    if status != IN_ERROR:
        source.passed_over.extend(_vaccine_reactions(resource))
    course = Course(
        prescription_id=f"{source.resource_type}/{source.resource_id}",
        subject_id=subject_of(resource, "patient", index),
        drug=Drug(concept_label(vaccine, "vaccineCode"), codes, concepts=(concept,)),
        dosage=dosage_of(source, resource, "", dose_key="doseQuantity", text=False),
        starts=(
            time_at(resource, "occurrenceDateTime"),
            time_at(resource, "date"),
            time_at(resource, "recorded"),
        ),
        in_error=status == IN_ERROR,
        stop=single_dose_end,
        stop_reason=f"{status}: a single dose",
    )
    return course_events(source, course)


def _vaccine_reactions(resource: Json) -> list[str]:
    """A line for each reaction an immunization records (anaphylaxis after a vaccine): UaC
    reads allergies from AllergyIntolerance only, so the reaction is not read, and it must not
    go unsaid, or a later dose of the vaccine is given with nothing checked."""
    reactions = resource.get("reaction")
    lines: list[str] = []
    for position, reaction in enumerate(reactions if isinstance(reactions, list) else []):
        named = [
            f"{key} {value!r}"
            for key, value in _reaction_words(reaction if isinstance(reaction, Mapping) else {})
        ]
        lines.append(
            f"reaction[{position}] ({', '.join(named) or 'no detail'}) is not read: a reaction "
            "to a vaccine is not recorded as an allergy; if it was one (anaphylaxis to the "
            "vaccine or a component), send an AllergyIntolerance, so later doses are checked "
            "(imported without it)"
        )
    return lines


def _reaction_words(reaction: Json) -> list[tuple[str, str]]:
    """What an immunization's reaction says: its date, its detail's display and reference."""
    detail = reaction.get("detail")
    detail = detail if isinstance(detail, Mapping) else {}
    found = [
        ("date", reaction.get("date")),
        ("detail", detail.get("display")),
        ("detail", detail.get("reference")),
    ]
    return [(key, value) for key, value in found if isinstance(value, str) and value]


def single_dose_end(started: datetime) -> datetime:
    return started + JUST_AFTER


_ADMINISTRATION_STATUSES: Final = frozenset(
    {"in-progress", "not-done", "on-hold", "completed", IN_ERROR, "stopped", "unknown"}
)
_ADMINISTRATION_UNDER_WAY: Final = frozenset({"in-progress", "on-hold"})


def administration_events(source: Source, index: Index) -> list[Event]:
    resource = source.resource
    status = required_string(resource, "status")
    if status not in _ADMINISTRATION_STATUSES:
        message = f"status {status!r} is not an administration status"
        raise Unmappable(Problem.INVALID_VALUE, message)
    if status == "not-done":
        raise Unsupported("MedicationAdministration not-done: the drug was not given")
    negation = earlier_negation(resource)
    if negation is not None:
        raise Unsupported(
            f"MedicationAdministration {negation}, an earlier release's not-done: the drug was "
            "not given"
        )
    given = _given_at(resource)
    starts = (
        time_at(resource, f"{given}DateTime"),
        time_at(resource, f"{given}Period", "start"),
    )
    subject_id = subject_of(resource, "subject", index)
    order = reported_order(source, index, "request", starts, subject_id)
    if order is not None and status == IN_ERROR:
        raise Unsupported(
            f"MedicationAdministration entered-in-error: MedicationRequest/{order} is unchanged"
        )
    dosage = optional_part(source, lambda: object_at(resource, "dosage"), NO_DOSAGE)
    one_dose = time_at(resource, f"{given}DateTime") is not None
    over = order is None and status not in _ADMINISTRATION_UNDER_WAY
    course = Course(
        prescription_id=order or f"{source.resource_type}/{source.resource_id}",
        subject_id=subject_id,
        drug=named_as_ordered(source, index, order, drug_of(resource, index)),
        dosage=dosage_of(source, dosage, "dosage", dose_key="dose"),
        starts=starts,
        in_error=status == IN_ERROR,
        stop=(single_dose_end if one_dose else stopped_by(source, _period_end)) if over else None,
        stop_reason=stop_reason_of(source, status),
        planned_end=order_planned_end(index, order),
    )
    return course_events(source, course)


def _period_end(resource: Json) -> tuple[datetime | None, ...]:
    return (end_time_at(resource, f"{_given_at(resource)}Period", "end"),)


_GIVEN_AT: Final = ("effective", "occurence", "occurrence", "effectiveTime")
"""R4's `effective[x]`, then R5's `occurence[x]` (so spelled in R5) and its corrected spelling,
then DSTU2's `effectiveTime[x]`: when the drug was given."""


def _given_at(resource: Json) -> str:
    """The prefix of the element that says when the drug was given: `effective` (R4), else
    the R5 name of a record that has only that (dated at the Bundle's time, the day it was
    given was lost without a word)."""
    return next(
        (
            prefix
            for prefix in _GIVEN_AT
            if f"{prefix}DateTime" in resource or f"{prefix}Period" in resource
        ),
        "effective",
    )


_DISPENSE_STATUSES: Final = frozenset(
    {
        "preparation",
        "in-progress",
        "cancelled",
        "on-hold",
        "completed",
        IN_ERROR,
        "stopped",
        "declined",
        "unfulfilled",
        "unknown",
    }
)
_NOT_DISPENSED: Final = frozenset({"cancelled", "declined", "unfulfilled"})
"""Nothing was handed over (`unfulfilled`, R5: the dispense could not be completed)."""


def dispense_events(source: Source, index: Index) -> list[Event]:
    resource = source.resource
    status = required_string(resource, "status")
    if status not in _DISPENSE_STATUSES:
        raise Unmappable(Problem.INVALID_VALUE, f"status {status!r} is not a dispense status")
    if status in _NOT_DISPENSED:
        raise Unsupported(f"MedicationDispense {status}: nothing was dispensed")
    negation = earlier_negation(resource)
    if negation is not None:
        raise Unsupported(
            f"MedicationDispense {negation}, an earlier release's not-done: nothing was dispensed"
        )
    starts = (time_at(resource, "whenHandedOver"), time_at(resource, "whenPrepared"))
    subject_id = subject_of(resource, "subject", index)
    order = reported_order(source, index, "authorizingPrescription", starts, subject_id)
    if order is not None and status == IN_ERROR:
        raise Unsupported(
            f"MedicationDispense entered-in-error: MedicationRequest/{order} is unchanged"
        )
    course = Course(
        prescription_id=order or f"{source.resource_type}/{source.resource_id}",
        subject_id=subject_id,
        drug=named_as_ordered(source, index, order, drug_of(resource, index)),
        dosage=first_dosage(source, "dosageInstruction"),
        starts=starts,
        in_error=status == IN_ERROR,
        stop=None if order is not None else single_dose_end,
        stop_reason=f"{status}: checked once (the dispense names no prescription)",
        planned_end=order_planned_end(index, order),
    )
    return course_events(source, course)
