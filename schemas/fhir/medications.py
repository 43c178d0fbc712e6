"""MedicationRequest and MedicationStatement -> MedicationPrescribed and MedicationStopped, and
the course of a drug that every medication mapper shares (see `schemas.fhir.mapping`). Pure.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Final

from pydantic import ValidationError

from schemas.events import Coding, Event, EventType, MedicationPrescribed, MedicationStopped
from schemas.fhir.inputs import SourcedResource
from schemas.fhir.json_access import (
    IPS_ABSENT_UNKNOWN,
    SYSTEM_ALIASES,
    Json,
    NamedConcept,
    Problem,
    ReadConcept,
    Unmappable,
    Unsupported,
    a_resource_of_type,
    as_object,
    codings_of,
    concept_label,
    concept_text,
    display_at,
    duration_of,
    end_time_at,
    first_code,
    first_object,
    items_at,
    named_concept,
    notes_of,
    object_at,
    objects_at,
    optional_concept,
    quantity_text,
    relative_reference,
    required_code,
    status_code,
    string_at,
    text_among,
    time_at,
    within,
)
from schemas.fhir.modifiers import earlier_negation, not_plain
from schemas.fhir.resource_types import R4_RESOURCE_TYPES
from schemas.fhir.sources import (
    JUST_AFTER,
    ImportContext,
    Index,
    Source,
    Timing,
    new_event,
    optional_part,
    quoted,
    subject_of,
    timing_of,
)

_PRESCRIBING_INTENTS: Final = frozenset(
    {"order", "original-order", "reflex-order", "filler-order", "instance-order", "plan"}
)
_NOT_PRESCRIBING_INTENTS: Final = frozenset({"proposal", "option"})
_REQUEST_INTENTS: Final = _PRESCRIBING_INTENTS | _NOT_PRESCRIBING_INTENTS
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
IN_ERROR: Final = "entered-in-error"
_ENDED_STATUSES: Final = frozenset({"stopped", "completed", "cancelled", IN_ERROR})


@dataclass(frozen=True)
class Drug:
    text: str
    codes: tuple[Coding, ...]
    reported: tuple[str, ...] = ()
    """What is to be said of how the drug was read, a line each: an ingredient reference that
    names nothing readable, left out, or a reference pinned to a version the input set does not
    hold, and the version read instead."""
    resolved: bool = True
    """False when an ingredient reference names nothing readable: the text then says an
    ingredient was not resolved, so the drug is judged `unverified`, never "no conflict" for
    want of it."""
    concepts: tuple[NamedConcept, ...] = ()
    """The concepts that name the drug (the record's, or its Medication's code and the
    concepts its ingredients name), for a check that each one's words and codes agree."""


def request_events(source: Source, index: Index) -> list[Event]:
    resource = source.resource
    status = _prescription_status(resource)
    subject_id = subject_of(resource, "subject", index)
    therapy = optional_part(source, lambda: _therapy_of(source, index, subject_id), None)
    if therapy is not None:
        course = _fulfilment(source, index, status, therapy, subject_id)
    else:
        course = Course(
            prescription_id=source.resource_id,
            subject_id=subject_id,
            drug=drug_of(resource, index),
            dosage=first_dosage(source, "dosageInstruction"),
            starts=(_ordered_at(source),),
            in_error=status == IN_ERROR,
            stop=stopped_by(source, _request_ends) if status in _ENDED_STATUSES else None,
            stop_reason=stop_reason_of(source, status),
            planned_end=None
            if status in _ENDED_STATUSES
            else optional_part(source, lambda: _planned_therapy_end(resource), None),
        )
    events = course_events(source, course)
    if status not in _REPLACING_STATUSES:
        return events
    replaced = optional_part(source, lambda: _replaced_order(source, course, index), None)
    return events if replaced is None else [*events, replaced]


def _therapy_of(source: Source, index: Index, subject_id: str) -> str | None:
    """The id of the order whose therapy this request fulfils (`therapy_root`), when its
    `basedOn` names a prescription of the input set for the same patient; None when it is a
    therapy of its own (it names none, one the input set does not hold, or one whose `basedOn`
    leads back to this request: the loop is not followed, and a line says so)."""
    named = patients_order(source, "basedOn", index, subject_id)
    if named is None or index.order(f"MedicationRequest/{named}") is None:
        return None
    root = therapy_root(source.resource_id, source.resource, index, subject_id)
    if root != source.resource_id:
        return root
    if _fulfilled_order(source.resource, index, subject_id) is not None:
        source.passed_over.append(
            f"basedOn names MedicationRequest/{named}, whose own basedOn leads back to this "
            "request: the loop is not followed, and the request is read as a therapy of its own"
        )
    return None


def therapy_root(order_id: str, order: Json, index: Index, subject_id: str) -> str:
    """The id of the order that starts the therapy `order` is part of: following `basedOn`
    from request to request of the input set (each a prescription for the patient
    `subject_id`: a filler-order fulfils the order it names, an instance-order is one
    occurrence of it, an order carries out a plan) to the first based on none; `order_id`
    itself when it is based on none, or when the chain meets a loop (not followed)."""
    walked = [order_id]
    current = order
    while True:
        parent = _fulfilled_order(current, index, subject_id)
        if parent is None or parent.identity is None:
            return walked[-1]
        if parent.identity in walked:
            return order_id
        walked.append(parent.identity)
        current = parent.resource


def _fulfilled_order(request: Json, index: Index, subject_id: str) -> SourcedResource | None:
    """The request of the input set that `request`'s `basedOn` names, when it is a prescription
    for the patient `subject_id` (one that cannot be told is none)."""
    try:
        named = based_on_request(request, "basedOn", index)
        held = None if named is None else index.order(f"MedicationRequest/{named}")
        if held is None or not _prescribes(held.resource):
            return None
        return held if subject_of(held.resource, "subject", index) == subject_id else None
    except (Unmappable, Unsupported):
        return None


def _prescribes(request: Json) -> bool:
    """Whether a MedicationRequest is imported as a prescription (not a proposal, a draft, a
    doNotPerform or one entered in error)."""
    try:
        return _prescription_status(request) != IN_ERROR
    except (Unmappable, Unsupported):
        return False


_LEAVES_THERAPY: Final = frozenset({"cancelled", IN_ERROR})
"""The statuses of a request fulfilling another that change nothing of the therapy: withdrawn
before anything was given, or never valid."""


def _fulfilment(source: Source, index: Index, status: str, therapy: str, subject_id: str) -> Course:
    """A request that fulfils an order of the input set, as news of that order's therapy (its
    prescription id, the drug, dose and route it names), like a record of a drug given: never a
    stop, whatever its status (an instance-order completed is one occurrence done, a filler-order
    stopped is the fulfiller's, not the prescriber's), and the therapy's planned end. One
    cancelled or entered in error, or one written after the therapy ended (its order's stop,
    or that of an order replacing it, or its planned end), is skipped: the therapy is
    unchanged, and it would be restarted with no end."""
    if status in _LEAVES_THERAPY:
        raise Unsupported(
            f"MedicationRequest {status}, part of the therapy of MedicationRequest/{therapy}: "
            "the therapy is unchanged"
        )
    starts = (_ordered_at(source),)
    planned = therapy_planned_end(source, index, therapy, starts)
    return Course(
        prescription_id=therapy,
        subject_id=subject_id,
        drug=drug_of(source.resource, index),
        dosage=first_dosage(source, "dosageInstruction"),
        starts=starts,
        planned_end=planned,
    )


def _planned_end_of(order: Json) -> PlannedEnd | None:
    """When an order still under way plans its therapy to end (None: ended, open-ended, or not
    readable: its own import reports that)."""
    if text_among(order.get("status"), _ENDED_STATUSES):
        return None
    try:
        return _planned_therapy_end(order)
    except Unmappable:
        return None


