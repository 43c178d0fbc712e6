"""Fitting an imported record's free-text note, and then its other long texts, to the event
size limit.

The gate refuses a whole event larger than its limit (`oversize`), and a clinical record's note
is secondary to the record: an allergy must not be lost because a discharge letter was pasted
into its note. The importer keeps the start of such a note and says how much it dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, NamedTuple

from schemas.events import AllergyRecorded, Event, MedicationPrescribed


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


class ShortenedText(NamedTuple):
    """One text of a record cut to fit the event size limit: which (`part`) and by how much."""

    part: str
    kept: int
    dropped: int


class ShortenedRecord(NamedTuple):
    event: Event
    texts: tuple[ShortenedText, ...]


_SHORTEST_CUT: Final = 200
"""Texts at most this long are not cut: a record too large without its long texts is refused."""


def texts_shortened(
    event: Event, limit: int, size_of: Callable[[Event], int]
) -> ShortenedRecord | None:
    """`event` (an allergy or a prescription still too large once its note is shortened, see
    `note_shortened`) with its longest texts cut, longest first, until its encoded size is at
    most `limit` bytes: the allergen or drug text, a coding's display, a reaction's
    manifestation. Each cut text keeps its start and ends with a marker saying how much was
    dropped, words the drug knowledge does not read, so a judgement of the text is `unverified`
    for what may have been dropped, never a silent "no conflict" (a 100 KB allergen text naming
    sulfa at its end, cut, is still checked by hand against Bactrim). None when the event
    fits, is neither an allergy nor a prescription, or would not fit even with its long texts
    cut (the gate then refuses it as `oversize`, and says so)."""
    payload = event.payload
    if size_of(event) <= limit or not isinstance(payload, AllergyRecorded | MedicationPrescribed):
        return None
    cuts: dict[str, ShortenedText] = {}
    originals: dict[str, str] = {}
    shortened = event
    for _ in range(64):
        size = size_of(shortened)
        if size <= limit:
            return ShortenedRecord(shortened, tuple(cuts.values()))
        texts = _long_texts(shortened.payload)
        if not texts:
            return None
        part, text = max(texts, key=lambda found: len(found[1].encode("utf-8")))
        original = originals.setdefault(part, text)
        room = len(_marker(part, len(original), len(original)).encode("utf-8")) + _MARKER_SLACK
        keep = max(len(text.encode("utf-8")) - (size - limit) - room, _SHORTEST_CUT // 2)
        kept = original.encode("utf-8")[:keep].decode("utf-8", errors="ignore").rstrip()
        dropped = len(original) - len(kept)
        cuts[part] = ShortenedText(part, len(kept), dropped)
        shortened = _with_text(shortened, part, f"{kept} {_marker(part, dropped, len(original))}")
    return None


_MARKER_SLACK: Final = 8
"""Bytes kept free besides the marker: the space before it, and a longer length prefix."""


def _marker(part: str, dropped: int, length: int) -> str:
    """What ends a cut text: words the drug knowledge does not read, saying how much of it was
    dropped."""
    return (
        f"[{part} shortened at import: {dropped:,} of its {length:,} characters dropped to fit "
        "the event size limit]"
    )


def _long_texts(payload: object) -> list[tuple[str, str]]:
    """The texts of an allergy or a prescription that may be cut, by the part they are."""
    found: list[tuple[str, str]] = []
    if isinstance(payload, AllergyRecorded):
        found.append(("allergen text", payload.substance))
        found += [
            (f"manifestation of reaction {n + 1}", reaction.manifestation)
            for n, reaction in enumerate(payload.reactions)
        ]
    elif isinstance(payload, MedicationPrescribed):
        found.append(("drug text", payload.drug))
        found += [("dose", payload.dose or ""), ("route", payload.route or "")]
    codes = getattr(payload, "codes", ())
    found += [
        (f"display of coding {n + 1}", coding.display or "") for n, coding in enumerate(codes)
    ]
    return [(part, text) for part, text in found if len(text) > _SHORTEST_CUT]


def _with_text(event: Event, part: str, text: str) -> Event:
    payload = event.payload
    update: dict[str, object]
    if part in ("allergen text", "drug text"):
        update = {"substance" if part == "allergen text" else "drug": text}
    elif part in ("dose", "route"):
        update = {part: text}
    elif part.startswith("manifestation of reaction "):
        position = int(part.removeprefix("manifestation of reaction ")) - 1
        reactions = list(getattr(payload, "reactions", ()))
        reactions[position] = reactions[position].model_copy(update={"manifestation": text})
        update = {"reactions": tuple(reactions)}
    else:
        position = int(part.removeprefix("display of coding ")) - 1
        codes = list(getattr(payload, "codes", ()))
        codes[position] = codes[position].model_copy(update={"display": text})
        update = {"codes": tuple(codes)}
    return event.model_copy(update={"payload": payload.model_copy(update=update)})
