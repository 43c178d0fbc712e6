"""Reading event files (NDJSON, one event per line) into submitted events and per-line errors."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rules.batch import Submitted
from schemas.codec import event_codec
from schemas.errors import DecodeError
from schemas.json_lines import NotUtf8, parse_event
from schemas.reasons import ReasonCode
from streams.text_files import text_lines


@dataclass(frozen=True)
class LineError:
    origin: str
    reason: str
    message: str


def read_ndjson(
    lines: Iterable[str | NotUtf8], source: str
) -> tuple[list[Submitted], list[LineError]]:
    codec = event_codec()
    submitted: list[Submitted] = []
    errors: list[LineError] = []
    opened_alone: bool | None = None
    for number, line in enumerate(lines, start=1):
        origin = f"{source}:{number}"
        if isinstance(line, NotUtf8):
            errors.append(LineError(origin, ReasonCode.MALFORMED_JSON.value, line.message))
            continue
        if not line.strip():
            continue
        if opened_alone is None:
            opened_alone = line.strip() in ("{", "[")
        try:
            event = parse_event(line)
        except DecodeError as error:
            errors.append(LineError(origin, error.reason.value, str(error)))
            continue
        submitted.append(Submitted(origin, event, len(codec.encode(event))))
    return submitted, _pretty_printed(errors) if opened_alone else errors


_PRETTY_PRINTED = (
    "this looks like JSON written over several lines (pretty-printed): an events file holds "
    "one event per line, each event's JSON on a single line"
)


def _pretty_printed(errors: list[LineError]) -> list[LineError]:
    """The errors of a file whose first line opens a JSON value alone (`{` or `[`): a
    pretty-printed document, not an event per line, so its unreadable lines are one error that
    says so (and counts them), not one `malformed_json` error per fragment."""
    malformed = [e for e in errors if e.reason == ReasonCode.MALFORMED_JSON.value]
    if not malformed:
        return errors
    summary = f"{_PRETTY_PRINTED} ({len(malformed)} lines could not be read)"
    first = LineError(malformed[0].origin, ReasonCode.MALFORMED_JSON.value, summary)
    return [first, *(e for e in errors if e.reason != ReasonCode.MALFORMED_JSON.value)]


def read_ndjson_file(
    path: Path, label: str | None = None
) -> tuple[list[Submitted], list[LineError]]:
    """The events of a file, their origins named by `label` (default: the file's name)."""
    return read_ndjson(text_lines(path), label or path.name)