def reported_order(
    source: Source,
    index: Index,
    field_name: str,
    starts: tuple[datetime | None, ...],
    subject_id: str,
) -> str | None:
    """The therapy of the record's patient a record of a drug given reports on, if it names an
    order (`patients_order`). When that order is in the input set and its therapy had ended
    before the record (stopped, or past its planned end), the record is skipped: reported on
    the order, it would restart it (with no end), and the order was checked while it ran."""
    order = patients_order(source, field_name, index, subject_id)
    if order is not None:
        therapy_planned_end(source, index, order, starts)
    return order


def therapy_planned_end(
    source: Source, index: Index, therapy: str, starts: tuple[datetime | None, ...]
) -> PlannedEnd | None:
    """The planned end of the therapy of MedicationRequest/`therapy` when the input set holds
    that order, for a record of the therapy dated by `starts`. A record dated after the therapy
    ended (its order's stop, or that of an order replacing it, or its planned end) is skipped:
    reported on the order, it would restart it with no end, and the order was checked while it
    ran."""
    ordered = index.order(f"MedicationRequest/{therapy}")
    if ordered is None:
        return None
    stopped = therapy_stop(ordered, index, source.context)
    planned = _planned_end_of(ordered.resource)
    ends = [end for end in (stopped, None if planned is None else planned.at) if end is not None]
    if ends and timing_of(source, starts).occurred_at >= min(ends):
        reason = f"after MedicationRequest/{therapy} ended (it would restart the order)"
        raise Unsupported(f"{source.resource_type} {reason}")
    return planned


def named_as_ordered(source: Source, index: Index, order: str | None, drug: Drug) -> Drug:
    """The drug of a record of a drug given (an administration, a dispense) reporting on an
    order: the drug it names, which becomes the course's drug (a substitute given replaces the
    drug ordered; a line names both when the order of the input set names another,
    `_same_drug`), except that one named by codes only, with no words (a dispense coded by an
    NDC alone), is named as the order names it (`_named_by_order`)."""
    ordered = _ordered_drug(index, order)
    if order is None or ordered is None:
        return drug
    if not _worded(drug):
        return _named_by_order(source, order, drug, ordered)
    if not _same_drug(drug, ordered):
        source.passed_over.append(
            f"it names {quoted(drug.text)}, where MedicationRequest/{order} names "
            f"{quoted(ordered.text)}: the course is checked as the drug given (a substitute "
            "replaces the drug ordered)"
        )
    return drug


def taken_as_ordered(source: Source, index: Index, order: str | None, drug: Drug) -> Drug:
    """The drug of a statement reporting on an order, named as `named_as_ordered` names it,
    except that one that is not the drug the order of the input set names (`_same_drug`) does
    not replace it: a statement says what the patient takes, not what was handed over in the
    order's place, and the order still stands. The course is checked as both, the statement's
    drug then the order's as a list the drug knowledge reads item by item ("ibuprofen 400 mg;
    amoxicillin 500 mg capsule"), with the codes of both, and a line says so. Replaced, an
    amoxicillin order's critical alert was resolved by a statement of ibuprofen, without a
    word, while the order was never stopped."""
    ordered = _ordered_drug(index, order)
    if order is None or ordered is None:
        return drug
    if not _worded(drug):
        return _named_by_order(source, order, drug, ordered)
    if _same_drug(drug, ordered):
        return drug
    both = f"{drug.text}; {ordered.text}"
    source.passed_over.append(
        f"it names {quoted(drug.text)}, but MedicationRequest/{order}, which it reports on, "
        f"names {quoted(ordered.text)}: the course is checked as both ({quoted(both)})"
    )
    codes = tuple(dict.fromkeys((*drug.codes, *ordered.codes)))
    return Drug(both, codes, drug.reported, drug.resolved and ordered.resolved, drug.concepts)


def _ordered_drug(index: Index, order: str | None) -> Drug | None:
    """The drug the order of the input set names (None: no order, not held, or its drug cannot
    be read: its own import reports that)."""
    ordered = None if order is None else index.order(f"MedicationRequest/{order}")
    if ordered is None:
        return None
    try:
        return drug_of(ordered.resource, index)
    except Unmappable:
        return None


def _named_by_order(source: Source, order: str, drug: Drug, ordered: Drug) -> Drug:
    """A drug named by codes only, named as its order names it: a code the drug knowledge
    cannot read would make the course unverifiable, and the record is news of the order's
    course. Its codes stay, so a backend that reads them judges them; the record says so."""
    source.passed_over.append(
        f"its medication is named by codes only ({drug.text}): named as MedicationRequest/"
        f"{order} names it ({ordered.text})"
    )
    return Drug(ordered.text, drug.codes, drug.reported, drug.resolved, drug.concepts)


def _same_drug(drug: Drug, ordered: Drug) -> bool:
    """Whether a record names the drug its order names, as far as the records themselves say
    (the mapping knows no drugs): a coding they share (the same system and code), or the same
    words (letter case and spacing aside)."""
    shared = {_code_key(code) for code in drug.codes} & {_code_key(c) for c in ordered.codes}
    return bool(shared) or _words(drug.text) == _words(ordered.text)


def _code_key(code: Coding) -> tuple[str, str]:
    return (SYSTEM_ALIASES.get(code.system, code.system), code.code)


def _words(text: str) -> str:
    return " ".join(text.casefold().split())


def _worded(drug: Drug) -> bool:
    """Whether the drug is named in words somewhere (a text, or a coding's display); a drug
    read from a Medication or a reference's display always is."""
    if not drug.concepts:
        return True
    return any(
        concept.text or any(code.display for code in concept.codes) for concept in drug.concepts
    )


def order_planned_end(index: Index, order: str | None) -> PlannedEnd | None:
    """When the order a record of a drug given (or taken) reports on plans its therapy to end,
    when that order is in the input set: the record is news of the order's course, which
    still ends then (reported on the order without it, the course would go on for ever)."""
    ordered = None if order is None else index.order(f"MedicationRequest/{order}")
    return None if ordered is None else _planned_end_of(ordered.resource)


def therapy_stop(order: SourcedResource, index: Index, context: ImportContext) -> datetime | None:
    """When the therapy an order of the input set starts stopped, as its own import or that of
    an order of the input set replacing it (or replacing a request fulfilling it) says (None:
    not stopped, or not importable); worked out once per order (`Index.order_ends`)."""
    identity = order.identity
    if identity is None:
        return None
    if identity not in index.order_ends:
        index.order_ends[identity] = None
        replacing = _replacing(order, identity, index)
        stops = [
            stop
            for item in (order, *replacing)
            for stop in _stops_of(identity, item, index, context)
        ]
        index.order_ends[identity] = min(stops, default=None)
    return index.order_ends[identity]


def _replacing(order: SourcedResource, identity: str, index: Index) -> list[SourcedResource]:
    """The requests of the input set whose `priorPrescription` names the order, or a request
    of its therapy."""
    try:
        subject_id = subject_of(order.resource, "subject", index)
    except (Unmappable, Unsupported):
        subject_id = None
    found: list[SourcedResource] = []
    for key, requests in index.replacing.items():
        try:
            named = index.order(key)
        except Unmappable:
            continue
        if named is None or named.identity is None:
            continue
        if named.identity == identity or (
            subject_id is not None
            and therapy_root(named.identity, named.resource, index, subject_id) == identity
        ):
            found.extend(requests)
    return found


