"""What `kill -USR1` tells an operator about the worker's consumer."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from aiokafka import TopicPartition

from streams.consumer_state import consumer_state

EVENTS = TopicPartition("uac.events", 0)
OTHER = TopicPartition("uac-user-state-changelog", 0)


class Channel:
    topics = ("uac.events",)

    def __init__(self, queued: int) -> None:
        self.queue: asyncio.Queue[int] = asyncio.Queue()
        for n in range(queued):
            self.queue.put_nowait(n)


def fake_app() -> Any:
    """Faust's app and aiokafka's consumer as far as the diagnosis reads them."""
    channel = Channel(queued=1)
    states = {EVENTS: SimpleNamespace(paused=False, _position=10, _status="CONSUMING")}
    kafka = SimpleNamespace(
        assignment=lambda: {EVENTS, OTHER},
        highwater={EVENTS: 10}.get,
        _subscription=SimpleNamespace(
            subscription=SimpleNamespace(assignment=SimpleNamespace(state_value=states.get))
        ),
    )
    consumer = SimpleNamespace(
        flow_active=True,
        can_resume_flow=SimpleNamespace(is_set=lambda: True),
        _paused_partitions={OTHER},
        _active_partitions={EVENTS},
        _buffered_partitions=set(),
        _thread=SimpleNamespace(_consumer=kafka),
        _read_offset={EVENTS: 4},
    )
    return SimpleNamespace(
        consumer=consumer,
        flow_control=SimpleNamespace(is_active=lambda: True),
        rebalancing=False,
        in_recovery=False,
        topics=SimpleNamespace(
            _tp_index={EVENTS: {channel}}, _tp_to_callback={EVENTS: None}, _topics={channel}
        ),
    )


def test_given_a_consumer_fetched_past_what_it_read_then_the_dump_shows_both_offsets() -> None:
    lines = consumer_state(fake_app(), "uac.events")
    assert lines[0].startswith("flow active True, can resume True")
    assert lines[1] == "uac.events: Faust paused [], active [0], buffered []"
    assert lines[2].startswith("uac.events[0]: paused False, position 10, status CONSUMING")
    assert "high watermark 10, Faust read 4" in lines[2]
    assert "(1 queued)" in lines[2]
    assert lines[2].endswith("handler True")
    assert len(lines) == 4


def test_given_a_faust_without_an_attribute_then_the_dump_names_it_instead_of_failing() -> None:
    app = fake_app()
    del app.consumer._thread
    assert consumer_state(app, "uac.events")[0].startswith("consumer state unavailable:")
