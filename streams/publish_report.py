"""`uac publish --json`: one JSON document per line for every record of the input, so a tool
can account for each one. First what reading gave (written before sending): `error` (a line or
resource that could not be read), `skipped` (a FHIR resource that deliberately yields no event),
`notice` (a record sent with a part left out, a note withheld or shortened); then one per event
in the order sent: `sent` (where it is on the log) or `not_sent` (why).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from rules.batch import Submitted
from schemas.fhir.inputs import Skipped
from streams.event_files import LineError
from streams.fhir_files import NoteNotice
from streams.publisher import NotSent, Published


class ReadInputs(NamedTuple):
    """What the input files gave: the events to send and an account of everything else."""

    submitted: list[Submitted]
    errors: list[LineError]
    skipped: list[Skipped]
    notices: list[NoteNotice]


def input_documents(read: ReadInputs) -> Iterator[dict[str, Any]]:
    """The account of reading the input: its errors, skipped resources and notices."""
    for error in read.errors:
        yield {
            "result": "error",
            "origin": error.origin,
            "reason": error.reason,
            "message": error.message,
        }
    for skip in read.skipped:
        yield {
            "result": "skipped",
            "origin": skip.origin,
            "resource": _resource(skip),
            "reason": skip.reason,
        }
    for notice in read.notices:
        yield {
            "result": "notice",
            "origin": notice.origin,
            "source_ref": notice.source_ref,
            "message": notice.message(),
        }


def sent_documents(
    batch: Sequence[Submitted], results: Sequence[Published | NotSent]
) -> Iterator[dict[str, Any]]:
    """One result per event of `batch`, in the order it was sent."""
    for item, result in zip(batch, results, strict=True):
        yield _sent(item, result)


def _sent(item: Submitted, result: Published | NotSent) -> dict[str, Any]:
    document: dict[str, Any] = {
        "origin": item.origin,
        "event_id": str(item.event.event_id),
        "type": item.event.type.value,
    }
    if isinstance(result, Published):
        return {
            "result": "sent",
            **document,
            "partition": result.partition,
            "offset": result.offset,
        }
    return {"result": "not_sent", **document, "reason": result.reason, "message": result.message}


def _resource(skip: Skipped) -> str:
    if skip.resource_id:
        return f"{skip.resource_type}/{skip.resource_id}"
    return skip.resource_type