def _stops_of(
    order_id: str, request: SourcedResource, index: Index, context: ImportContext
) -> list[datetime]:
    """When the import of `request` stops the order `order_id` (none if it cannot be imported)."""
    if request.identity is None:
        return []
    try:
        events = request_events(
            Source(request.resource, request.identity, context, request.document_time), index
        )
    except (Unsupported, Unmappable, ValidationError, OverflowError):
        return []
    return [
        event.occurred_at
        for event in events
        if isinstance(event.payload, MedicationStopped)
        and event.payload.prescription_id == order_id
    ]


_REPLACING_STATUSES: Final = frozenset({"active", "on-hold", "completed", "stopped", "unknown"})
"""The statuses of an order that took effect, so that the order it names as its
`priorPrescription` was replaced (a cancelled or entered-in-error one replaced nothing)."""


def _replaced_order(source: Source, course: Course, index: Index) -> Event | None:
    """The stop of the order this one replaces (its `priorPrescription`), when this one starts:
    left active, the replaced order would keep its alerts open, and count as a second course
    of its drug, for ever. Dated just after the replaced order's own start when the input set
    dates that later (a stop must follow its prescription). A replaced order that the input
    set holds as ended already keeps its own stop, and a version of this order that the input
    set holds a newer cancelled or entered-in-error version of replaced nothing."""
    prior = based_on_request(source.resource, "priorPrescription", index)
    source.passed_over.extend(pinned_order_notes(source.resource, "priorPrescription", index))
    if prior is not None and _prior_leads_back(source.resource_id, prior, index):
        source.passed_over.append(
            f"priorPrescription names MedicationRequest/{prior}, whose own priorPrescription "
            "leads back to this request: the loop is not followed, and neither order replaces "
            "the other"
        )
        return None
    named = None if prior is None else index.order(f"MedicationRequest/{prior}")
    if prior is not None and named is not None:
        prior = therapy_root(prior, named.resource, index, course.subject_id)
    if prior is None or prior == course.prescription_id:
        return None
    newest = _status_of(index.order(f"MedicationRequest/{source.resource_id}"))
    held = index.order(f"MedicationRequest/{prior}")
    if (newest is not None and newest not in _REPLACING_STATUSES) or (
        _status_of(held) in _ENDED_STATUSES
    ):
        return None
    timing = timing_of(source, course.starts)
    at = timing.occurred_at
    if held is not None:
        held_source = Source(held.resource, prior, source.context, held.document_time)
        prior_start = timing_of(held_source, (time_at(held.resource, "authoredOn"),))
        at = max(at, prior_start.occurred_at + JUST_AFTER)
    stop = MedicationStopped(
        prescription_id=prior, reason=f"replaced by MedicationRequest/{source.resource_id}"
    )
    stop_timing = Timing(at, max(timing.recorded_at, at), timing.version)
    kind = f"{EventType.MEDICATION_STOPPED.value}/replaced"
    return new_event(source, course.subject_id, stop_timing, stop, kind)


def _prior_leads_back(request_id: str, prior: str, index: Index) -> bool:
    """Whether the `priorPrescription` chain from `prior` comes back to `request_id` (two
    orders that name each other): followed, each would stop the other, and both courses would
    end without a word."""
    seen = {request_id}
    current: str | None = prior
    while current is not None and current not in seen:
        seen.add(current)
        held = index.order(f"MedicationRequest/{current}")
        current = (
            None if held is None else based_on_request(held.resource, "priorPrescription", index)
        )
    return current == request_id


def _status_of(order: SourcedResource | None) -> str | None:
    """An order's status code as written (None: no order, or not a code)."""
    status = None if order is None else order.resource.get("status")
    return status if isinstance(status, str) else None


@dataclass(frozen=True)
class Dosage:
    dose: str | None = None
    route: str | None = None


@dataclass(frozen=True)
class Course:
    """What one FHIR record says about a course of a drug: which prescription, which drug, when
    it started, and whether (and when) it is over."""

    prescription_id: str
    subject_id: str
    drug: Drug
    dosage: Dosage
    starts: tuple[datetime | None, ...]
    """Candidates for when it started, first present wins (then meta.lastUpdated)."""
    in_error: bool = False
    """Entered in error: only the stop (it never was a prescription)."""
    stop: Callable[[datetime], datetime | None] | None = None
    """For a course that is over: when it stopped, given when it started (None: not yet)."""
    stop_reason: str | None = None
    planned_end: PlannedEnd | None = None
    """For a course still under way: when it is planned to end (the prescription's
    `valid_until`, so rules stop using it then); None when open-ended."""


@dataclass(frozen=True)
class PlannedEnd:
    """When a course still under way is planned to end, and the part of the record that says
    so (`effectivePeriod.end`)."""

    at: datetime
    part: str


def course_events(source: Source, course: Course) -> list[Event]:
    """The prescription (none when entered in error) and, for a course that is over, its stop."""
    source.concepts.extend(course.drug.concepts)
    payload = MedicationPrescribed(
        prescription_id=course.prescription_id,
        drug=course.drug.text,
        codes=course.drug.codes,
        dose=course.dosage.dose,
        route=course.dosage.route,
        note=optional_part(source, lambda: notes_of(source.resource), None),
    )
    timing = timing_of(source, course.starts)
    kind = EventType.MEDICATION_PRESCRIBED.value
    source.passed_over.extend(course.drug.reported)
    until = _planned_until(source, course.planned_end, timing.occurred_at)
    prescribed = new_event(source, course.subject_id, timing, payload, kind, valid_until=until)
    events = [] if course.in_error else [prescribed]
    stopped_at = course.stop(timing.occurred_at) if course.stop is not None else None
    if stopped_at is not None:
        stop_timing = Timing(stopped_at, max(timing.recorded_at, stopped_at), timing.version)
        stop = MedicationStopped(
            prescription_id=course.prescription_id,
            reason=course.stop_reason,
            entered_in_error=course.in_error,
        )
        kind = EventType.MEDICATION_STOPPED.value
        events.append(new_event(source, course.subject_id, stop_timing, stop, kind))
    return events


def _planned_until(source: Source, end: PlannedEnd | None, started: datetime) -> datetime | None:
    """The prescription's `valid_until`: a planned end that is not after the course starts
    ends nothing (a date typed in the wrong year, or the course's own start for its end) and
    is reported and left out, as an end that cannot be read is: the course is checked as
    open-ended until it is stopped, rather than end before it began and hide its alerts."""
    if end is None:
        return None
    if end.at <= started:
        source.passed_over.append(
            f"{end.part} ends the course at {end.at.isoformat()}, not after it starts "
            f"({started.isoformat()}): it is checked until it is stopped (imported without it)"
        )
        return None
    return end.at


def stopped_by(
    source: Source, ends: Callable[[Json], Sequence[datetime | None]]
) -> Callable[[datetime], datetime]:
    """The stop of an ended course: the first of `ends` after its start (see `_stop_time`)."""

    def stopped_at(started: datetime) -> datetime:
        last_resort = source.last_resort_time
        return _stop_time(source.resource, started, last_resort, ends(source.resource))

    return stopped_at


def first_dosage(source: Source, key: str) -> Dosage:
    """The first Dosage of a record's list `key`; a part of it that cannot be read is left out
    (with its reason)."""
    dosage = optional_part(source, lambda: first_object(source.resource, key), NO_DOSAGE)
    return dosage_of(source, dosage, f"{key}[0]")


NO_DOSAGE: Final[Json] = {}


