"""Which events of the log `uac check-log` reports as undecided."""

from __future__ import annotations

from types import SimpleNamespace

from streams.log_check import source_of_accepted, undecided


def test_only_records_below_the_committed_offset_without_a_decision_are_undecided() -> None:
    events = [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 5)]
    decided = {(0, 0), (0, 2), (1, 5)}
    assert undecided(events, decided, {0: 3, 1: 6}) == [(0, 1), (1, 0)]


def test_a_partition_never_committed_is_all_pending() -> None:
    assert undecided([(2, 0), (2, 1)], set(), {}) == []


def test_the_source_header_names_a_record_of_the_events_topic_only() -> None:
    accepted = SimpleNamespace(headers=[("uac-source", b"uac.events/3/41")])
    other = SimpleNamespace(headers=[("uac-source", b"elsewhere/3/41")])
    bare = SimpleNamespace(headers=None)
    assert source_of_accepted(accepted, "uac.events") == (3, 41)
    assert source_of_accepted(other, "uac.events") is None
    assert source_of_accepted(bare, "uac.events") is None
