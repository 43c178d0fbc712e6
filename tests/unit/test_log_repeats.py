"""While the broker is away, the Kafka client's repeated errors are logged once per window with
a count of those held back, not many times a second; other records pass untouched."""

from __future__ import annotations

import logging

from streams.log_repeats import RepeatedRecords, hold_back_repeats

UNREACHABLE = "Unable connect to node with id %s: %s"


def record(
    at: float, msg: str = UNREACHABLE, name: str = "aiokafka.conn", level: int = logging.ERROR
) -> logging.LogRecord:
    made = logging.LogRecord(name, level, __file__, 1, msg, (1, "refused"), None)
    made.created = at
    return made


def logged(repeats: RepeatedRecords, records: list[logging.LogRecord]) -> list[str]:
    return [r.getMessage() for r in records if repeats.filter(r)]


def test_given_the_same_client_error_many_times_a_second_then_one_per_window_with_the_count() -> (
    None
):
    repeats = RepeatedRecords(window_seconds=30.0)
    outage = [record(at=n * 0.05) for n in range(1200)]
    assert logged(repeats, outage) == [
        "Unable connect to node with id 1: refused",
        "Unable connect to node with id 1: refused (599 more like it since the last one logged)",
    ]


def test_given_kinds_that_differ_by_template_level_or_logger_then_each_is_logged() -> None:
    repeats = RepeatedRecords(window_seconds=30.0)
    kinds = [
        record(at=0.0),
        record(at=0.1, msg="Unable to update metadata from %s (%s)"),
        record(at=0.2, level=logging.WARNING),
        record(at=0.3, name="aiokafka.consumer.fetcher"),
    ]
    assert len(logged(repeats, kinds)) == 4


def test_given_records_of_other_loggers_then_none_is_held_back() -> None:
    repeats = RepeatedRecords(window_seconds=30.0)
    ours = [record(at=n * 0.01, name="streams.sink") for n in range(50)]
    lookalike = [record(at=n * 0.01, name="aiokafkax") for n in range(5)]
    assert len(logged(repeats, ours + lookalike)) == 55


def test_given_a_quiet_spell_longer_than_the_window_then_the_next_one_is_logged_without_count() -> (
    None
):
    repeats = RepeatedRecords(window_seconds=30.0)
    assert logged(repeats, [record(at=0.0), record(at=31.0)]) == [
        "Unable connect to node with id 1: refused",
        "Unable connect to node with id 1: refused",
    ]


def test_given_two_handlers_sharing_the_filter_then_both_write_the_record_it_lets_through() -> None:
    first, second = logging.Handler(), logging.Handler()
    hold_back_repeats([first, second])
    one = record(at=0.0)
    assert first.filter(one) and second.filter(one)
    again = record(at=1.0)
    assert not first.filter(again) and not second.filter(again)