def dosage_of(
    source: Source, dosage: Json, where: str, dose_key: str | None = None, *, text: bool = True
) -> Dosage:
    """A Dosage's text (else the text of its Quantity `dose_key`, else of an R4 Dosage's first
    `doseAndRate.doseQuantity`: "500 mg") and route; either, unreadable, is left out (with its
    reason). `text=False` for a holder whose `text` is no dosage (an Immunization's is its
    narrative)."""

    def dose() -> str | None:
        written = string_at(dosage, "text") if text else None
        if written is None and dose_key is not None:
            return within(dose_key, lambda: quantity_text(object_at(dosage, dose_key)))
        if written is None and text:
            return _dose_quantity(dosage)
        return written

    def route() -> str | None:
        concept = object_at(dosage, "route")
        return within("route", lambda: concept_text(concept)) if concept else None

    return Dosage(
        dose=optional_part(source, lambda: within(where, dose), None),
        route=optional_part(source, lambda: within(where, route), None),
    )


def _dose_quantity(dosage: Json) -> str | None:
    """The first `doseAndRate` entry's `doseQuantity` as text, if it has one."""
    first = next(iter(items_at(dosage, "doseAndRate")), None)
    if first is None:
        return None
    where, dose_and_rate = first
    quantity = within(where, partial(object_at, dose_and_rate, "doseQuantity"))
    return within(f"{where}.doseQuantity", partial(quantity_text, quantity))


def _ordered_at(source: Source) -> datetime | None:
    """When the request was written (`authoredOn`); one after the record itself was made
    (`Source.made_at`: a year typed wrong) is left out with a line, so the order is dated when
    it was made. Dated in the future, the gate refused it (`occurred_in_future`) and the drug
    was never checked."""
    resource = source.resource
    ordered = time_at(resource, "authoredOn")
    if ordered is None or ordered <= (made := source.made_at):
        return ordered
    source.passed_over.append(
        f"authoredOn {ordered.isoformat()} is after the record was made ({made.isoformat()}): "
        "the order is dated no later than that (imported without it)"
    )
    return None


def _prescription_status(resource: Json) -> str:
    """The request's status, or why this request is not a prescription."""
    status = required_code(resource, "status", _REQUEST_STATUSES)
    intent = required_code(resource, "intent", _REQUEST_INTENTS)
    if status not in _REQUEST_STATUSES:
        codes = ", ".join(sorted(_REQUEST_STATUSES))
        message = f"status {status!r} is not a request status (one of {codes})"
        raise Unmappable(Problem.INVALID_VALUE, message)
    if intent in _NOT_PRESCRIBING_INTENTS:
        raise Unsupported(f"MedicationRequest intent {intent} is not a prescription")
    if intent not in _PRESCRIBING_INTENTS:
        raise Unmappable(Problem.INVALID_VALUE, f"intent {intent!r} is not a request intent")
    if status == "draft":
        raise Unsupported("MedicationRequest status draft is not yet a prescription")
    do_not_perform = resource.get("doNotPerform")
    if do_not_perform is not None and not isinstance(do_not_perform, bool):
        raise Unmappable(
            Problem.INVALID_VALUE,
            f"doNotPerform {do_not_perform!r} is not a boolean (true or false): whether the drug "
            "is to be given or not cannot be told",
        )
    if do_not_perform:
        raise Unsupported("MedicationRequest doNotPerform: an instruction not to give the drug")
    return status


def drug_of(resource: Json, index: Index) -> Drug:
    """The drug of a record's medication[x] (R4), or of its R5 `medication` CodeableReference
    (its `concept`, else its `reference`), as an R4 export sometimes carries it."""
    concept, reference = _medication_parts(resource)
    if concept is not None:
        where, value = concept
        found = as_object(value, where)
        read = named_concept(found, where)
        return Drug(concept_label(found, where), read.codes, concepts=(read,))
    if reference is None:
        raise Unmappable(
            Problem.MISSING_FIELD, "medication[x] (medicationCodeableConcept or Reference)"
        )
    where, value = reference
    reference_object = as_object(value, where)
    medication = within(where, lambda: _referenced_medication(resource, reference_object, index))
    display = display_at(reference_object)
    target = string_at(reference_object, "reference") or ""
    if medication is None:
        target = within(where, lambda: _medication_by_identifier(reference_object, index))
        medication = index.medication(target) if target else None
    if medication is None:
        if display is None:
            how = (
                "only by identifier, which no Medication of the input set carries,"
                if "identifier" in reference_object
                else "not at all"
            )
            raise Unmappable(
                Problem.MISSING_FIELD,
                f"{where} has no reference: it names the Medication {how} (give "
                "Medication/<id> with the Medication, or a medicationCodeableConcept)",
            )
        return Drug(display, ())
    siblings = tuple(objects_at(resource, "contained")) if target.startswith("#") else ()
    drug = within(
        f"the Medication {target}",
        lambda: _drug_from_medication(medication, display, index, siblings),
        joiner=": ",
    )
    version = index.pinned_version_note(target)
    reported = (*([] if version is None else [version]), *drug.reported)
    named = tuple(f"the Medication {target}: {line}" for line in reported)
    concepts = tuple(
        concept._replace(where=f"the Medication {target}: {concept.where}")
        for concept in drug.concepts
    )
    return Drug(drug.text, drug.codes, named, drug.resolved, concepts)


Part = tuple[str, object]
"""A part of a record and its path."""


def _medication_parts(resource: Json) -> tuple[Part | None, Part | None]:
    """The concept and the reference that name a record's drug, with their paths: R4's
    `medicationCodeableConcept` or `medicationReference` (both at once is an error), or R5's
    `medication` CodeableReference (`medication.concept`, else `medication.reference`)."""
    concept, reference = (
        resource.get("medicationCodeableConcept"),
        resource.get("medicationReference"),
    )
    if concept is not None and reference is not None:
        raise Unmappable(
            Problem.INVALID_VALUE,
            "medication[x] is given twice (medicationCodeableConcept and medicationReference): "
            "one drug per record, so which one is meant cannot be told",
        )
    r5 = resource.get("medication")
    if r5 is not None and (concept is not None or reference is not None):
        raise Unmappable(
            Problem.INVALID_VALUE,
            "the drug is given twice (R4 medication[x] and R5 medication): one drug per record, "
            "so which one is meant cannot be told",
        )
    if r5 is not None:
        held = as_object(r5, "medication")
        if held.get("concept") is not None:
            return ("medication.concept", held["concept"]), None
        if held.get("reference") is not None:
            return None, ("medication.reference", held["reference"])
        raise Unmappable(Problem.MISSING_FIELD, "medication has neither concept nor reference")
    return (
        None if concept is None else ("medicationCodeableConcept", concept),
        None if reference is None else ("medicationReference", reference),
    )


_NOT_DRUGS: Final = R4_RESOURCE_TYPES - {"Medication"}
"""The resource types a drug reference may not name (a Patient, a Practitioner)."""


def _referenced_medication(resource: Json, reference: Json, index: Index) -> Json | None:
    target = string_at(reference, "reference")
    if target is None:
        return None
    if target.startswith("#"):
        return _contained(resource, target[1:])
    if "?" in target:
        raise Unmappable(
            Problem.UNRESOLVED_REFERENCE,
            f"{target} is a conditional reference: a Medication is resolved by its id or its "
            "entry's fullUrl",
        )
    found = index.medication(target)
    named = relative_reference(target)
    if found is None and named is not None and named.split("/")[0] in _NOT_DRUGS:
        raise Unmappable(
            Problem.INVALID_VALUE,
            f"{target} is not a Medication (the drug is a Reference(Medication)): which drug is "
            "meant cannot be told",
        )
    if found is None:
        raise Unmappable(
            Problem.UNRESOLVED_REFERENCE,
            f"{target} is not among the imported resources (pass the file that holds it in the "
            "same command: its codes decide the drug, so it is not guessed from a display)",
        )
    return found


