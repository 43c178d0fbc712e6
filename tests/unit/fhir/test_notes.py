"""An imported record whose note makes it too large keeps the start of the note, and fits."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.codec import event_codec
from schemas.events import AllergyRecorded, Event
from schemas.fhir.notes import note_shortened
from tests.factories import make_event

CODEC = event_codec()


def size_of(event: Event) -> int:
    return len(CODEC.encode(event))


def allergy(note: str | None) -> Event:
    return make_event("AllergyRecorded", "a-1", payload={"substance": "penicillin", "note": note})


def note_of(event: Event) -> str:
    assert isinstance(event.payload, AllergyRecorded)
    assert event.payload.note is not None
    return event.payload.note


@settings(max_examples=60)
@given(
    note=st.text(min_size=200, max_size=3_000),
    over=st.integers(min_value=1, max_value=4_000),
)
def test_a_note_over_the_limit_is_cut_to_a_prefix_that_fits_and_says_what_it_dropped(
    note: str, over: int
) -> None:
    event = allergy(note)
    limit = max(size_of(event) - over, size_of(allergy("x" * 120)))
    cut = note_shortened(event, limit, size_of)
    assert cut is not None
    assert size_of(cut.event) <= limit
    assert note.startswith(note[: cut.kept])
    assert cut.kept + cut.dropped == len(note)
    assert f"{cut.dropped:,} of its {len(note):,} characters dropped" in note_of(cut.event)
    assert note_of(cut.event).startswith(note[: cut.kept])
    assert cut.event.model_copy(update={"payload": event.payload}) == event


def test_the_cut_keeps_as_much_of_the_note_as_fits() -> None:
    event = allergy("hives after the first dose; " * 400)
    limit = size_of(event) - 1_000
    cut = note_shortened(event, limit, size_of)
    assert cut is not None
    assert limit - 8 <= size_of(cut.event) <= limit


def test_an_event_that_fits_or_has_no_note_is_left_alone() -> None:
    event = allergy("hives")
    assert note_shortened(event, size_of(event), size_of) is None
    assert note_shortened(allergy(None), 10, size_of) is None


def test_an_event_too_large_even_without_its_note_is_left_for_the_gate_to_refuse() -> None:
    event = allergy("hives " * 50)
    assert note_shortened(event, size_of(allergy(None)), size_of) is None
