"""FHIR R4 JSON resources -> UaC events. Pure: no I/O, no clock, no randomness.

Input is JSON text (a Bundle of any type, a single resource, or bulk-export NDJSON lines),
parsed into `SourcedResource`s that remember where they came from (`file.ndjson:12`,
`bundle.json#entry[3]`). `import_fhir` maps them all at once, so a `Medication/x` reference is
resolved against every resource of the input set, whichever file it came in. Every resource ends
in exactly one place: events, an explained skip, or an error. An optional part that cannot be
read (a criticality "severe", a category "drug", a reaction, note or dosage sent as an object, a
reaction severity outside its value set, a status reason, route or dose quantity of the wrong
type) is left out and reported (`FhirImport.passed_over`): it never costs the allergy, the
order, the stop or the drug given it belongs to. What decides whether a record holds (its
statuses, its allergen or drug, its patient, its times) is never left out: unreadable, it is an
error. Errors and left-out parts name the part by its path in the resource
(`clinicalStatus.coding[0].code is not a string`, `the Medication Medication/m1:
code.coding[0].system is not a string`).

Mapping decisions
-----------------
Identity: a resource's `id`; a resource without one (a new resource in a document or
transaction Bundle) is identified by its entry's fullUrl: the uuid of `urn:uuid:<uuid>`, the oid
of `urn:oid:<oid>`, or `<id>` of a URL ending in `<resourceType>/<id>`. With neither, the
resource is an error (no stable event id is possible). An `id` that differs from the one its
entry's fullUrl (ending in `<resourceType>/<id>`) or `PUT <resourceType>/<id>` request names is
an error, imported under neither id, and so is a reference to that fullUrl.

Envelope: `origin=imported`, `source_ref=ResourceType/id`, `confidence=1.0`, `purpose=care`,
`scope=subject`, tenant and actor from the caller; allergies and medications are
`special_category`, the home-country fact is `normal`. `subject_id` is the FHIR Patient id (from
`Patient/<id>`, an absolute `.../Patient/<id>[/_history/n]` URL, or a `urn:uuid:` (`urn:oid:`)
that is the `fullUrl` of a Patient entry of the input set, in any file of it, or a logical
reference by `identifier` matched to the one Patient of the input set that carries it; a urn
that is no Patient entry's fullUrl (FHIR resolves a urn only as an entry's fullUrl), or an
identifier that no Patient carries, or two do, is an error), with
`%`, `:` and white space percent-encoded (a conditional `system|value` identity can hold them);
a resource `id` or a `Patient/<id>` reference outside the FHIR id shape (1 to 64 letters,
digits, `-`, `.`) is an error; a
`urn:uuid:` is compared in lower case (RFC 4122), so an upper-case copy names the same patient.
A patient merged into another at the source (`Patient.link` `replaced-by` in its Patient, or
`replaces` in the Patient replacing it) is that other patient: the records naming it, by any of
the references above, are filed under the patient replacing it, at the end of a chain
(old -> mid -> new), and one line per replaced patient says so and names them; its own Patient
is skipped (no longer used). A replacement that cannot be followed (a cycle, two patients
replacing one, a link naming no Patient, a urn of no entry or a patient on another server)
makes the records naming that patient errors, never filed under a patient guessed; `refer` and
`seealso` links merge nothing (`schemas.fhir.patient_links`).
Ids are unique per server only: an entry's fullUrl ending in `<type>/<id>` gives the
resource's server (its scheme, the host's case and the scheme's default port are not
compared), its relative references resolve on that server first, and a record whose
type and id (or whose patient's id) the input set holds from two servers is an error, never
merged with the other (`schemas.fhir.sources.Index.across_servers`).
A reference to a Medication or MedicationRequest resolves to the newest version the input set
holds (`meta.lastUpdated`, then a numeric `meta.versionId`); two different resources under one
reference that no version order separates, or under one `meta.versionId` (a server gives each
change a new one: records of two sources), are an error for the records naming them. A
reference to a Medication or Substance pinned to a version (`/_history/<versionId>`) names that
version when the set holds it, else the newest, with a line that says so; one pinned to a
version of a MedicationRequest is read as the order's newest version (its patient, status and
end), with a line when that is not the version named.

Times: `occurred_at` is the first present of
  - AllergyIntolerance: recordedDate, onsetDateTime, onsetPeriod.start, meta.lastUpdated; for
    a record that no longer holds (refuted, entered-in-error, inactive, resolved) meta.lastUpdated
    comes first, then the time of the Bundle it came in, because recordedDate is when the
    allergy was first recorded, not when it was refuted (so a refuting re-import resolves
    alerts at the time of the refutation, also when it is sent without meta)
  - MedicationRequest: authoredOn, meta.lastUpdated
  - MedicationStatement: effectiveDateTime, effectivePeriod.start, dateAsserted, meta.lastUpdated
    (a use planned to begin after the statement was made, its dateAsserted, else its
    meta.lastUpdated, else the time of last resort below, is dated when it was made, skipping
    its future start: an intended statement is known, and checked, from then, never refused
    by the gate as occurring in the future)
  - Patient (home country): the address's period.start, meta.lastUpdated
and, when none is present, the time of the Bundle the resource came in (its `timestamp`, else
its meta.lastUpdated; an enclosing Bundle's for a nested one), else the caller's
`fallback_time` (a clock is never read). `recorded_at` is
meta.lastUpdated, else `occurred_at`. A FHIR date without a time (`2015-01-15`, `2015-01`,
`2015`) is midnight UTC of its first day. A time without a zone is invalid FHIR and an error.

Event ids: uuid5 of (tenant, resource type, resource id, resource version, event kind), where the
version is meta.versionId, else meta.lastUpdated, else empty (in a history Bundle, an entry's
`response.etag` and `response.lastModified` stand in for the meta they repeat). The same input
always gives the same ids (the gate drops the repeats); an updated resource (new version) gives
new events, and the fold keeps the version recorded last (meta.lastUpdated, with a numeric
meta.versionId placed that many milliseconds after it, so that versions without a time of
their own or with one time are ordered by number) even where an older version is valid later
(`projections.views.older_version`: the versions of one resource share its `source_ref`).
When the Bundle's time or `fallback_time` was used it is part of the version: a document
imported twice gives the same ids, two documents (or two imports with different fallbacks) do
not reuse one id for two different events. A resource
without meta.lastUpdated in a Bundle with a time is recorded at the Bundle's time (part of its
version too), so of two transaction messages about one record the later one holds; a resource
without an id is identified by the identifier a conditional update or create names it by, else
by its entry's fullUrl (`schemas.fhir.inputs.SourcedResource.identity`).

AllergyIntolerance -> AllergyRecorded: id, substance (code.text, else the first coding display,
else its code; without a code, R4's `code` being 0..1, the first reaction.substance; the
substances the reactions name, R4's specific agents, are added in parentheses, "Drug allergy
(amoxicillin)"), codes (the code's and the reaction substances'), type (R4's code, or R5's
CodeableConcept), categories (one code sent alone is read as a list of one), criticality,
clinicalStatus, notes, reactions (the manifestations of one reaction, R4 CodeableConcepts or R5
CodeableReferences, joined with "; ", its severity). verificationStatus `presumed` (R5) counts
as unconfirmed. An absent verificationStatus (or one with neither a coding nor a text, a
data-absent-reason alone) says nothing: it is not `unconfirmed`, which would lower the alert of
a low-criticality allergy nobody called uncertain, and the contract has no "not stated", so
it is the contract's default for a producer that states none, `confirmed`, and a line says the
source gave none. Of a status
with several codings (a local one next to the HL7 one) the first whose code is an allowed one is
read, else the code its text spells (a local code "A" with the text "Active"), else the code
one of its codes spells in other letters (`Active`, `ENTERED_IN_ERROR`). A status with no
coded value but a text that spells a code (`"Confirmed"`, `"Entered in error"`), or a bare code
where R4 wants a concept (`"clinicalStatus": "active"`, the DSTU2/STU3 form), is read as that
code; any other text is an error naming the allowed codes. "No known
allergy" records (SNOMED 716186003 and 160244002 NKA, 409137002 NKDA, 429625007 NKFA, 428607008
no known environmental allergy, 716184000 no known latex allergy, the IPS absent-unknown codes,
or words such as "NKDA", `schemas.allergy_statements`, in the text and displays of a code none of whose codings names a
substance in a standard terminology) become `negated=True` with the categories the statement
covers, so they never become an allergy, whatever their verification status. IPS
`no-allergy-info` is skipped: "unknown" is neither an allergy nor a negation.

MedicationRequest -> MedicationPrescribed: id, drug text (the Medication's code.text, else its
first coding display, else its ingredient names, else the reference's display, else a code),
codes (the Medication's and its ingredients': a local formulary code with RxNorm-coded
ingredients is known by them), dose text (dosageInstruction[0].text, else its first
doseAndRate.doseQuantity, "500 mg"), route and notes. The
Medication is `medicationCodeableConcept`, a contained `#id`, or a `Medication/id` / `fullUrl`
found anywhere in the input set; a missing one is an error. An ingredient is its
`itemCodeableConcept` (R5 `item.concept`) or the Medication or Substance its `itemReference` (R5
`item.reference`) names, contained or in the input set; one that names nothing readable, or
cannot be read at all, is reported and marks the drug's text "(ingredient not resolved)", so
the drug is judged `unverified` whatever the Medication's own code says. A dosage instruction ends at its
`timing.repeat.boundsPeriod.end`, else its `boundsDuration` (a UCUM time: s, min, h, d, wk, mo,
a; or its unit text, "days") after the bounds' start or the order's `authoredOn`. An end (of
boundsPeriod, effectivePeriod, validityPeriod) written as a year, month or day includes all of
it, as FHIR reads a Period: `2021-03` ends at 2021-04-01T00:00 UTC. A request
still under way (active, on-hold, unknown) whose every dosage instruction ends plans its therapy
to end at the latest of them: that is the prescription's `valid_until`, so rules and reads stop
using it then (a dosage without an end goes on: no `valid_until`; an end not after the order's
start is reported and left out, like an end that cannot be read). R5's `medication`
CodeableReference is read as its `concept`, else its `reference` (next to an R4 medication[x],
an error). Intents order, original-order,
reflex-order, filler-order, instance-order and plan are prescriptions; proposal and option are
skipped (a suggestion is not a prescription), as are `draft` requests and `doNotPerform` ones
(an instruction NOT to give the drug). Statuses stopped, completed, cancelled and
entered-in-error also yield a MedicationStopped (reason = the status, plus statusReason text),
dated at the end of therapy (latest dosage end), else the dispense
validityPeriod.end, capped at meta.lastUpdated, or without it at the Bundle's time or the
fallback time (the terminal status was known by then), else meta.lastUpdated; a candidate counts
only when it is after the order. With none, the stop time is unknown and the stop is placed 1 ms
after the order: the order is checked once (its alerts are raised and then resolved), and it
does not stay active for ever. An entered-in-error request yields the MedicationStopped only: it
never was a prescription, so it raises no alert, and it ends an earlier version of the same
request (same id) if one was imported. A request that took effect (active, on-hold, unknown,
completed, stopped) and names a `priorPrescription` replaces that order: a MedicationStopped of
it (reason `replaced by MedicationRequest/<id>`) when the new one starts, or just after the
replaced order's own start when the input set dates that later; a replaced order the input set
holds as ended keeps its own stop, and an order whose newest version in the input set is
cancelled or entered-in-error replaced nothing.

One therapy, several requests: a request whose `basedOn` names a MedicationRequest of the input
set for the same patient that is itself a prescription (a filler-order fulfilling an order, an
instance-order being one occurrence of it, an order carrying out a plan) is part of that
order's therapy, followed to the first request based on none (`medications.therapy_root`). Its
events carry that order's prescription id, as a statement based on an order does: a
MedicationPrescribed with the drug, dose and route it names and the therapy's planned end
(the order's `valid_until`), never a stop, whatever its status (a completed instance-order is
one occurrence done, the therapy goes on as its order says; the order's stop, or that of an
order replacing it or one of its requests, ends the therapy). A fulfilment cancelled or
entered in error is skipped (the therapy is unchanged), and so is one written after the therapy
ended (it would restart it). So one therapy is one course: checked once, never a duplicate of
itself. A `basedOn` naming an order the input set does not hold, one for another patient
(reported), one entered in error (reported), one that is no prescription, or a chain that loops
(reported) leaves the request a therapy of its own. The records naming a request of a therapy
(a statement's `basedOn`, an administration's `request`, a dispense's
`authorizingPrescription`, a `priorPrescription`) report on, or replace, the therapy.

MedicationStatement -> MedicationPrescribed: the patient takes (status active, intended,
on-hold, unknown) or took (completed, stopped) the drug, mapped like a request (medication,
dosage[0] text or dose quantity, route, notes). Its prescription id is the MedicationRequest it
is `basedOn` (so a statement about an imported order updates that order instead of duplicating
it), else the MedicationRequest of the input set its `derivedFrom` names (FHIR: "the
underlying MedicationRequest"; any other `derivedFrom` is supporting information and changes
nothing), else `MedicationStatement/<id>`. A statement reporting on an order of the input set
that names another drug (no coding shared, other words: the mapping knows no drugs) does not
replace the order's drug, as a substitute given does: the course is checked as both ("ibuprofen
400 mg; amoxicillin 500 mg capsule", the codes of both), and a line says so
(`medications.taken_as_ordered`). `occurred_at`: effectiveDateTime,
effectivePeriod.start, dateAsserted, meta.lastUpdated (a use planned to begin after the
statement was made is dated when it was made, see Times). A statement still taken with an
effectivePeriod.end is valid until then (an end not after its start is reported and left out). Completed and stopped
statements also yield a MedicationStopped at effectivePeriod.end (capped and defaulted as for
requests); entered-in-error yields only the stop, except that a statement `basedOn` an order
leaves the order alone and is skipped (the statement was wrong, not the order, whose alerts
stay open); not-taken is skipped (the patient does not take the drug), and so is an IPS "no
known medications" or "no medication information" statement (absent-unknown code, or that text
without a code): it names no drug.

A later version of a resource that names another patient than the version before it (a record
filed under the wrong patient, corrected at the source) ends the claim for the earlier patient
at the later version's time: the allergy is entered-in-error, the prescription stopped
(`schemas.fhir.moves`; within one input set). So does a later version whose subject is a Group;
a later version skipped for another reason (doNotPerform, a proposal, a draft) leaves the
earlier one in force, and a line says so.

OperationOutcome (a bulk export's error file): an `error` or `fatal` issue is an import error
`source_reported_error` quoting it (the export is incomplete), else a skip quoting the issues
(`schemas.fhir.outcomes`). A batch or transaction response entry whose request failed (its
`response.outcome`, else its 4xx/5xx status) is read as that outcome. A Bundle entry that
deletes (`DELETE`) or patches (`PATCH`) a resource that becomes claims is an error
(`deletion_not_imported`, `patch_not_imported`): neither change is applied, and a resource a
deleting entry carries is never read as a version (of another type, it is skipped).

Drugs given. A record that names its order (a MedicationAdministration's `request`, a
MedicationDispense's `authorizingPrescription`) is news of that prescription, like a statement
`basedOn` it: a MedicationPrescribed with the order's id and the drug as given (a substitute
replaces the ordered drug, and a line names both), never a stop (one dose given or one fill dispensed does not end the
order; an entered-in-error record leaves the order alone and is skipped). When the order is in
the input set (by `MedicationRequest/<id>` or its entry's `urn:uuid`) and its own import, or that
of an order of the input set replacing it, ends it before the record, the record is skipped:
it would restart the order with no end, and the order was checked while it ran. A record (or
a statement) naming an order the input set holds for another patient is reported and read as
if it named none: a record of one patient never changes another's order; so is one naming an
order the input set holds as entered in error (it never was a prescription, so the drug given
is a course of its own, not the restart of an order that ended). A record that
names no order is a course of its own, `<ResourceType>/<id>`:
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

Patient -> FactAsserted(home_country, ISO 3166-1 alpha-2) from the address the patient lives
at when the record was made (its recorded time: meta.lastUpdated, else the Bundle's time, else
the fallback): of the addresses with a country, never an `old` or `temp` one, nor one whose
`period.start` comes after that time (an announced move is not yet the home); one in force then
(no `period.end`, or one after that time) before an ended one; then `home`, then no (or another)
use, then `work`, then `billing`; then the first in the list. Any ISO alpha-2 code, and a small
table of alpha-3 codes and English names; anything else is skipped with the value in the reason, never guessed.

Not plain records: a claim resource (or a Medication it names) with a `modifierExtension`
anywhere or `implicitRules` is an error `modifier_not_understood`, one tagged `SUBSETTED` an
error `subsetted_resource` (`schemas.fhir.modifiers`): neither is read as if it were plain. So
is a claim, Medication or Substance whose Bundle entry (or the entry's request, response or
search) carries a `modifierExtension`, or whose Bundle carries `implicitRules`
(`schemas.fhir.inputs.REFUSED_UNDER_MODIFIER`): it is not read at all.

Medication -> no event of its own (it only resolves references); every other FHIR R4 resource
type is skipped as unsupported, and so is a type a later release added (R4B, R5: `Permission`,
`NutritionIntake`; `schemas.fhir.resource_types`), while a `resourceType` that names no FHIR
resource type (a typo `AllergyIntolerence`, DSTU2's `MedicationOrder`, `Foo`) is an error
`not_a_resource` that suggests the R4 type it most likely means (the same letters in another
case or with spaces, or at most 2 letters added, dropped or changed): skipped, a misspelt
allergy would be lost while the import says it succeeded. Missing required fields, malformed
JSON and unresolved references are errors with their origin.

The concepts that name each imported record's drug or allergen (`medicationCodeableConcept`, a
Medication's code and its ingredients' concepts, an allergy's code and reaction substances, a
vaccineCode) are returned with their words and codings (`FhirImport.concepts`), so that where
drug knowledge is at hand a concept whose words and codes name different substances is
reported (`streams.fhir_files.names_differing`); the mapping itself knows no drugs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from pydantic import ValidationError

from schemas.countries import HOME_COUNTRY
from schemas.events import Event
from schemas.fhir.allergies import allergy_events
from schemas.fhir.given import administration_events, dispense_events, immunization_events
from schemas.fhir.inputs import (
    CLAIM_TYPES,
    FhirError,
    ParsedInput,
    PassedOver,
    Skipped,
    SourcedResource,
    combine,
    missing_pages,
    parse_json_document,
    parse_ndjson,
    unordered_versions,
    unpack,
    version_id,
)
from schemas.fhir.json_access import (
    Json,
    NamedConcept,
    NotForAPatient,
    Problem,
    Unmappable,
    Unsupported,
    a_resource_of_type,
    optional_concept,
    parse_fhir_datetime,
    unreadable_words,
)
from schemas.fhir.lookalikes import lookalike_notes
from schemas.fhir.medications import request_events, statement_events
from schemas.fhir.modifiers import not_plain
from schemas.fhir.moves import SkippedVersion, left_in_force, moved_away
from schemas.fhir.outcomes import OPERATION_OUTCOME, reported
from schemas.fhir.patient_links import (
    case_variant_notices,
    linked_patients,
    named_subject,
    replacement_notices,
    shared_identifier_notices,
)
from schemas.fhir.patients import country_code, patient_events
from schemas.fhir.resource_types import (
    LATER_RESOURCE_TYPES,
    R4_RESOURCE_TYPES,
    RENAMED_TYPES,
    folded,
    meant_type,
)
from schemas.fhir.sources import (
    FHIR_ID,
    ID_RULE,
    ImportContext,
    Index,
    Mapper,
    Source,
    fhir_event_id,
    patient_identity_notes,
    quoted,
    recorded_time,
)
from schemas.json_lines import validation_summary

__all__ = [
    "HOME_COUNTRY",
    "FhirError",
    "FhirImport",
    "ImportContext",
    "NamedConcept",
    "ParsedInput",
    "PassedOver",
    "Problem",
    "RecordConcept",
    "Skipped",
    "SourcedResource",
    "combine",
    "country_code",
    "fhir_event_id",
    "import_fhir",
    "parse_fhir_datetime",
    "parse_json_document",
    "parse_ndjson",
    "unpack",
    "without_unmapped",
]


@dataclass(frozen=True)
class RecordConcept:
    """A concept that names the drug or allergen of an imported record, and the record."""

    origin: str
    source_ref: str
    """The record, `ResourceType/id`."""
    concept: NamedConcept


@dataclass(frozen=True)
class FhirImport:
    """Every input accounted for: `(origin, event)` pairs, explained skips and errors."""

    events: list[tuple[str, Event]] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    errors: list[FhirError] = field(default_factory=list)
    passed_over: list[PassedOver] = field(default_factory=list)
    concepts: list[RecordConcept] = field(default_factory=list)
    """The concepts naming the drugs and allergens of the records imported, as read (the
    words and codes of each, for a check that they name the same substance)."""

    def skip_counts(self) -> dict[str, int]:
        """How many inputs were skipped for each reason, most frequent first."""
        return dict(Counter(skip.reason for skip in self.skipped).most_common())


_AT_THE_EDGE_OF_TIME = (
    "a date is at the edge of the range of dates (year 1 or 9999): the times derived from it "
    "(a stop just after a start) cannot be computed"
)


def import_fhir(parsed: ParsedInput, context: ImportContext) -> FhirImport:
    """Map every resource of the input set to events, skips or errors (in input order)."""
    plain = Index.of(parsed.resources)
    index = plain.linked(linked_patients(plain, parsed.resources))
    replacing = {replacement.chain[-1] for replacement in index.links.replaced.values()}
    filed: dict[str, list[str]] = {}
    skipped = [*parsed.skipped, *missing_pages(parsed.pages)]
    result = FhirImport(skipped=skipped, errors=list(parsed.errors))
    unordered = unordered_versions(parsed.resources)
    skipped_versions: list[SkippedVersion] = []
    for position, item in enumerate(parsed.resources):
        resource_type, resource_id = item.resource_type, item.identity
        label = f"{resource_type}/{resource_id}" if resource_id else resource_type
        passed_over: list[str] = []
        concepts: list[NamedConcept] = []
        if position in unordered:
            error = FhirError(item.origin, Problem.INVALID_VALUE.value, unordered[position])
            result.errors.append(error)
            continue
        try:
            events = _events_of(item, index, context, passed_over, concepts)
        except Unsupported as skip:
            result.skipped.append(Skipped(item.origin, resource_type, resource_id, skip.reason))
            if resource_type in _VERSIONED_CLAIMS and resource_id:
                skipped_versions.append(
                    SkippedVersion(
                        item.origin,
                        label,
                        recorded_time(item, context),
                        version_id(item.resource),
                        skip.reason,
                        isinstance(skip, NotForAPatient),
                    )
                )
        except Unmappable as error:
            message = f"{label}: {error.message}"
            result.errors.append(FhirError(item.origin, error.problem.value, message))
        except ValidationError as error:
            message = f"{label}: {validation_summary(error)}"
            result.errors.append(FhirError(item.origin, Problem.INVALID_RECORD.value, message))
        except OverflowError:
            message = f"{label}: {_AT_THE_EDGE_OF_TIME}"
            result.errors.append(FhirError(item.origin, Problem.INVALID_VALUE.value, message))
        else:
            result.events.extend((item.origin, event) for event in events)
            passed_over.extend(
                (*patient_identity_notes(item.resource, index), *lookalike_notes(concepts, events))
            )
            result.passed_over.extend(
                PassedOver(item.origin, label, detail) for detail in passed_over
            )
            result.concepts.extend(RecordConcept(item.origin, label, read) for read in concepts)
            replaced = _replaced_patient_named(item, events, index, replacing)
            if replaced is not None:
                filed.setdefault(replaced, []).append(label)
        if resource_type in MAPPED_TYPES:
            result.passed_over.extend(
                PassedOver(item.origin, label, detail)
                for detail in (
                    *_records_contained(item.resource),
                    *unreadable_words(item.resource),
                )
            )
    result.passed_over.extend(replacement_notices(index.links, filed))
    result.passed_over.extend(shared_identifier_notices(index, parsed.resources))
    result.passed_over.extend(case_variant_notices(parsed.resources, result.events))
    result.events.extend(moved_away(result.events))
    ended, said = left_in_force(result.events, skipped_versions)
    result.events.extend(ended)
    result.passed_over.extend(PassedOver(*line) for line in said)
    return result


def _replaced_patient_named(
    item: SourcedResource, events: list[Event], index: Index, replacing: set[str]
) -> str | None:
    """The subject id of the patient replaced at the source that a record names, when its
    events were filed under a patient `replacing` one."""
    if item.resource_type == "Patient" or not any(e.subject_id in replacing for e in events):
        return None
    named = named_subject(item.resource, index.seen_from(item.server_base))
    return named if named in index.links.replaced else None


_VERSIONED_CLAIMS: Final = CLAIM_TYPES - {"Patient"}
"""The claim resources a later version of which, skipped, would leave an earlier one in force
(a Patient's home country is a fact of its own)."""


def without_unmapped(parsed: ParsedInput) -> ParsedInput:
    """`parsed` with each resource of a type no mapper reads (Encounter, Observation...) turned
    into its explained skip: the rest of a bulk export need not stay in memory until mapping."""
    kept: list[SourcedResource] = []
    skipped = list(parsed.skipped)
    for item in parsed.resources:
        if item.resource_type in READ_TYPES or not _fhir_type(item.resource_type):
            kept.append(item)
        else:
            reason = _unsupported(item)
            skipped.append(Skipped(item.origin, item.resource_type, item.identity, reason))
    return ParsedInput(tuple(kept), tuple(skipped), parsed.errors, parsed.pages)


_ALLERGY_WORDING: Final = re.compile(r"\ballerg(?:y|ies|ic)\s+to\b|\ballergy\s*(?:\(|$)", re.I)
"""How a record names an allergy to something ("Allergy to penicillin (finding)", "Latex
allergy"), not an allergic disease ("Seasonal allergic rhinitis")."""


def _allergy_inside(resource: Json) -> str:
    """What a skipped resource says of an allergy or a drug, so it is not lost among the
    skips: a Condition that records an allergy ("Allergy to penicillin" on a problem list), or
    a record held inside (`_held_record`: an IPS medication List holding its statements)."""
    if resource.get("resourceType") == "Condition":
        concept = optional_concept(resource.get("code"))
        label = None if concept is None else concept.label
        if label is not None and _ALLERGY_WORDING.search(label.strip()):
            return (
                f": it records an allergy ({label!r}), which is read from an AllergyIntolerance "
                "only; send it as one"
            )
    held = _held_record(resource)
    if held is not None:
        path, kind = held
        return (
            f": it holds {a_resource_of_type(kind)} (at {path}), which is not read from inside "
            "another resource; send it as a resource of its own"
        )
    return ""


_HELD_RECORDS: Final = CLAIM_TYPES - {"Patient"}
"""The records a skipped resource is named for holding: an allergy, an order, a statement, an
administration, a dispense or an immunization."""


def _held_record(resource: Json) -> tuple[str, str] | None:
    """The path and type of the first allergy or drug record held inside `resource`
    (`contained[0]`, `parameter[0].resource.entry[1].resource`), at any depth of contained
    resources, a Parameters' parameters and their parts, and a Bundle's entries; None when it
    holds none. What is not an object is passed over (a skipped resource is not read, so its
    shape is no error). Iterative: a resource may be nested as deep as the JSON reader
    allows."""
    stack: list[tuple[str, Json]] = [("", resource)]
    while stack:
        path, holder = stack.pop()
        kind = holder.get("resourceType")
        if path and isinstance(kind, str) and kind in _HELD_RECORDS:
            return path, kind
        stack.extend(reversed(_held_by(holder, path)))
    return None


def _held_by(holder: Json, path: str) -> list[tuple[str, Json]]:
    """The objects `holder` holds a resource in or as (its `resource`, the items of its
    `contained`, `entry`, `parameter` and `part`; one object where a list belongs is read as
    one item), with their paths, in document order."""
    at = f"{path}." if path else ""
    inner = holder.get("resource")
    held = [(f"{at}resource", inner)] if isinstance(inner, Mapping) else []
    for key in ("contained", "entry", "parameter", "part"):
        items = holder.get(key)
        if isinstance(items, Mapping):
            held.append((f"{at}{key}", items))
        elif isinstance(items, list):
            held += [
                (f"{at}{key}[{n}]", item)
                for n, item in enumerate(items)
                if isinstance(item, Mapping)
            ]
    return held


def _records_contained(resource: Json) -> list[str]:
    """What a resource that is read says of the records it holds in `contained` (an allergy
    inside a MedicationRequest): only a Medication is read from there, so each of them is
    named, never dropped without a word; and a `contained` that is no list of objects, which
    is read without its items that are none."""
    contained = resource.get("contained")
    malformed = contained is not None and _objects_among(resource, "contained") != contained
    return [
        f"it holds {a_resource_of_type(kind)} (#{held.get('id', '?')}) in contained, which is not read "
        "from inside another resource; send it as a resource of its own"
        for held in _objects_among(resource, "contained")
        if isinstance(kind := held.get("resourceType"), str) and kind in CLAIM_TYPES
    ] + (
        ["contained is not a list of objects: what is not an object in it is not read"]
        if malformed
        else []
    )


def _objects_among(resource: Json, key: str) -> list[Json]:
    """The objects in the list `key` of a resource, for what must be said of it even when the
    list is malformed (none when it is no list)."""
    values = resource.get(key)
    return (
        [value for value in values if isinstance(value, dict)] if isinstance(values, list) else []
    )


def _fhir_type(resource_type: str) -> bool:
    return resource_type in R4_RESOURCE_TYPES or resource_type in LATER_RESOURCE_TYPES


def _unsupported(item: SourcedResource) -> str:
    """Why a resource of a FHIR type that no mapper reads is skipped, and what it says of an
    allergy (`_allergy_inside`)."""
    resource_type, inside = item.resource_type, _allergy_inside(item.resource)
    if resource_type in R4_RESOURCE_TYPES:
        return f"unsupported resource type {resource_type}{inside}"
    return f"unsupported resource type {resource_type} (of a later FHIR release than R4){inside}"


def _not_a_resource_type(resource_type: str) -> Unmappable:
    """The error for a `resourceType` that names no FHIR resource type (a typo, a name of an
    earlier release): skipped as unsupported, an allergy spelt wrong would be lost while the
    import says it succeeded."""
    meant = meant_type(resource_type, READ_TYPES | {"Bundle"})
    if resource_type in RENAMED_TYPES:
        hint = f" (a DSTU2 name: R4 calls it {meant})"
    elif meant is not None and folded(meant) == folded(resource_type):
        hint = f" (did you mean {meant}? resource types are case-sensitive and have no spaces)"
    else:
        hint = "" if meant is None else f" (did you mean {meant}?)"
    return Unmappable(
        Problem.NOT_A_RESOURCE,
        f"resourceType {quoted(resource_type)} is not a FHIR R4 resource type{hint}",
    )


def _events_of(
    item: SourcedResource,
    index: Index,
    context: ImportContext,
    passed_over: list[str],
    concepts: list[NamedConcept],
) -> list[Event]:
    if item.resource_type == OPERATION_OUTCOME:
        raise reported(item.resource)
    mapper = _MAPPERS.get(item.resource_type)
    if mapper is None and not _fhir_type(item.resource_type):
        raise _not_a_resource_type(item.resource_type)
    if mapper is None:
        raise Unsupported(_unsupported(item))
    if item.identity is None and not isinstance(item.resource.get("id"), str | None):
        raise Unmappable(Problem.INVALID_VALUE, f"id is not a string: {item.resource['id']!r}")
    if item.identity is None:
        raise Unmappable(
            Problem.MISSING_FIELD,
            "id is missing (and no urn:uuid or resource URL fullUrl): no stable event id is possible",
        )
    own_id = item.resource.get("id")
    if isinstance(own_id, str) and not FHIR_ID.fullmatch(own_id):
        raise Unmappable(
            Problem.INVALID_VALUE, f"id {quoted(own_id)} is not a valid id ({ID_RULE})"
        )
    if item.identity_conflict is not None:
        raise Unmappable(Problem.INVALID_VALUE, item.identity_conflict)
    servers = index.across_servers.get(f"{item.resource_type}/{item.identity}")
    if item.resource_type in CLAIM_TYPES and servers is not None:
        raise Unmappable(
            Problem.INVALID_VALUE,
            f"{item.resource_type}/{item.identity} is in the input set from {len(servers)} "
            f"servers ({', '.join(servers)}, as resources or references): ids are unique per "
            "server only, so their records would be merged as one",
        )
    refused = not_plain(item.resource) if item.resource_type in CLAIM_TYPES else None
    if refused is not None:
        raise refused
    source = Source(
        item.resource, item.identity, context, item.document_time, passed_over, concepts
    )
    return mapper(source, index.seen_from(item.server_base))


def _medication_definition(_source: Source, _index: Index) -> list[Event]:
    raise Unsupported("Medication: no event of its own (it resolves medication references)")


def _substance_definition(_source: Source, _index: Index) -> list[Event]:
    raise Unsupported("Substance: no event of its own (it resolves ingredient references)")


_MAPPERS: Final[dict[str, Mapper]] = {
    "AllergyIntolerance": allergy_events,
    "MedicationRequest": request_events,
    "MedicationStatement": statement_events,
    "MedicationAdministration": administration_events,
    "MedicationDispense": dispense_events,
    "Immunization": immunization_events,
    "Patient": patient_events,
    "Medication": _medication_definition,
    "Substance": _substance_definition,
}
MAPPED_TYPES: Final = frozenset(_MAPPERS)
"""The resource types mapped to events."""
READ_TYPES: Final = MAPPED_TYPES | {OPERATION_OUTCOME}
"""The resource types read (every other type is skipped as unsupported): those mapped, and
the source's own report of what it failed to give (`schemas.fhir.outcomes`)."""