def _medication_by_identifier(reference: Json, index: Index) -> str:
    """`Medication/<id>` of the one Medication of the input set that carries the identifier a
    reference names its drug by (no `reference`: a logical reference), else "" (the reference
    names none of the set's). Carried by more than one, which is meant cannot be told."""
    key = _identifier_key(reference)
    if key is None or key not in index.medication_identifiers:
        return ""
    found = index.medication_identifiers[key]
    if found is None:
        raise Unmappable(
            Problem.UNRESOLVED_REFERENCE,
            f"{key[0]}|{key[1]} is carried by more than one Medication of the input set: which "
            "drug is meant cannot be told",
            field="identifier",
        )
    return f"Medication/{found}"


def _contained(resource: Json, identifier: str) -> Json:
    """The contained Medication `#identifier` names. Contained ids are unique within their
    resource: two different resources under the one id are an error, never the first picked."""
    named = [
        contained
        for contained in objects_at(resource, "contained")
        if contained.get("id") in (identifier, f"#{identifier}")
    ]
    distinct = [item for n, item in enumerate(named) if item not in named[:n]]
    if len(distinct) > 1:
        raise Unmappable(
            Problem.UNRESOLVED_REFERENCE,
            f"#{identifier} names {len(distinct)} different contained resources (contained ids "
            "are unique within a resource): nothing says which one is meant",
        )
    medications = [item for item in distinct if item.get("resourceType") == "Medication"]
    if medications:
        return medications[0]
    if distinct:
        kind = distinct[0].get("resourceType")
        message = (
            f"contained #{identifier} is {a_resource_of_type(kind)}, not a Medication (the drug is a "
            "Reference(Medication)): which drug is meant cannot be told"
        )
        raise Unmappable(Problem.INVALID_VALUE, message)
    message = f"contained Medication #{identifier} not found"
    raise Unmappable(Problem.UNRESOLVED_REFERENCE, message)


def _drug_from_medication(
    medication: Json,
    display: str | None,
    index: Index | None = None,
    siblings: Sequence[Json] = (),
) -> Drug:
    """The drug a Medication names: its code's text (with the names of ingredients it does not
    already name and no code identifies: "Ward stock suspension (amoxicillin)"), else its
    ingredients' names, else the reference's display, else a code; coded by its own codings
    and those of its ingredients (a local formulary code with RxNorm-coded ingredients is still
    known by its ingredients). An ingredient is read as `_ingredients` reads it; `siblings` are
    the resources contained beside a contained Medication. A Medication that cannot be read as
    plain (`schemas.fhir.modifiers`) is an error for the records naming it."""
    refused = not_plain(medication)
    if refused is not None:
        raise refused
    code = medication.get("code")
    concept = as_object(code, "code") if code is not None else {}
    ingredients, reported, resolved = _ingredients(medication, index, siblings)
    own = within("code", lambda: concept_text(concept))
    text = (
        _with_uncoded_ingredients(own, ingredients)
        or _names(item.label for item in ingredients)
        or display
        or first_code(concept)
    )
    if text is None:
        raise Unmappable(
            Problem.MISSING_FIELD, "the Medication has no code, ingredient names or display"
        )
    own_concept = named_concept(concept, "code")
    codes = own_concept.codes + tuple(c for item in ingredients for c in item.codes)
    concepts = (own_concept, *_ingredient_concepts(medication))
    return Drug(text, tuple(dict.fromkeys(codes)), reported, resolved, concepts)


def _ingredient_concepts(medication: Json) -> tuple[NamedConcept, ...]:
    """The concepts a Medication's ingredients name themselves (`itemCodeableConcept`, R5
    `item.concept`), those that can be read (`_ingredients` reports the others)."""
    listed = medication.get("ingredient")
    found: list[NamedConcept] = []
    for position, ingredient in enumerate(listed if isinstance(listed, list) else []):
        if not isinstance(ingredient, Mapping):
            continue
        concept, _ = _ingredient_item(ingredient, f"ingredient[{position}]")
        if concept is not None and isinstance(concept[1], Mapping):
            try:
                found.append(named_concept(concept[1], concept[0]))
            except Unmappable:
                continue
    return tuple(found)


def _with_uncoded_ingredients(text: str | None, ingredients: list[ReadConcept]) -> str | None:
    if text is None:
        return None
    named = text.casefold()
    more = [
        item.label
        for item in ingredients
        if item.label and not item.codes and item.label.casefold() not in named
    ]
    return f"{text} ({', '.join(dict.fromkeys(more))})" if more else text


UNRESOLVED_INGREDIENT: Final = "ingredient not resolved"
"""Added to a drug's text for an ingredient reference that names nothing readable: words no
drug knowledge recognises, so the drug is judged `unverified` (partly recognised) instead of
by its other ingredients alone."""


def _ingredients(
    medication: Json, index: Index | None, siblings: Sequence[Json]
) -> tuple[list[ReadConcept], tuple[str, ...], bool]:
    """What each ingredient names and codes: its `itemCodeableConcept` (R5 `item.concept`), or
    the Medication or Substance its `itemReference` (R5 `item.reference`) names, contained
    (`#id`, in the Medication or beside it) or, with `index`, in the input set (an ingredient
    Medication's own references are followed to what it contains only); what is to be said of
    them (`Drug.reported`); and whether every ingredient named something readable. One that
    did not (an unreadable list or entry, a concept that cannot be read or says nothing, a
    reference that names nothing readable) is left out, and the drug's text says an
    ingredient was not resolved: the product's own code is no proof that an admixture holds
    nothing else."""
    listed = medication.get("ingredient")
    if listed is not None and not isinstance(listed, list):
        unreadable = f"ingredient is not a list: {_CANNOT_CHECK}"
        return [ReadConcept(UNRESOLVED_INGREDIENT, ())], (unreadable,), False
    contained = (*_contained_resources(medication), *siblings)
    found: list[ReadConcept] = []
    reported: list[str] = []
    resolved = True
    for position, ingredient in enumerate(listed or []):
        named = _ingredient_named(ingredient, f"ingredient[{position}]", index, contained)
        found.extend([] if named.read is None else [named.read])
        reported.extend(named.reported)
        if not named.resolved:
            found.append(ReadConcept(UNRESOLVED_INGREDIENT, ()))
            resolved = False
    return found, tuple(reported), resolved


def _ingredient_named(
    ingredient: object, where: str, index: Index | None, contained: Sequence[Json]
) -> _NamedIngredient:
    """What one entry of a Medication's `ingredient` list names, or why it names nothing
    readable."""
    if not isinstance(ingredient, Mapping):
        return _NamedIngredient(None, (f"{where} is not a JSON object: {_CANNOT_CHECK}",), False)
    concept, reference = _ingredient_item(ingredient, where)
    if concept is not None:
        at, value = concept
        try:
            read = within(at, lambda: _ingredient_concept(as_object(value, at)))
        except Unmappable as error:
            return _NamedIngredient(None, (f"{error.message}: {_CANNOT_CHECK}",), False)
        if read.label is None and not read.codes:
            nothing = f"{at} names nothing (no text, display or code): {_CANNOT_CHECK}"
            return _NamedIngredient(None, (nothing,), False)
        return _NamedIngredient(read)
    if reference is None:
        missing = f"{where} has no item (itemCodeableConcept or itemReference): {_CANNOT_CHECK}"
        return _NamedIngredient(None, (missing,), False)
    at, value = reference
    named = _referenced_ingredient(value, index, contained)
    return _NamedIngredient(
        named.read, tuple(f"{at} {line}" for line in named.reported), named.resolved
    )


def _contained_resources(resource: Json) -> list[Json]:
    contained = resource.get("contained")
    return (
        [item for item in contained if isinstance(item, Mapping)]
        if isinstance(contained, list)
        else []
    )


