"""How a batch is planned against the offsets the worker has processed: an offset the consumer
passed over is read from the log before the records after it, a record processed already is
not run again, and nothing else is skipped."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.continuity import Gap, Step, plan, reached
from streams.processing import Incoming


def record(partition: int, offset: int) -> Incoming:
    return Incoming(b"t:s", b"value", "uac.events", partition, offset)


def offsets(step: Step) -> list[tuple[int, int]]:
    assert not isinstance(step, Gap)
    return [(m.partition, m.offset) for m in step]


def test_given_a_consumer_that_resumes_after_an_unprocessed_record_then_it_is_read_first() -> None:
    """The restart that lost offset 5: processed up to 4, the consumer resumed at 6."""
    steps = plan({0: 5}, [record(0, n) for n in range(6, 10)])
    assert steps[0] == Gap(0, 5, 6)
    assert offsets(steps[1]) == [(0, 6), (0, 7), (0, 8), (0, 9)]
    assert len(steps) == 2


def test_given_contiguous_records_then_the_batch_is_one_step_as_delivered() -> None:
    batch = [record(1, 3), record(0, 7), record(1, 4), record(0, 8)]
    assert plan({0: 7, 1: 3}, batch) == [tuple(batch)]


def test_given_records_already_processed_then_they_are_left_out_and_are_not_a_gap() -> None:
    """A redelivery after a seek back to the committed offset starts below the expected
    offset: those records' outputs are out already, and running them again would only add a
    duplicate refusal to the quarantine."""
    batch = [record(0, n) for n in range(2, 8)] + [record(1, 4)]
    assert [offsets(step) for step in plan({0: 6, 1: 4}, batch)] == [[(0, 6), (0, 7), (1, 4)]]
    assert plan({0: 8}, batch[:-1]) == []


def test_given_the_same_record_twice_in_a_batch_then_it_runs_once() -> None:
    batch = [record(0, 3), record(0, 4), record(0, 4), record(0, 5)]
    assert [offsets(step) for step in plan({0: 3}, batch)] == [[(0, 3), (0, 4), (0, 5)]]


def test_given_a_jump_inside_the_batch_then_the_gap_is_read_between_its_neighbours() -> None:
    batch = [record(0, 5), record(0, 6), record(0, 9), record(0, 10)]
    steps = plan({0: 5}, batch)
    assert [s if isinstance(s, Gap) else offsets(s) for s in steps] == [
        [(0, 5), (0, 6)],
        Gap(0, 7, 9),
        [(0, 9), (0, 10)],
    ]


def test_given_a_gap_on_one_partition_then_the_others_run_unsplit_first() -> None:
    batch = [record(0, 4), record(1, 20), record(1, 21), record(0, 5)]
    steps = plan({0: 4, 1: 12}, batch)
    assert offsets(steps[0]) == [(0, 4), (0, 5)]
    assert steps[1] == Gap(1, 12, 20)
    assert offsets(steps[2]) == [(1, 20), (1, 21)]


def test_how_far_a_step_takes_each_partition() -> None:
    assert reached(Gap(2, 10, 14)) == {2: 14}
    assert reached((record(0, 4), record(1, 9), record(0, 6), record(0, 5))) == {0: 7, 1: 10}


@st.composite
def batches(draw: st.DrawFn) -> tuple[dict[int, int], list[Incoming]]:
    """Expected offsets per partition and a delivery that interleaves partitions, where each
    partition's records are increasing but may start below or above what is expected, and jump."""
    partitions = draw(st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True))
    expected = {p: draw(st.integers(0, 50)) for p in partitions}
    queues = {
        p: sorted(draw(st.sets(st.integers(0, 80), min_size=1, max_size=15))) for p in partitions
    }
    order = draw(st.permutations([p for p, q in queues.items() for _ in q]))
    delivered = [record(p, queues[p].pop(0)) for p in order]
    return expected, delivered


@given(batches())
def test_every_record_not_yet_processed_runs_once_in_its_partitions_order_and_every_offset_is_covered(
    batch: tuple[dict[int, int], list[Incoming]],
) -> None:
    expected, delivered = batch
    steps = plan(expected, delivered)
    ran = [m for step in steps if not isinstance(step, Gap) for m in step]
    fresh = [m for m in delivered if m.offset >= expected[m.partition]]
    assert sorted(ran, key=id) == sorted(fresh, key=id)
    for partition, start in expected.items():
        mine = [m.offset for m in fresh if m.partition == partition]
        if not mine:
            continue
        assert [m.offset for m in ran if m.partition == partition] == mine
        covered: set[int] = set()
        following = start
        for step in steps:
            if isinstance(step, Gap) and step.partition == partition:
                assert step.start == following, "a gap starts where processing stood"
                covered.update(range(step.start, step.end))
            following = max(following, reached(step).get(partition, following))
            if not isinstance(step, Gap):
                covered.update(m.offset for m in step if m.partition == partition)
        assert set(range(start, max(mine) + 1)) <= covered
