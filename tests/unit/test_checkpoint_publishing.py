"""The worker's checkpoint timer: one subject whose checkpoint cannot be made is counted and
skipped; it never stops the others (an exception would crash the worker, in a loop); a batch
Kafka refuses is counted and logged; a tick after the producer stopped (the worker shutting
down) publishes nothing and crashes nothing."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import MessageSizeTooLargeError
from faust.exceptions import NotReady
from hypothesis import given
from hypothesis import strategies as st

from projections.state import replay
from schemas.codec import checkpoint_codec, event_codec
from streams.checkpoints import Checkpoints, publish_checkpoints
from streams.keys import FileKeyStore
from streams.pipeline_access import owned_subjects, partition_of, producer_running, settled
from streams.sealing import Sealer
from streams.table_codecs import StoredState
from streams.worker_metrics import WorkerMetrics
from tests.factories import make_event
from tests.kafka_fakes import BatchProducer, Table, faust_app


def test_given_a_subject_whose_history_is_incomplete_then_the_others_still_get_checkpoints(
    tmp_path: Path,
) -> None:
    sealer = Sealer(FileKeyStore(tmp_path / "keys"))
    event = make_event("PreferenceStated", "diet", subject="patient-2")
    head, _ = StoredState.first(replay([event]), [event_codec().encode(event)], sealer)
    states = Table(
        {
            "clinic-a:patient-1": StoredState(None, b"", b"", segments=2),
            "clinic-a:patient-2": head,
        }
    )
    producer = BatchProducer()
    pipeline = SimpleNamespace(
        app=faust_app(producer),
        topics=SimpleNamespace(state="uac.state", partitions=4),
        states=states,
        sealer=sealer,
    )
    metrics = WorkerMetrics()
    keys = ["clinic-a:patient-1", "clinic-a:patient-2"]
    asyncio.run(publish_checkpoints(pipeline, keys, metrics))  # type: ignore[arg-type]
    sent = producer.sent
    assert [(topic, key) for topic, key, _ in sent] == [("uac.state", b"clinic-a:patient-2")]
    checkpoint = checkpoint_codec().decode(sealer.open(sent[0][2])[1])
    assert (checkpoint.subject_id, checkpoint.version) == ("patient-2", 1)
    assert metrics.registry.get_sample_value("uac_worker_checkpoint_failures_total") == 1


def test_given_kafka_refuses_a_checkpoint_then_it_is_counted_and_logged_not_lost_silently(
    tmp_path: Path, caplog: Any
) -> None:
    sealer = Sealer(FileKeyStore(tmp_path / "keys"))
    event = make_event("PreferenceStated", "diet")
    head, _ = StoredState.first(replay([event]), [event_codec().encode(event)], sealer)
    producer = BatchProducer(refuse=MessageSizeTooLargeError())
    pipeline = SimpleNamespace(
        app=faust_app(producer),
        topics=SimpleNamespace(state="uac.state", partitions=4),
        states=Table({"clinic-a:patient-1": head}),
        sealer=sealer,
    )
    metrics = WorkerMetrics()

    async def publish_and_settle() -> None:
        await publish_checkpoints(pipeline, ["clinic-a:patient-1"], metrics)  # type: ignore[arg-type]
        await asyncio.sleep(0)

    asyncio.run(publish_and_settle())
    refused = "uac_worker_checkpoint_batches_refused_total"
    assert metrics.registry.get_sample_value(refused) == 1
    assert "MessageSizeTooLargeError" in caplog.text


def stopped_producer() -> Any:
    """Faust's producer after it stopped: its aiokafka producer is gone."""

    def gone() -> Any:
        raise NotReady("Producer service not yet started")

    return SimpleNamespace(producer=SimpleNamespace(_ensure_producer=gone))


def test_given_the_producer_stopped_then_a_timer_tick_publishes_nothing_and_keeps_them_due() -> (
    None
):
    checkpoints = Checkpoints(1.0)
    checkpoints.touch_all(["clinic-a:patient-1", "clinic-a:patient-2"])
    published: list[list[str]] = []

    async def publish(keys: list[str]) -> None:
        published.append(keys)

    pipeline = SimpleNamespace(app=stopped_producer())
    asyncio.run(checkpoints.publish_due(publish, lambda: producer_running(pipeline)))  # type: ignore[arg-type]
    assert published == []
    assert list(checkpoints.dirty) == ["clinic-a:patient-1", "clinic-a:patient-2"]