def _ingredient_concept(concept: Json) -> ReadConcept:
    """An ingredient's concept: its text, else a coding's display, else its first code."""
    return ReadConcept(concept_text(concept) or first_code(concept), codings_of(concept))


def _ingredient_item(ingredient: Json, where: str) -> tuple[Part | None, Part | None]:
    """An ingredient's concept or its reference, with its path: R4's `itemCodeableConcept` or
    `itemReference`, or R5's `item` CodeableReference (`item.concept`, else `item.reference`)."""
    if ingredient.get("itemCodeableConcept") is not None:
        return (f"{where}.itemCodeableConcept", ingredient["itemCodeableConcept"]), None
    if ingredient.get("itemReference") is not None:
        return None, (f"{where}.itemReference", ingredient["itemReference"])
    item = ingredient.get("item")
    if not isinstance(item, Mapping):
        return None, None
    if item.get("concept") is not None:
        return (f"{where}.item.concept", item["concept"]), None
    if item.get("reference") is not None:
        return None, (f"{where}.item.reference", item["reference"])
    return None, None


@dataclass(frozen=True)
class _NamedIngredient:
    """What an ingredient reference names, what is to be said of it, and whether it named
    something readable (else `read` is its display, if it has one)."""

    read: ReadConcept | None
    reported: tuple[str, ...] = ()
    resolved: bool = True


_CANNOT_CHECK: Final = "what the ingredient is cannot be checked (imported without it)"


def _referenced_ingredient(
    reference: object, index: Index | None, contained: Sequence[Json]
) -> _NamedIngredient:
    """The Medication or Substance an ingredient reference names, or why it names nothing
    readable."""
    if not isinstance(reference, Mapping):
        return _NamedIngredient(
            None, (f"is not a Reference (a JSON object): {_CANNOT_CHECK}",), False
        )
    target, display = reference.get("reference"), reference.get("display")
    display = (display.strip() or None) if isinstance(display, str) else None
    named = None if display is None else ReadConcept(display, ())
    if not isinstance(target, str) or not target.strip():
        return _NamedIngredient(named, (f"names no resource: {_CANNOT_CHECK}",), False)
    found = _ingredient_resource(target, index, contained)
    if found is None:
        if target.startswith("#"):
            missing = "is not a Medication or Substance contained"
        elif index is None:
            missing = "is named by an ingredient's own ingredient, which is not followed"
        else:
            missing = "is not a Medication or Substance among the imported resources"
        return _NamedIngredient(named, (f"{target} {missing}: {_CANNOT_CHECK}",), False)
    version = None if index is None else index.pinned_version_note(target)
    noted = () if version is None else (f"{target}: {version}",)
    if found.get("resourceType") == "Substance":
        read = _substance_concept(found, target)
        if read is None:
            unreadable = f"{target} is a Substance without a readable code: {_CANNOT_CHECK}"
            return _NamedIngredient(named, (*noted, unreadable), False)
        return _NamedIngredient(ReadConcept(read.label or display, read.codes), noted)
    drug = within(
        f"the ingredient Medication {target}",
        lambda: _drug_from_medication(found, display, None, ()),
        joiner=": ",
    )
    inner = tuple(f"-> {target}: {line}" for line in drug.reported)
    return _NamedIngredient(ReadConcept(drug.text, drug.codes), (*noted, *inner), drug.resolved)


def _ingredient_resource(
    target: str, index: Index | None, contained: Sequence[Json]
) -> Json | None:
    if target.startswith("#"):
        return next(
            (
                item
                for item in contained
                if text_among(item.get("resourceType"), _INGREDIENT_TYPES)
                and item.get("id") in (target[1:], target)
            ),
            None,
        )
    if index is None:
        return None
    return index.medication(target) or index.substance(target)


_INGREDIENT_TYPES: Final = frozenset({"Medication", "Substance"})


def _substance_concept(substance: Json, target: str) -> ReadConcept | None:
    """A Substance's code (R4 CodeableConcept, or R5 CodeableReference's `concept`) as an
    ingredient, None when it says nothing; a Substance that cannot be read as plain is an error
    for the records naming it."""
    refused = not_plain(substance)
    if refused is not None:
        raise refused.within(f"the ingredient Substance {target}", ": ")
    code = substance.get("code")
    if isinstance(code, Mapping) and isinstance(code.get("concept"), Mapping):
        code = code["concept"]
    read = optional_concept(code)
    return None if read is None or (read.label is None and not read.codes) else read


def _names(names: Iterable[str | None]) -> str | None:
    return " / ".join(name for name in names if name) or None


def _request_ends(resource: Json) -> tuple[datetime | None, ...]:
    """A request's therapy end (latest dosage bounds; none when a bound ends before it
    starts), then its dispense validity end."""
    validity_end = end_time_at(resource, "dispenseRequest", "validityPeriod", "end")
    latest = None if _inverted_bounds(resource) else _latest(_bounds_ends(resource))
    return (None if latest is None else latest.at, validity_end)


def _inverted_bounds(resource: Json) -> bool:
    """Whether a dosage's `boundsPeriod` ends before it starts (one that cannot be read is not:
    reading it reports it)."""
    dosages = resource.get("dosageInstruction")
    for dosage in dosages if isinstance(dosages, list) else []:
        if not isinstance(dosage, Mapping):
            continue
        try:
            end = end_time_at(dosage, "timing", "repeat", "boundsPeriod", "end")
            begins = time_at(dosage, "timing", "repeat", "boundsPeriod", "start")
        except Unmappable:
            continue
        if end is not None and begins is not None and end <= begins:
            return True
    return False


def _stop_time(
    resource: Json, started: datetime, last_resort: datetime, ends: Sequence[datetime | None]
) -> datetime:
    """When an ended therapy stopped: the first of `ends` after its start, capped at when the
    end was known (see the module docstring for the order of preference)."""
    last_updated = _after(time_at(resource, "meta", "lastUpdated"), started)
    end = next((time for time in (_after(end, started) for end in ends) if time), None)
    known_by = last_updated or _after(last_resort, started)
    if end is not None:
        return min(end, known_by) if known_by is not None else end
    return last_updated or started + JUST_AFTER


def _planned_therapy_end(resource: Json) -> PlannedEnd | None:
    """When a request still under way plans its therapy to end: the latest dosage bound, when
    every dosage instruction is bounded (one without an end goes on)."""
    ends = _bounds_ends(resource)
    if not ends or None in ends:
        return None
    return _latest(ends)


def _bounds_ends(resource: Json) -> list[PlannedEnd | None]:
    """Each dosage instruction's end: its `timing.repeat.boundsPeriod.end`, else its
    `boundsDuration` after the bounds' start or, without one, after the order (`authoredOn`);
    None for an instruction with neither (or a duration with no start to count from)."""
    dosages = resource.get("dosageInstruction")
    ordered = time_at(resource, "authoredOn")
    return [
        within(f"dosageInstruction[{n}]", partial(_bound_end, dosage, ordered, n))
        for n, dosage in enumerate(dosages if isinstance(dosages, list) else [])
        if isinstance(dosage, Mapping)
    ]


