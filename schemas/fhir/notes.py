"""Fitting an imported record's free-text note to the event size limit.

The gate refuses a whole event larger than its limit (`oversize`), and a clinical record's note
is secondary to the record: an allergy must not be lost because a discharge letter was pasted
into its note. The importer keeps the start of such a note and says how much it dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from schemas.events import Event


class ShortenedNote(NamedTuple):
    event: Event
    kept: int
    """Characters of the original note kept."""
    dropped: int
    """Characters of the original note dropped."""


def note_shortened(
    event: Event, limit: int, size_of: Callable[[Event], int]
) -> ShortenedNote | None:
    """`event` with the start of its payload's note kept and a marker saying how much was
    dropped, cut so the event's encoded size (`size_of`) is at most `limit` bytes; None when the
    event already fits, has no note, or would not fit even without its note (the gate then
    refuses it as `oversize`, and says so)."""
    note = getattr(event.payload, "note", None)
    size = size_of(event)
    if size <= limit or not isinstance(note, str):
        return None
    encoded = note.encode("utf-8")
    kept_bytes = len(encoded)
    while kept_bytes:
        kept_bytes = max(kept_bytes - (size - limit), 0)
        kept = encoded[:kept_bytes].decode("utf-8", errors="ignore")
        kept_bytes = len(kept.encode("utf-8"))
        shortened = _with_note(event, kept, len(note) - len(kept), len(note))
        size = size_of(shortened)
        if size <= limit:
            return ShortenedNote(shortened, len(kept), len(note) - len(kept))
    return None


def _with_note(event: Event, kept: str, dropped: int, total: int) -> Event:
    marker = (
        f"[note shortened at import: {dropped:,} of its {total:,} characters dropped to fit "
        "the event size limit]"
    )
    payload = event.payload.model_copy(update={"note": f"{kept} {marker}" if kept else marker})
    return event.model_copy(update={"payload": payload})
