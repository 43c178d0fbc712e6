"""Reading FHIR R4 files (`.json` Bundles or resources, `.ndjson` bulk exports) into submitted
events, per-resource errors and explained skips, like `event_files` does for UaC event files.

All files of one call form one input set, so a `Medication/x` reference in one file resolves to
the Medication in another. The mapping itself is pure (`schemas.fhir.mapping`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Final, NamedTuple

from projections.gate import DEFAULT_MAX_EVENT_BYTES
from projections.secrets import note_withheld
from rules.batch import Submitted
from rules.knowledge.bundled import load_bundled_knowledge
from rules.knowledge.coded_names import CodedNames, NamesDiffer
from rules.knowledge.model import Coding, DrugKnowledge
from schemas.codec import event_codec
from schemas.events import Event
from schemas.fhir.mapping import (
    FhirError,
    FhirImport,
    ImportContext,
    ParsedInput,
    Problem,
    RecordConcept,
    Skipped,
    combine,
    import_fhir,
    parse_json_document,
    parse_ndjson,
    without_unmapped,
)
from schemas.fhir.notes import ShortenedText, note_shortened, texts_shortened
from streams.event_files import LineError
from streams.runtime import collector_paused
from streams.text_files import DAMAGED_GZIP, file_labels, file_text, not_utf8, text_lines

NDJSON_SUFFIXES = frozenset({".ndjson", ".jsonl"})
ALLERGY_RECORD = "AllergyIntolerance/"


@dataclass(frozen=True)
class WithheldNote:
    """A record imported without its note, which looked like it held a secret."""

    origin: str
    source_ref: str | None
    kinds: tuple[str, ...]

    def message(self) -> str:
        record = self.source_ref or "a record"
        return (
            f"{self.origin}: the note of {record} was withheld: it looked like it held "
            f"{' and '.join(self.kinds)} (the record is imported without it)"
        )


NOTE: Final = "note"
"""The part a shortened note is named by in its line."""


@dataclass(frozen=True)
class CutText:
    """A record imported with only the start of a long text, which made it too large: its note
    first, then (too large even so) its allergen or drug text, a coding's display, a reaction.
    What a cut clinical text dropped is not checked, and the line says so."""

    origin: str
    source_ref: str | None
    cut: ShortenedText
    limit: int

    def message(self) -> str:
        record = self.source_ref or "a record"
        unchecked = (
            ""
            if self.cut.part == NOTE
            else (
                ": what was dropped is not checked, so a drug-allergy judgement of it is at most "
                "unverified; check the record at the source"
            )
        )
        return (
            f"{self.origin}: the {self.cut.part} of {record} was shortened to its first "
            f"{self.cut.kept:,} characters ({self.cut.dropped:,} dropped) so the record fits "
            f"the event size limit of {self.limit:,} bytes{unchecked}"
        )


@dataclass(frozen=True)
class LeftOut:
    """An optional part of a record that could not be read: the record is imported without it."""

    origin: str
    source_ref: str
    detail: str

    def message(self) -> str:
        return f"{self.origin}: {self.source_ref}: {self.detail}"


@dataclass(frozen=True)
class DrugNamesDiffer:
    """A concept of a record whose words and a code of which name different substances (a
    drug coded as amoxicillin, written "Ibuprofen"): the record is imported and judged by
    both, but a clinician reads the words."""

    origin: str
    source_ref: str
    where: str
    """The concept, by its path in the record (`medicationCodeableConcept`, `code`)."""
    found: NamesDiffer

    def message(self) -> str:
        return (
            f"{self.origin}: {self.source_ref}: {self.where} names different substances: "
            f"{self.found.name!r} reads as {self.found.named}, but its coding "
            f"{self._coding()} is {self.found.coded}; the record is imported and "
            "checked against both, but it may be shown by the words: check at the source "
            "which is meant"
        )

    def _coding(self) -> str:
        """The coding, and its display when that is what was read (a code UaC does not list)."""
        coding = self.found.coding
        named = f"{coding.system}|{coding.code}"
        return f"{named}, displayed {coding.display!r}," if self.found.displayed else named

    @property
    def refused(self) -> bool:
        """Whether the record is an allergy whose words and code disagree on whether there is
        an allergy at all (`NamesDiffer.absence`): an error, not a notice."""
        return self.found.absence and self.source_ref.startswith(ALLERGY_RECORD)

    def refusal(self) -> str:
        """The error of a record whose words and code disagree on whether there is an allergy
        at all (`NamesDiffer.absence`): it is not imported, as neither reading is safe to
        guess (an allergy dropped, or one invented)."""
        return (
            f"{self.source_ref}: {self.where} says both that there is no known allergy and "
            f"that there is one: {self.found.name!r} reads as {self.found.named}, but its "
            f"coding {self._coding()} is {self.found.coded}; one record cannot be "
            "both, so neither an allergy nor a negation is recorded: correct it at the source"
        )


NoteNotice = WithheldNote | CutText | LeftOut | DrugNamesDiffer


class FhirFiles(NamedTuple):
    """What the files gave: events to submit, errors, explained skips, and what was done to
    records on the way (a note withheld or shortened, an unreadable optional part left out)."""

    submitted: list[Submitted]
    errors: list[LineError]
    skipped: list[Skipped]
    notes: list[NoteNotice]


def files_written_at(paths: Sequence[Path], now: datetime) -> datetime:
    """The time of last resort of an import (`ImportContext.fallback_time`): when its newest
    file was last written, to the millisecond, and never after `now`. A resource with no time
    of its own, outside a Bundle with one, is dated then: importing the same files again gives
    the same events (the gate drops the repeats) and `uac replay` the same output, while an
    edited file is a new version of what it holds."""
    newest = max(path.stat().st_mtime_ns for path in paths) // 1_000_000
    written = datetime.fromtimestamp(newest // 1_000, UTC) + timedelta(milliseconds=newest % 1_000)
    return min(written, now)


def read_fhir_files(
    paths: Sequence[Path],
    *,
    tenant_id: str,
    actor: str,
    fallback_time: datetime,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    knowledge: DrugKnowledge | None = None,
    local_zone: tzinfo | None = None,
) -> FhirFiles:
    """Every event of the files, every error (with its origin), every explained skip, and
    every note withheld because it looked like it held a secret (see `note_withheld`) or
    shortened because it made its record larger than `max_event_bytes` (see `note_shortened`),
    every long text shortened when the record was still too large (see `texts_shortened`),
    and every concept whose words and codes name different substances to `knowledge` (the
    bundled knowledge by default), except an allergy's whose words and code disagree on
    whether there is an allergy at all: that record is an error, and none of its events is
    submitted (`DrugNamesDiffer.refusal`). Times without a zone are errors of their records,
    or read in `local_zone` if one is given (`schemas.fhir.local_times`)."""
    imported = import_fhir_files(
        paths,
        ImportContext(tenant_id=tenant_id, actor=actor, fallback_time=fallback_time),
        local_zone,
    )
    codec = event_codec()

    def size_of(event: Event) -> int:
        return len(codec.encode(event))

    differing = names_differing(imported.concepts, knowledge or load_bundled_knowledge())
    refused = {(found.origin, found.source_ref) for found in differing if found.refused}
    submitted: list[Submitted] = []
    notes: list[NoteNotice] = [
        LeftOut(part.origin, part.source_ref, part.detail) for part in imported.passed_over
    ]
    for origin, found in imported.events:
        if (origin, found.source_ref) in refused:
            continue
        event, kinds = note_withheld(found)
        if kinds:
            notes.append(WithheldNote(origin, event.source_ref, kinds))
        size = size_of(event)
        cut = note_shortened(event, max_event_bytes, size_of) if size > max_event_bytes else None
        if cut is not None:
            event, size = cut.event, size_of(cut.event)
            note = ShortenedText(NOTE, cut.kept, cut.dropped)
            notes.append(CutText(origin, event.source_ref, note, max_event_bytes))
        texts = texts_shortened(event, max_event_bytes, size_of) if size > max_event_bytes else None
        if texts is not None:
            event, size = texts.event, size_of(texts.event)
            notes += [
                CutText(origin, event.source_ref, text, max_event_bytes) for text in texts.texts
            ]
        submitted.append(Submitted(origin, event, size))
    notes.extend(found for found in differing if not found.refused)
    errors = [LineError(error.origin, error.reason, error.message) for error in imported.errors]
    errors += [
        LineError(found.origin, Problem.INVALID_VALUE.value, found.refusal())
        for found in differing
        if found.refused
    ]
    return FhirFiles(submitted, errors, imported.skipped, notes)


def names_differing(
    concepts: Sequence[RecordConcept], knowledge: DrugKnowledge
) -> list[DrugNamesDiffer]:
    """The concepts whose words (text, coding displays) and a code name different substances
    (`CodedNames`), a line each."""
    checker = CodedNames(knowledge)
    found: list[DrugNamesDiffer] = []
    for read in concepts:
        codes = read.concept.codes
        names = [name for name in (read.concept.text, *(c.display for c in codes)) if name]
        codings = [Coding(coding.system, coding.code, coding.display) for coding in codes]
        differing = checker.differ(names, codings)
        if differing is not None:
            found.append(
                DrugNamesDiffer(read.origin, read.source_ref, read.concept.where, differing)
            )
    return found


SKIP_EXAMPLES = 3
"""How many of the resources skipped for one reason are named."""


def skip_lines(skipped: Sequence[Skipped]) -> list[str]:
    """One line per reason a resource was skipped, most frequent first, naming the first
    resources skipped for it (`MedicationRequest/rx7 at orders.json#entry[2]`)."""
    by_reason: dict[str, list[Skipped]] = {}
    for skip in skipped:
        by_reason.setdefault(skip.reason, []).append(skip)
    lines = []
    for reason, skips in sorted(by_reason.items(), key=lambda item: (-len(item[1]), item[0])):
        named = ", ".join(_named(skip) for skip in skips[:SKIP_EXAMPLES])
        more = len(skips) - SKIP_EXAMPLES
        named += f" and {more:,} more" if more > 0 else ""
        lines.append(f"skipped {len(skips):,} resource(s): {reason} ({named})")
    return lines


def _named(skip: Skipped) -> str:
    record = f"{skip.resource_type}/{skip.resource_id}" if skip.resource_id else skip.resource_type
    return f"{record} at {skip.origin}"


def import_fhir_files(
    paths: Sequence[Path], context: ImportContext, local_zone: tzinfo | None = None
) -> FhirImport:
    """The mapping result of the files as one input set (origins name the file, not the path);
    times without a zone read in `local_zone` if one is given.

    The parsed JSON and the events are acyclic: without the cyclic collector, which would
    rescan them all as they pile up, a bulk export imports about twice as fast."""
    with collector_paused():
        parts = (
            _read(path, label, local_zone)
            for path, label in zip(paths, file_labels(paths), strict=True)
        )
        return import_fhir(combine(parts), context)


def _read(path: Path, label: str, local_zone: tzinfo | None) -> ParsedInput:
    """A `.ndjson`/`.jsonl` file (or one of them gzipped, `.ndjson.gz`) line by line, any other
    file as one JSON document."""
    problem = Problem.MALFORMED_JSON.value
    try:
        if Path(path.name.removesuffix(".gz")).suffix.lower() in NDJSON_SUFFIXES:
            lines = text_lines(path)
            return parse_ndjson(lines, label, each=without_unmapped, local_zone=local_zone)
        return without_unmapped(parse_json_document(file_text(path), label, local_zone))
    except UnicodeDecodeError as error:
        return ParsedInput(errors=(FhirError(label, problem, not_utf8(error)),))
    except DAMAGED_GZIP as error:
        message = f"the gzip data is damaged: {error}"
        return ParsedInput(errors=(FhirError(label, problem, message),))
