"""When a worker decides it has stalled (and restarts itself from the committed offsets)."""

from __future__ import annotations

from streams.liveness import StallWatch


def test_given_partitions_with_work_and_no_progress_for_the_period_then_they_are_reported() -> None:
    watch = StallWatch(stall_seconds=30, last_progress=0.0)
    assert watch.stalled({0: 10, 1: 5}, {0: 20, 1: 5}, now=10.0) == []
    assert watch.stalled({0: 10, 1: 5}, {0: 20, 1: 5}, now=29.0) == []
    assert watch.stalled({0: 10, 1: 5}, {0: 20, 1: 5}, now=41.0) == [0]


def test_given_a_worker_that_is_caught_up_then_idleness_is_not_a_stall() -> None:
    watch = StallWatch(stall_seconds=30, last_progress=0.0)
    assert watch.stalled({0: 20, 1: 5}, {0: 20, 1: 5}, now=1_000.0) == []


def test_given_committed_offsets_that_move_then_the_clock_starts_again() -> None:
    watch = StallWatch(stall_seconds=30, last_progress=0.0)
    watch.stalled({0: 10}, {0: 100}, now=1.0)
    assert watch.stalled({0: 40}, {0: 100}, now=25.0) == []
    assert watch.stalled({0: 40}, {0: 100}, now=50.0) == []
    assert watch.stalled({0: 40}, {0: 100}, now=56.0) == [0]


def test_given_batches_still_being_processed_then_a_slow_commit_is_not_a_stall() -> None:
    watch = StallWatch(stall_seconds=30, last_progress=0.0)
    watch.stalled({0: 10}, {0: 100}, now=1.0)
    watch.progressed(now=35.0)
    assert watch.stalled({0: 10}, {0: 100}, now=40.0) == []


def test_given_a_partition_never_committed_then_its_whole_log_counts_as_work() -> None:
    watch = StallWatch(stall_seconds=5, last_progress=0.0)
    assert watch.stalled({}, {3: 7}, now=1.0) == []
    assert watch.stalled({}, {3: 7}, now=6.0) == [3]


def test_given_an_idle_worker_when_events_just_arrived_then_it_is_not_a_stall() -> None:
    watch = StallWatch(stall_seconds=30, last_progress=0.0)
    assert watch.stalled({0: 10}, {0: 10}, now=100.0) == []
    assert watch.stalled({0: 10}, {0: 12}, now=105.0) == []
    watch.progressed(now=105.5)
    assert watch.stalled({0: 10}, {0: 14}, now=200.0) == []
    assert watch.stalled({0: 10}, {0: 14}, now=231.0) == [0]


def test_given_partitions_seen_behind_every_round_then_a_stall_is_told_after_one_period() -> None:
    watch = StallWatch(stall_seconds=30, last_progress=0.0)
    for now in (5.0, 10.0, 15.0, 20.0, 25.0):
        watch.seen_behind([0, 2], now)
    watch.seen_behind([2], now=30.0)
    assert watch.stalled({0: 10, 2: 4}, {0: 10, 2: 9}, now=35.0) == [2]


def test_given_a_batch_processed_then_partitions_seen_behind_before_it_wait_a_new_period() -> None:
    watch = StallWatch(stall_seconds=30, last_progress=0.0)
    watch.seen_behind([1], now=5.0)
    watch.progressed(now=20.0)
    watch.seen_behind([1], now=25.0)
    assert watch.stalled({1: 3}, {1: 8}, now=50.0) == []
    assert watch.stalled({1: 3}, {1: 8}, now=55.0) == [1]
