"""The sink's `/health` status: a supervisor counts the sink as serving only while it is
neither retrying a ClickHouse write nor cut off from the broker."""

from __future__ import annotations

import pytest

from streams.broker_contact import BROKER_SILENCE_SECONDS
from streams.sink_health import SinkStatus, sink_status

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("retrying", "writing", "assigned", "silent_for", "expected"),
    [
        pytest.param(False, False, True, 0.5, SinkStatus.OK, id="heard half a second ago"),
        pytest.param(
            False,
            False,
            True,
            BROKER_SILENCE_SECONDS - 1,
            SinkStatus.OK,
            id="a few fetches missed",
        ),
        pytest.param(
            False,
            False,
            True,
            BROKER_SILENCE_SECONDS + 1,
            SinkStatus.WAITING_FOR_BROKER,
            id="broker silent too long",
        ),
        pytest.param(
            False,
            True,
            True,
            BROKER_SILENCE_SECONDS * 2,
            SinkStatus.OK,
            id="busy writing a long batch: its fetches wait for it",
        ),
        pytest.param(
            False,
            False,
            False,
            BROKER_SILENCE_SECONDS * 2,
            SinkStatus.OK,
            id="no partitions owned: nothing to hear about",
        ),
        pytest.param(
            False, False, True, None, SinkStatus.OK, id="nothing heard yet: still starting"
        ),
        pytest.param(True, True, True, 0.5, SinkStatus.RETRYING, id="retrying a write"),
        pytest.param(
            True,
            False,
            True,
            BROKER_SILENCE_SECONDS * 2,
            SinkStatus.RETRYING,
            id="retrying and silent: the write is the cause to fix first",
        ),
    ],
)
def test_given_what_the_sink_is_doing_then_its_health_status(
    retrying: bool, writing: bool, assigned: bool, silent_for: float | None, expected: SinkStatus
) -> None:
    heard_at = None if silent_for is None else NOW - silent_for
    status = sink_status(
        retrying=retrying, writing=writing, assigned=assigned, heard_at=heard_at, now=NOW
    )
    assert status is expected
    assert status.serving is (expected is SinkStatus.OK)
