"""The sink's `/health` status: whether a supervisor may count it as serving (200) or not (503)."""

from __future__ import annotations

from enum import StrEnum

from streams.broker_contact import broker_silent


class SinkStatus(StrEnum):
    OK = "ok"
    RETRYING = "retrying"
    WAITING_FOR_BROKER = "waiting_for_broker"

    @property
    def serving(self) -> bool:
        return self is SinkStatus.OK


def sink_status(
    *, retrying: bool, writing: bool, assigned: bool, heard_at: float | None, now: float
) -> SinkStatus:
    """`retrying` while a failed write to ClickHouse is retried (consumption paused);
    `waiting_for_broker` while the sink owns partitions but has heard nothing from the broker
    for `BROKER_SILENCE_SECONDS` (`heard_at` and `now` in one clock's seconds), unless it is busy
    writing a batch to ClickHouse (its fetches wait for that; a commit waiting for the broker
    does not count); else `ok`."""
    if retrying:
        return SinkStatus.RETRYING
    if assigned and not writing and broker_silent(heard_at, now):
        return SinkStatus.WAITING_FOR_BROKER
    return SinkStatus.OK
