"""Reading event files (NDJSON, one event per line) into submitted events and per-line errors."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rules.batch import Submitted
from schemas.codec import event_codec
from schemas.errors import DecodeError
from schemas.json_lines import parse_event


@dataclass(frozen=True)
class LineError:
    origin: str
    reason: str
    message: str


def read_ndjson(lines: Iterable[str], source: str) -> tuple[list[Submitted], list[LineError]]:
    codec = event_codec()
    submitted: list[Submitted] = []
    errors: list[LineError] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        origin = f"{source}:{number}"
        try:
            event = parse_event(line)
        except DecodeError as error:
            errors.append(LineError(origin, error.reason.value, str(error)))
            continue
        submitted.append(Submitted(origin, event, len(codec.encode(event))))
    return submitted, errors


def read_ndjson_file(path: Path) -> tuple[list[Submitted], list[LineError]]:
    with path.open(encoding="utf-8") as lines:
        return read_ndjson(lines, path.name)
