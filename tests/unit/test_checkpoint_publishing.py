"""The worker's checkpoint timer: one subject whose checkpoint cannot be made is counted and
skipped; it never stops the others (an exception would crash the worker, in a loop); a batch
Kafka refuses is counted and logged; a tick after the producer stopped (the worker shutting
down) publishes nothing and crashes nothing."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import MessageSizeTooLargeError
from faust.exceptions import NotReady

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


def test_given_an_agent_holding_the_loop_then_a_tick_ends_within_its_interval() -> None:
    """Each pause lasts as long as the agent's batches that run in it (0.1 s each here): the
    tick stops before a chunk and pause would end past its 2 s interval, and grows its chunks."""
    checkpoints = Checkpoints(2.0)
    checkpoints.touch_all(f"clinic-a:patient-{n}" for n in range(1_000))
    chunks: list[int] = []

    async def publish(keys: list[str]) -> None:
        chunks.append(len(keys))

    async def agent_batches(stop: asyncio.Event) -> None:
        while not stop.is_set():
            time.sleep(0.1)  # a batch of the agent, holding the loop
            await asyncio.sleep(0)

    async def tick() -> float:
        stop = asyncio.Event()
        agent = asyncio.ensure_future(agent_batches(stop))
        await asyncio.sleep(0)
        started = time.monotonic()
        await checkpoints.publish_due(publish, lambda: True)
        took = time.monotonic() - started
        stop.set()
        await agent
        return took

    took = asyncio.run(tick())
    assert took < 2.0
    assert chunks[0] == Checkpoints.CHUNK
    assert max(chunks) > Checkpoints.CHUNK
    assert len(checkpoints.dirty) == 1_000 - sum(chunks) > 0


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