def test_given_a_running_producer_then_a_timer_tick_publishes_the_due_subjects() -> None:
    checkpoints = Checkpoints(1.0)
    checkpoints.touch_all(["clinic-a:patient-1", "clinic-a:patient-2"])
    published: list[str] = []

    async def publish(keys: list[str]) -> None:
        published.extend(keys)

    pipeline = SimpleNamespace(app=faust_app(BatchProducer()))
    asyncio.run(checkpoints.publish_due(publish, lambda: producer_running(pipeline)))  # type: ignore[arg-type]
    assert published == ["clinic-a:patient-1", "clinic-a:patient-2"]
    assert not checkpoints.dirty


def test_given_the_loop_away_longer_than_the_pause_then_the_next_chunk_is_larger() -> None:
    checkpoints = Checkpoints(1.0)
    assert checkpoints.next_chunk(5, took=0.002, away=0.004) == 5
    assert checkpoints.next_chunk(5, took=0.002, away=0.060) == 75
    assert checkpoints.next_chunk(5, took=0.002, away=5.0) == Checkpoints.MAX_CHUNK
    assert checkpoints.next_chunk(75, took=0.030, away=0.001) == Checkpoints.CHUNK
    assert checkpoints.next_chunk(20, took=0.0, away=0.5) == 20


@dataclass
class SimulatedLoop:
    """An event loop whose clock moves only by what runs on it: each checkpoint takes `pace`
    seconds, and an agent working through a backlog runs a batch of `batch` seconds whenever
    the timer sleeps, until the sleep is over (none when `batch` is 0: the loop is idle)."""

    pace: float
    batch: float
    now: float = 0.0
    chunks: list[int] = field(default_factory=list)

    def clock(self) -> float:
        return self.now

    async def publish(self, keys: list[str]) -> None:
        self.chunks.append(len(keys))
        self.now += self.pace * len(keys)

    async def pause(self, seconds: float) -> None:
        if self.batch == 0:
            self.now += seconds
            return
        self.now += self.batch * max(1, math.ceil(seconds / self.batch))


def tick_on(loop: SimulatedLoop, interval: float, dirty: int) -> tuple[Checkpoints, float]:
    checkpoints = Checkpoints(interval, clock=loop.clock, pause=loop.pause)
    checkpoints.touch_all(f"clinic-a:patient-{n}" for n in range(dirty))
    asyncio.run(checkpoints.publish_due(loop.publish, lambda: True))
    return checkpoints, loop.now


def test_given_an_agent_holding_the_loop_then_a_tick_grows_its_chunks_and_ends_in_time() -> None:
    """Each pause lasts as long as the agent's batch that runs in it (0.1 s here): chunks grow
    to fill a third of that stretch, and the tick leaves the rest for the next one."""
    loop = SimulatedLoop(pace=0.0004, batch=0.1)
    checkpoints, took = tick_on(loop, interval=2.0, dirty=1_000)
    assert took <= 2.0
    assert loop.chunks[0] == Checkpoints.CHUNK
    assert max(loop.chunks) > Checkpoints.CHUNK
    assert len(checkpoints.dirty) == 1_000 - sum(loop.chunks) > 0


@given(
    interval=st.floats(0.5, 10.0),
    batch_share=st.one_of(st.just(0.0), st.floats(0.001, 0.25)),
    pace=st.floats(1e-6, 1e-3),
    dirty=st.integers(1, 5_000),
)
def test_a_tick_ends_within_its_interval_however_busy_the_loop(
    interval: float, batch_share: float, pace: float, dirty: int
) -> None:
    """Whatever the agent's batches and the checkpoints' pace, a tick (which may not overlap
    the next) ends within its interval, spends at most its budget and one chunk's work on
    checkpoints, and publishes each subject once."""
    loop = SimulatedLoop(pace=pace, batch=batch_share * interval)
    checkpoints, took = tick_on(loop, interval, dirty)
    assert took <= interval + 1e-9
    assert 0 < sum(loop.chunks) == dirty - len(checkpoints.dirty)
    assert sum(loop.chunks[:-1]) * pace < Checkpoints.BUDGET * interval + 1e-9


def test_only_subjects_of_owned_partitions_are_published_and_only_once_settled() -> None:
    """A worker's table also holds standby copies of other workers' partitions (and, while it
    recovers, states older than the owner's): their checkpoints are not its to publish."""
    assignment = {TopicPartition("uac.events", 1), TopicPartition("uac.events-changelog", 0)}
    app = SimpleNamespace(
        consumer=SimpleNamespace(assignment=lambda: assignment),
        rebalancing=False,
        in_recovery=False,
    )
    pipeline: Any = SimpleNamespace(
        app=app, topics=SimpleNamespace(events="uac.events", partitions=4)
    )
    keys = [f"clinic-a:patient-{n}" for n in range(12)]
    owned = owned_subjects(pipeline, keys)
    assert owned
    assert owned == [key for key in keys if partition_of(pipeline, key) == 1]
    assert settled(pipeline)
    app.in_recovery = True
    assert not settled(pipeline)
