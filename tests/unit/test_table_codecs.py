"""The state table's records: a subject's history in a rewritten head and write-once segments,
so a table write costs the same however long the history, and recovery rebuilds the state."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from aiokafka.partitioner import DefaultPartitioner

from projections.document import state_hash
from projections.state import replay
from schemas.codec import event_codec
from schemas.events import Event
from streams.keys import FileKeyStore
from streams.sealing import Sealer
from streams.table_codecs import (
    SEGMENT_BYTES,
    StoredSegment,
    StoredState,
    SubjectTable,
    UserStateCodec,
    segment_key,
)
from tests.factories import make_event

KEY = "clinic-a:patient-1"


@pytest.fixture
def sealer(tmp_path: Path) -> Sealer:
    return Sealer(FileKeyStore(tmp_path / "keys"))


def facts(count: int, first: int = 0) -> list[Event]:
    return [
        make_event(
            "FactAsserted",
            f"fact-{n}",
            at=timedelta(minutes=n),
            payload={"key": f"k{n}", "value": "v" * 2_000},
        )
        for n in range(first, first + count)
    ]


def written(
    sealer: Sealer, batches: list[list[Event]]
) -> tuple[StoredState, dict[str, StoredSegment], list[int]]:
    """Store the batches as the worker does; the head, every segment and each head's size."""
    codec = event_codec()
    head: StoredState | None = None
    segments: dict[str, StoredSegment] = {}
    sizes: list[int] = []
    seen: list[Event] = []
    for batch in batches:
        seen.extend(batch)
        framed = [codec.encode(event) for event in batch]
        state = replay(seen)
        head, closed = (
            StoredState.first(state, framed, sealer)
            if head is None
            else head.extended(state, framed, sealer)
        )
        segments.update(closed)
        sizes.append(len(head.encoded))
    assert head is not None
    return head, segments, sizes


def test_given_a_long_history_then_each_write_stays_small_and_old_events_move_to_segments(
    sealer: Sealer,
) -> None:
    batches = [facts(10, first) for first in range(0, 1_000, 10)]
    head, segments, sizes = written(sealer, batches)
    assert head.segments == len(segments) >= 7
    assert max(sizes) < SEGMENT_BYTES + 1024
    assert sorted(segments) == sorted(segment_key(KEY, n) for n in range(head.segments))
    assert head.history_bytes == len(head.events) + sum(len(s.events) for s in segments.values())


def test_given_the_records_read_back_then_the_state_is_the_same(sealer: Sealer) -> None:
    batches = [facts(25, first) for first in range(0, 500, 25)]
    head, segments, _ = written(sealer, batches)
    codec = UserStateCodec(sealer)
    recovered = codec.loads(head.encoded)
    assert isinstance(recovered, StoredState)
    assert recovered.needs_fold
    read_segments = [
        codec.loads(segments[segment_key(KEY, n)].encoded) for n in range(head.segments)
    ]
    folded = recovered.folded(read_segments)
    assert folded.state is not None and head.state is not None
    assert state_hash(folded.state) == state_hash(head.state)


def test_given_a_short_history_then_recovery_folds_the_head_at_once(sealer: Sealer) -> None:
    head, segments, _ = written(sealer, [facts(3)])
    recovered = UserStateCodec(sealer).loads(head.encoded)
    assert segments == {}
    assert isinstance(recovered, StoredState) and recovered.state is not None
    assert recovered.state.version == 3


def test_given_an_erased_subject_then_its_records_load_as_empty_markers(
    sealer: Sealer, tmp_path: Path
) -> None:
    head, segments, _ = written(sealer, [facts(200)])
    sealer.keys.destroy(KEY)
    codec = UserStateCodec(Sealer(FileKeyStore(tmp_path / "keys")))
    records: list[StoredState | StoredSegment] = [head, *segments.values()]
    for record in records:
        loaded = codec.loads(record.encoded)
        assert isinstance(loaded, StoredState)
        assert loaded.state is None and loaded.events == b""


@pytest.mark.parametrize("subject", ["clinic-a:patient-1", "clinic-b:p-1001", "t:ü-7"])
def test_segments_go_to_the_partition_of_their_subjects_events(subject: str) -> None:
    expected = DefaultPartitioner()(subject.encode(), list(range(4)), list(range(4)))
    table = SubjectTable.__new__(SubjectTable)
    table.partitions = 4
    for key in (subject, segment_key(subject, 0), segment_key(subject, 12)):
        assert table.partition_for_key(key) == expected
