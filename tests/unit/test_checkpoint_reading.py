"""Reading a checkpoint back (`uac state`, `uac export`, `uac replay --from-kafka`, `uac rejudge`):
a checkpoint an earlier build wrote, whose state document that build rendered otherwise, is still
read (its events are folded again); one that does not match its own hash, or holds another
subject's events, is refused as corrupt; a difference with the log says its cause."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import timedelta

import pytest

from projections.document import (
    CorruptCheckpoint,
    checkpoint_of,
    rendered_as_recorded,
    state_from_checkpoint,
    state_hash,
)
from projections.state import UserState, replay
from schemas.checkpoint import StateCheckpoint
from schemas.events import Event
from streams.rebuild import Cause, differences, rerendered
from tests.factories import make_event

HISTORY = [
    make_event("AllergyRecorded", "penicillin"),
    make_event("MedicationPrescribed", "amoxicillin", at=timedelta(days=1)),
    make_event("PreferenceStated", "diet", at=timedelta(days=2)),
]


def _state(events: Sequence[Event] = HISTORY) -> UserState:
    return replay(events)


def _rewritten(checkpoint: StateCheckpoint, document: dict[str, object]) -> StateCheckpoint:
    """The checkpoint as a build that wrote `document` would have: its own hash over it."""
    encoded = json.dumps(document, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return checkpoint.model_copy(
        update={
            "state_json": encoded.decode("utf-8"),
            "state_hash": hashlib.sha256(encoded).hexdigest(),
        }
    )


def _as_an_earlier_build_wrote_it(state: UserState) -> StateCheckpoint:
    """This state's checkpoint with a document rendered otherwise: a view field the earlier
    build had and this one has not, another it lacked."""
    checkpoint = checkpoint_of(state)
    document = json.loads(checkpoint.state_json)
    document["state"]["travel_summary"] = {"trips": 0}
    del document["state"]["pending_retractions"]
    return _rewritten(checkpoint, document)


def test_given_a_checkpoint_an_earlier_build_rendered_otherwise_then_its_state_is_read() -> None:
    state = _state()
    earlier = _as_an_earlier_build_wrote_it(state)
    read = state_from_checkpoint(earlier)
    assert state_hash(read) == state_hash(state)
    assert [a.substance for a in read.allergy_views()] == [
        a.substance for a in state.allergy_views()
    ]
    assert not rendered_as_recorded(earlier, read)
    assert rendered_as_recorded(checkpoint_of(state), read)


def test_given_a_checkpoint_altered_after_it_was_hashed_then_it_is_refused() -> None:
    checkpoint = checkpoint_of(_state())
    altered = checkpoint.state_json.replace('"confirmed"', '"refuted"', 1)
    assert altered != checkpoint.state_json
    with pytest.raises(CorruptCheckpoint, match="does not match its state_hash"):
        state_from_checkpoint(checkpoint.model_copy(update={"state_json": altered}))


def test_given_a_checkpoint_holding_another_subjects_events_then_it_is_refused() -> None:
    other = _state([make_event("AllergyRecorded", "penicillin", subject="patient-2")])
    checkpoint = checkpoint_of(_state())
    document = json.loads(checkpoint.state_json)
    document["events"] += json.loads(checkpoint_of(other).state_json)["events"]
    with pytest.raises(CorruptCheckpoint, match="events of another subject"):
        state_from_checkpoint(_rewritten(checkpoint, document))


def test_given_a_checkpoint_record_of_one_subject_holding_anothers_state_then_it_is_refused() -> (
    None
):
    other = checkpoint_of(_state([make_event("AllergyRecorded", "x", subject="patient-2")]))
    relabelled = other.model_copy(update={"subject_id": "patient-1"})
    with pytest.raises(CorruptCheckpoint, match="holds the state of another subject"):
        state_from_checkpoint(relabelled)


@pytest.mark.parametrize(
    "document",
    [{"state": {}}, {"events": [{"type": "Nonsense"}], "state": {}}, {"events": [], "state": 3}],
    ids=["no events", "an invalid event", "no identity"],
)
def test_given_a_document_that_is_no_checkpoint_then_it_is_refused_as_corrupt(
    document: dict[str, object],
) -> None:
    with pytest.raises(CorruptCheckpoint, match="not a checkpoint document"):
        state_from_checkpoint(_rewritten(checkpoint_of(_state()), document))


def test_given_checkpoints_and_their_rebuilds_then_each_difference_says_its_cause() -> None:
    same, earlier_build, behind, damaged, gone, new = (
        _state([event.model_copy(update={"subject_id": f"p-{n}"}) for event in HISTORY])
        for n in range(6)
    )
    sulfa = make_event(
        "AllergyRecorded",
        "sulfa",
        at=timedelta(days=3),
        subject=behind.subject_id,
        payload={"allergy_id": "allergy-2", "substance": "sulfamethoxazole"},
    )
    behind_rebuilt = replay([sulfa], behind)
    damaged_checkpoint = checkpoint_of(damaged)
    live = {
        same.key: checkpoint_of(same),
        earlier_build.key: _as_an_earlier_build_wrote_it(earlier_build),
        behind.key: checkpoint_of(behind),
        damaged.key: damaged_checkpoint.model_copy(
            update={"state_json": damaged_checkpoint.state_json.replace("penicillin", "aspirin")}
        ),
        gone.key: checkpoint_of(gone),
    }
    rebuilt = {state.key: state for state in (same, earlier_build, behind_rebuilt, damaged, new)}
    causes = {d.key: d.cause for d in differences(live, rebuilt)}
    assert causes == {
        earlier_build.key: Cause.RENDERING,
        behind.key: Cause.HISTORY,
        damaged.key: Cause.CORRUPT,
        gone.key: Cause.HISTORY,
        new.key: Cause.HISTORY,
    }
    assert [state.key for state in rerendered(live, rebuilt)] == [earlier_build.key]