def _bound_end(dosage: Json, ordered: datetime | None, position: int) -> PlannedEnd | None:
    where = f"dosageInstruction[{position}].timing.repeat"
    end = end_time_at(dosage, "timing", "repeat", "boundsPeriod", "end")
    begins = time_at(dosage, "timing", "repeat", "boundsPeriod", "start")
    if end is not None and begins is not None and end <= begins:
        raise Unmappable(
            Problem.INVALID_VALUE,
            f"ends at {end.isoformat()}, not after its own start ({begins.isoformat()}): a "
            "Period whose end is before its start (a year typed wrong) gives no end, so the "
            "course is checked until it is stopped",
            field="timing.repeat.boundsPeriod.end",
        )
    if end is not None:
        return PlannedEnd(end, f"{where}.boundsPeriod.end")
    repeat = within("timing", lambda: object_at(object_at(dosage, "timing"), "repeat"))
    duration = within("timing.repeat", lambda: object_at(repeat, "boundsDuration"))
    if not duration:
        return None
    start = time_at(dosage, "timing", "repeat", "boundsPeriod", "start") or ordered
    if start is None:
        return None
    length = within("timing.repeat.boundsDuration", lambda: duration_of(duration))
    try:
        return PlannedEnd(start + length, f"{where}.boundsDuration")
    except OverflowError:
        message = "ends after the year 9999"
        field = "timing.repeat.boundsDuration"
        raise Unmappable(Problem.INVALID_VALUE, message, field=field) from None


def _latest(ends: Iterable[PlannedEnd | None]) -> PlannedEnd | None:
    return max((end for end in ends if end is not None), key=lambda end: end.at, default=None)


def _after(time: datetime | None, start: datetime) -> datetime | None:
    return time if time is not None and time > start else None


def stop_reason_of(source: Source, status: str) -> str:
    """The status, and the text of its statusReason (one concept in a request, a list in a
    statement: the first); a statusReason that cannot be read is left out (with its reason):
    it never costs the record, nor the stop it explains."""
    detail = optional_part(source, lambda: _status_reason(source.resource), None)
    return f"{status}: {detail}" if detail else status


def _status_reason(resource: Json) -> str | None:
    reason = resource.get("statusReason")
    if reason is None:
        return None
    if isinstance(reason, list):
        return next(
            (
                text
                for _, item in items_at(resource, "statusReason")
                if (text := within("statusReason[0]", partial(concept_text, item)))
            ),
            None,
        )
    return within("statusReason", lambda: concept_text(as_object(reason, "statusReason")))


_TAKING_STATUSES: Final = frozenset({"active", "intended", "on-hold", "unknown"})
_TAKEN_STATUSES: Final = frozenset({"completed", "stopped", IN_ERROR})
_STATEMENT_STATUSES: Final = _TAKING_STATUSES | _TAKEN_STATUSES | {"not-taken"}


def statement_events(source: Source, index: Index) -> list[Event]:
    resource = source.resource
    status = _statement_status(resource)
    subject_id = subject_of(resource, "subject", index)
    order = _statement_order(source, index, subject_id)
    if order is not None and status == IN_ERROR:
        raise Unsupported(
            f"MedicationStatement entered-in-error: MedicationRequest/{order} is unchanged"
        )
    course = Course(
        prescription_id=order or f"{source.resource_type}/{source.resource_id}",
        subject_id=subject_id,
        drug=taken_as_ordered(source, index, order, drug_of(resource, index)),
        dosage=first_dosage(source, "dosage"),
        starts=_statement_starts(source),
        in_error=status == IN_ERROR,
        stop=stopped_by(source, _statement_ends) if status in _TAKEN_STATUSES else None,
        stop_reason=stop_reason_of(source, status),
        planned_end=None
        if status in _TAKEN_STATUSES
        else optional_part(source, lambda: _statement_planned_end(resource), None)
        or order_planned_end(index, order),
    )
    return course_events(source, course)


def _statement_order(source: Source, index: Index, subject_id: str) -> str | None:
    """The order a statement reports on (`patients_order`): the one its `basedOn` names, else
    a MedicationRequest of the input set its `derivedFrom` names (FHIR: "the underlying
    MedicationRequest" the statement was derived from), read as `basedOn` is. Any other
    `derivedFrom` (an Observation, an order the input set does not hold, a reference that
    cannot be read) changes nothing: it is supporting information, not the order."""
    order = patients_order(source, "basedOn", index, subject_id)
    if order is not None or _held_order(source.resource, "derivedFrom", index) is None:
        return order
    return patients_order(source, "derivedFrom", index, subject_id)


def _held_order(resource: Json, field_name: str, index: Index) -> SourcedResource | None:
    """The MedicationRequest of the input set the reference field names, if any (none when
    the field cannot be read)."""
    try:
        named = based_on_request(resource, field_name, index)
    except Unmappable:
        return None
    return None if named is None else index.order(f"MedicationRequest/{named}")


def _statement_starts(source: Source) -> tuple[datetime | None, ...]:
    """When the use began, else when it was asserted. A use planned to begin after the
    statement was made (its `dateAsserted`, else its `meta.lastUpdated`, else the time of its
    Bundle or the import's fallback) is known, and checked, from when it was made, not from its
    future start: dated then, the gate would refuse it as occurring in the future, and the drug
    would never be checked."""
    resource = source.resource
    effective = time_at(resource, "effectiveDateTime") or time_at(
        resource, "effectivePeriod", "start"
    )
    asserted = time_at(resource, "dateAsserted")
    made = asserted or time_at(resource, "meta", "lastUpdated") or source.last_resort_time
    if effective is not None and effective > made:
        return (asserted,)
    return (effective, asserted)


def _statement_planned_end(resource: Json) -> PlannedEnd | None:
    end = end_time_at(resource, "effectivePeriod", "end")
    return None if end is None else PlannedEnd(end, "effectivePeriod.end")


def _statement_ends(resource: Json) -> tuple[datetime | None, ...]:
    return (end_time_at(resource, "effectivePeriod", "end"),)


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


_R5_RECORDED: Final = "recorded"
_R5_ADHERENCE: Final[Mapping[str, str]] = {
    "taking": "active",
    "taking-as-directed": "active",
    "taking-not-as-directed": "active",
    "on-hold": "on-hold",
    "on-hold-as-directed": "on-hold",
    "on-hold-not-as-directed": "on-hold",
    "stopped": "stopped",
    "stopped-as-directed": "stopped",
    "stopped-not-as-directed": "stopped",
    "not-taking": "not-taken",
    "refused": "not-taken",
    "unknown": "unknown",
}
"""R5's statement `adherence.code` (http://hl7.org/fhir/CodeSystem/medication-statement-adherence)
as the R4 status that says the same: R5 moved whether the drug is taken out of `status`, which
holds only recorded, draft or entered-in-error."""


def _statement_status(resource: Json) -> str:
    """The statement's status, or why it records no medication taken. An R5 statement
    (`recorded`) has the status its `adherence` says, else `unknown`, which is checked as taken:
    refused as no R4 status, the drug was never checked."""
    status = required_code(resource, "status", _STATEMENT_STATUSES | {_R5_RECORDED, "draft"})
    if status == "draft":
        raise Unsupported("MedicationStatement draft (R5): not yet a statement of what is taken")
    if status == _R5_RECORDED:
        status = _adherence_status(resource)
        if status == "not-taken":
            raise Unsupported(
                "MedicationStatement recorded (R5) with an adherence of not taking: the patient "
                "does not take the drug"
            )
    if status == "not-taken":
        raise Unsupported("MedicationStatement not-taken: the patient does not take the drug")
    negation = earlier_negation(resource)
    if negation is not None:
        raise Unsupported(
            f"MedicationStatement {negation}, an earlier release's not-taken: the patient does "
            "not take the drug"
        )
    if _states_no_medication(resource):
        raise Unsupported("MedicationStatement states that no medication is known (or no info)")
    if status not in _STATEMENT_STATUSES:
        codes = ", ".join(sorted(_STATEMENT_STATUSES))
        message = f"status {status!r} is not a statement status (one of {codes})"
        raise Unmappable(Problem.INVALID_VALUE, message)
    return status


