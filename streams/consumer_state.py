"""What the worker's Faust consumer holds for its events partitions, for a diagnosis.

`kill -USR1 <worker pid>` writes this with the tasks' stacks (`streams.runtime`): whether the
flow is suspended, which partitions Faust has paused, takes records from or has buffered, and,
per events partition, the Kafka client's pause flag, fetch position and high watermark and the
offset Faust read last. It reads Faust's and aiokafka's private attributes (pinned versions), so
a missing one is named in the output instead of failing the dump.
"""

from __future__ import annotations

from typing import Any


def consumer_state(app: Any, topic: str) -> list[str]:
    """Lines describing the consumer's flow and each assigned partition of `topic`."""
    try:
        return _described(app, topic)
    except (AttributeError, KeyError, TypeError, RuntimeError) as missing:
        return [f"consumer state unavailable: {missing!r}"]


def _described(app: Any, topic: str) -> list[str]:
    consumer = app.consumer
    kafka = consumer._thread._consumer
    assignment = kafka._subscription.subscription.assignment
    read_offsets = consumer._read_offset

    def partitions(tps: Any) -> list[int]:
        return sorted(tp.partition for tp in tps or () if tp.topic == topic)

    lines = [
        f"flow active {consumer.flow_active}, can resume {consumer.can_resume_flow.is_set()}, "
        f"flow control active {app.flow_control.is_active()}, rebalancing {app.rebalancing}, "
        f"in recovery {app.in_recovery}",
        f"{topic}: Faust paused {partitions(consumer._paused_partitions)}, "
        f"active {partitions(consumer._active_partitions)}, "
        f"buffered {partitions(consumer._buffered_partitions)}",
    ]
    conductor = app.topics
    for tp in sorted(tp for tp in kafka.assignment() if tp.topic == topic):
        state = assignment.state_value(tp)
        lines.append(
            f"{topic}[{tp.partition}]: paused {state.paused}, "
            f"position {state._position}, status {state._status}, "
            f"high watermark {kafka.highwater(tp)}, Faust read {read_offsets.get(tp)}, "
            f"delivered to {_channels(conductor._tp_index.get(tp, ()))}, "
            f"handler {tp in conductor._tp_to_callback}"
        )
    subscribed = [channel for channel in conductor._topics if topic in channel.topics]
    lines.append(f"{topic}: channels subscribed {_channels(subscribed)}")
    return lines


def _channels(channels: Any) -> str:
    """Each channel's identity and the events waiting in its queue."""
    return "[" + ", ".join(f"{id(c):#x} ({c.queue.qsize()} queued)" for c in channels) + "]"