def _adherence_status(resource: Json) -> str:
    """The R4 status an R5 statement's `adherence.code` says; `unknown` (taken) when it has
    none, or one that cannot be read or that R5 does not list."""
    adherence = resource.get("adherence")
    if not isinstance(adherence, Mapping):
        return "unknown"
    try:
        code = within("adherence", lambda: status_code(adherence, "code", _R5_ADHERENCE.keys()))
    except Unmappable:
        return "unknown"
    return _R5_ADHERENCE.get(code or "", "unknown")


def _states_no_medication(resource: Json) -> bool:
    """An IPS "no known medications" / "no information" statement (by code, or by its text
    alone), which names no drug."""
    concept = resource.get("medicationCodeableConcept")
    where = "medicationCodeableConcept"
    r5 = resource.get("medication")
    if concept is None and isinstance(r5, Mapping):
        concept, where = r5.get("concept"), "medication.concept"
    if not isinstance(concept, Mapping):
        return False
    codings = within(where, lambda: codings_of(concept))
    codes = {(SYSTEM_ALIASES.get(c.system, c.system), c.code) for c in codings}
    if codes & _NO_MEDICATION_CODES:
        return True
    text = concept_text(concept)
    return (
        not codes and text is not None and " ".join(text.casefold().split()) in _NO_MEDICATION_TEXTS
    )


def patients_order(source: Source, field_name: str, index: Index, subject_id: str) -> str | None:
    """The order a record reports on (`based_on_request`) when it is the record's patient's,
    read as the order that starts its therapy (`therapy_root`: a statement about a filler-order
    reports on the order it fulfils): an order of the input set for another patient is
    reported and not reported on (the record is a course of its own), so a record of one
    patient never changes another's order; nor is one the input set holds as entered in error
    (reported): it never was a prescription, so a drug given under it is a course of its own,
    not the restart of an order that ended."""
    order = based_on_request(source.resource, field_name, index)
    source.passed_over.extend(pinned_order_notes(source.resource, field_name, index))
    unresolved = None if order else _unresolved_identifiers(source.resource, field_name, index)
    if order is None and unresolved is not None:
        source.passed_over.append(unresolved)
    elif (
        order is None and field_name in source.resource and not _links(source.resource[field_name])
    ):
        written = json.dumps(source.resource[field_name], ensure_ascii=False)
        source.passed_over.append(
            f"{field_name} {quoted(written)} is no reference that can be read: the record is "
            "read as a course of its own"
        )
    held = None if order is None else index.order(f"MedicationRequest/{order}")
    if order is None or held is None or held.identity is None:
        return order
    try:
        ordered_for = subject_of(held.resource, "subject", index)
    except (Unmappable, Unsupported):
        return order
    if ordered_for != subject_id:
        source.passed_over.append(
            f"{field_name} names MedicationRequest/{order}, an order for another patient: the "
            "record is read as a course of its own, not as news of that order"
        )
        return None
    if _entered_in_error(held.resource):
        source.passed_over.append(
            f"{field_name} names MedicationRequest/{order}, an order entered in error (it never "
            "was a prescription): the record is read as a course of its own, not as news of "
            "that order"
        )
        return None
    not_prescribed = (
        None
        if source.resource.get("resourceType") == "MedicationRequest"
        else _why_not_prescribed(held.resource)
    )
    if not_prescribed is not None:
        source.passed_over.append(
            f"{field_name} names MedicationRequest/{order}, which is not imported as a "
            f"prescription ({not_prescribed}): the record is read as a course of its own, not "
            "as news of that order"
        )
        return None
    return therapy_root(order, held.resource, index, subject_id)


def _why_not_prescribed(request: Json) -> str | None:
    """Why a MedicationRequest is skipped by design (a proposal or option, a draft, a
    doNotPerform), else None (one that cannot be read is not: its own import reports it). A
    drug given or taken under such a request was never prescribed by it: reported under the
    request's id, the record would be news of a prescription that does not exist, and a single
    dose or fill would stay active with nothing to end it. (An order carrying out a proposal is
    the usual path and says nothing amiss: a request based on one is a therapy of its own, as
    `_therapy_of` reads it, without a line.)"""
    try:
        _prescription_status(request)
    except Unsupported as skipped:
        return skipped.reason
    except Unmappable:
        return None
    return None


def _entered_in_error(request: Json) -> bool:
    """Whether a MedicationRequest's status is entered-in-error (one that cannot be read is
    not: its own import reports it)."""
    try:
        return required_code(request, "status", _REQUEST_STATUSES) == IN_ERROR
    except Unmappable:
        return False


def _links(value: object) -> bool:
    """Whether a reference field holds a reference that can be read (`Type/id`, a URL ending
    in one, or a `urn:`), whatever it names (a CarePlan is a reference too)."""
    targets = [item.get("reference") for item in _reference_items(value)]
    return any(
        isinstance(target, str) and (target.startswith("urn:") or relative_reference(target))
        for target in targets
    )


def _reference_items(value: object) -> list[Json]:
    """The Reference objects of a field that holds one or a list of them (others left out)."""
    items = [value] if isinstance(value, Mapping) else value if isinstance(value, list) else []
    return [item for item in items if isinstance(item, Mapping)]


def pinned_order_notes(resource: Json, field_name: str, index: Index) -> list[str]:
    """A line for each reference in `field_name` pinned to a version of an order that is not
    the version the order is read as (`Index.pinned_order_note`)."""
    targets = (item.get("reference") for item in _reference_items(resource.get(field_name)))
    notes = (index.pinned_order_note(t) for t in targets if isinstance(t, str))
    return [f"{field_name}: {note}" for note in notes if note is not None]


def based_on_request(resource: Json, field_name: str, index: Index) -> str | None:
    """The id of the MedicationRequest a record reports on (a statement's `basedOn`, an
    administration's `request`, a dispense's `authorizingPrescription`), if it names one: the
    record is then news of that prescription, not a second one. A `urn:uuid:` reference is
    resolved against the input set's entries."""
    value = resource.get(field_name)
    references = (
        [(field_name, value)] if isinstance(value, Mapping) else items_at(resource, field_name)
    )
    for where, reference in references:
        target = string_at(reference, "reference", at=where)
        entry = index.order(target) if target is not None else None
        if entry is not None and entry.identity is not None:
            return entry.identity
        relative = relative_reference(target) if target is not None else None
        if relative is not None and relative.startswith("MedicationRequest/"):
            return relative.split("/", 1)[1]
    for _, reference in references:
        key = _identifier_key(reference)
        if key is not None and index.order_identifiers.get(key) is not None:
            return index.order_identifiers[key]
    return None


def _identifier_key(reference: Json) -> tuple[str, str] | None:
    """The (system, value) of a Reference that names its target by identifier only (a
    logical reference: no `reference`), if it gives both."""
    identifier = reference.get("identifier")
    if reference.get("reference") is not None or not isinstance(identifier, Mapping):
        return None
    system, value = identifier.get("system"), identifier.get("value")
    return (system, value) if isinstance(system, str) and isinstance(value, str) else None


def _unresolved_identifiers(resource: Json, field_name: str, index: Index) -> str | None:
    """Why the orders `field_name` names by identifier only are none of the input set's: one
    that no MedicationRequest carries, or more than one does."""
    for reference in _reference_items(resource.get(field_name)):
        key = _identifier_key(reference)
        if key is None:
            continue
        named = f"{key[0]}|{key[1]}"
        if key in index.order_identifiers:
            return (
                f"{field_name} names its order by identifier {named}, which more than one "
                "MedicationRequest of the input set carries: which is meant cannot be told, so "
                "the record is read as a course of its own"
            )
        return (
            f"{field_name} names its order by identifier {named}, which no MedicationRequest "
            "of the input set carries: the record is read as a course of its own (send the "
            "order with it, or name it MedicationRequest/<id>)"
        )
    return None
