"""The agent's batch runner without Kafka: offsets the consumer passed over are read and run
before the records after them, progress moves only after a step's outputs were delivered, and
a failed delivery stops the worker before anything is acknowledged."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka import TopicPartition

from rules.engine import default_rules
from schemas.codec import event_codec
from schemas.errors import RegistryUnavailable
from streams import agents
from streams.agents import Batches
from streams.checkpoints import Checkpoints
from streams.clock import Deadlines
from streams.keys import FileKeyStore
from streams.ledger import ErasureLedger
from streams.processing import BatchProcessor, Incoming
from streams.sealing import Sealer
from streams.worker_metrics import WorkerMetrics
from tests.factories import make_event
from tests.fakes import TableKnowledge
from tests.kafka_fakes import BatchProducer, Table, faust_app
from tests.unit.test_processing import POLICY

TOPIC = "uac.events"


class LogOfOnePartition:
    """The offset ranges of an in-memory log of partition 0."""

    def __init__(self, records: list[Incoming], log_start: int = 0) -> None:
        self.records, self.start = records, log_start
        self.reads: list[tuple[int, int]] = []

    async def log_start(self, _partition: int) -> int:
        return self.start

    async def read(self, _partition: int, start: int, end: int, chunk: int) -> AsyncIterator[Any]:
        self.reads.append((start, end))
        found = [r for r in self.records if max(start, self.start) <= r.offset < end]
        for n in range(0, len(found), chunk):
            yield found[n : n + chunk]


def events_log(sealer: Sealer, subjects: int) -> list[Incoming]:
    """Offsets 0..2n-1: an allergy then a conflicting drug per subject, subject by subject."""
    records: list[Incoming] = []
    for n in range(subjects):
        allergy = make_event("AllergyRecorded", f"a{n}", subject=f"p{n}")
        drug = make_event("MedicationPrescribed", f"rx{n}", subject=f"p{n}", at=timedelta(1))
        for event in (allergy, drug):
            value = sealer.seal(event.key, event_codec().encode(event))
            records.append(Incoming(event.key.encode(), value, TOPIC, 0, len(records)))
    return records


def log_of(tmp_path: Path, subjects: int, log: LogOfOnePartition) -> LogOfOnePartition:
    """`log` holding the events of `subjects` subjects, sealed with the key store at tmp_path."""
    log.records = events_log(Sealer(FileKeyStore(tmp_path / "keys")), subjects)
    return log


@pytest.fixture
def exits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's stop (`os._exit`) raises SystemExit instead of ending the test run."""

    def exit_now(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr("streams.agents.os._exit", exit_now)
    monkeypatch.setattr("streams.agents.logging.shutdown", lambda: None)


def runner(tmp_path: Path, log: LogOfOnePartition, fail_sends: bool = False) -> Batches:
    keys = FileKeyStore(tmp_path / "keys")
    sealer = Sealer(keys)
    producer = BatchProducer(fail=fail_sends)
    pipeline: Any = SimpleNamespace(
        app=faust_app(producer),
        topics=SimpleNamespace(
            events=TOPIC, accepted="acc", quarantine="q", alerts="alerts", partitions=4
        ),
        states=Table(),
        progress=Table(),
        sealer=sealer,
        ledger=ErasureLedger(keys),
        producer=producer,
    )
    processor = BatchProcessor(event_codec(), default_rules(TableKnowledge()), POLICY, sealer)
    return Batches(
        pipeline, processor, Checkpoints(1.0), Deadlines(), WorkerMetrics(), log, chunk=3
    )


def sent(batches: Batches, topic: str) -> list[bytes]:
    """Keys of the records the runner sent to `topic`, in order."""
    records: list[tuple[str, bytes, bytes]] = batches.pipeline.producer.sent  # type: ignore[attr-defined]
    return [key for to, key, _ in records if to == topic]


def test_given_a_batch_after_passed_over_offsets_then_they_run_first_and_nothing_is_lost(
    tmp_path: Path,
) -> None:
    log = log_of(tmp_path, 6, LogOfOnePartition([]))
    batches = runner(tmp_path, log)
    batches.pipeline.progress[0] = 2
    asyncio.run(batches.handle(log.records[9:]))
    assert log.reads == [(2, 9)]
    accepted = sent(batches, "acc")
    assert len(accepted) == 10
    assert {k.decode() for k in accepted} == {f"clinic-a:p{n}" for n in range(1, 6)}
    assert sorted(batches.pipeline.states) == [f"clinic-a:p{n}" for n in range(1, 6)]
    assert len(sent(batches, "alerts")) == 5
    assert batches.pipeline.progress[0] == 12
    samples = batches.metrics.registry.get_sample_value
    assert samples("uac_worker_recovered_records_total") == 7
    assert samples("uac_worker_offset_gaps_total") == 1


def test_given_no_progress_recorded_then_the_check_starts_at_the_log_start(
    tmp_path: Path,
) -> None:
    log = log_of(tmp_path, 4, LogOfOnePartition([], log_start=4))
    batches = runner(tmp_path, log)
    asyncio.run(batches.handle(log.records[6:]))
    assert log.reads == [(4, 6)]
    assert batches.pipeline.progress[0] == 8
    assert sorted(batches.pipeline.states) == ["clinic-a:p2", "clinic-a:p3"]


def test_given_offsets_deleted_by_retention_then_they_are_counted_not_invented(
    tmp_path: Path,
) -> None:
    log = log_of(tmp_path, 4, LogOfOnePartition([], log_start=4))
    batches = runner(tmp_path, log)
    batches.pipeline.progress[0] = 1
    asyncio.run(batches.handle(log.records[6:]))
    samples = batches.metrics.registry.get_sample_value
    assert samples("uac_worker_offsets_lost_to_retention_total") == 3
    assert samples("uac_worker_recovered_records_total") == 2
    assert batches.pipeline.progress[0] == 8


@pytest.mark.usefixtures("exits")
def test_given_a_delivery_that_fails_then_the_worker_stops_and_progress_stays(
    tmp_path: Path,
) -> None:
    log = log_of(tmp_path, 2, LogOfOnePartition([]))
    batches = runner(tmp_path, log, fail_sends=True)
    batches.pipeline.progress[0] = 0
    with pytest.raises(SystemExit) as stopped:
        asyncio.run(batches.handle(log.records))
    assert stopped.value.code == agents.EXIT_PUBLISH_FAILED
    assert batches.pipeline.progress[0] == 0
    assert batches.pipeline.states == {}


@pytest.mark.usefixtures("exits")
def test_given_passed_over_offsets_that_cannot_be_read_then_the_worker_stops_before_the_batch(
    tmp_path: Path,
) -> None:
    class UnreadableLog(LogOfOnePartition):
        async def read(self, _p: int, start: int, end: int, chunk: int) -> AsyncIterator[Any]:
            raise TimeoutError(f"offsets {start}-{end} could not be read")
            yield  # an async generator, like the real reader

    log = log_of(tmp_path, 3, UnreadableLog([]))
    batches = runner(tmp_path, log)
    batches.pipeline.progress[0] = 1
    with pytest.raises(SystemExit) as stopped:
        asyncio.run(batches.handle(log.records[4:]))
    assert stopped.value.code == agents.EXIT_PUBLISH_FAILED
    assert batches.pipeline.progress[0] == 1
    assert batches.pipeline.producer.sent == []  # type: ignore[attr-defined]


@pytest.mark.usefixtures("exits")
def test_given_the_schema_registry_unreachable_then_the_worker_stops_before_the_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An outage is not a verdict on the bytes: nothing is quarantined, sent or committed, and
    the restarted worker reads the batch again."""
    log = log_of(tmp_path, 2, LogOfOnePartition([]))
    batches = runner(tmp_path, log)
    batches.pipeline.progress[0] = 0

    def unreachable(_data: bytes) -> Any:
        raise RegistryUnavailable("schema registry unreachable: connection refused")

    monkeypatch.setattr(batches.processor.codec, "decode", unreachable)
    with pytest.raises(SystemExit) as stopped:
        asyncio.run(batches.handle(log.records))
    assert stopped.value.code == agents.EXIT_PUBLISH_FAILED
    assert batches.pipeline.progress[0] == 0
    assert batches.pipeline.producer.sent == []  # type: ignore[attr-defined]


class ConsumerAt:
    """Faust's consumer as far as a rewind reaches into it: fetched up to `position`."""

    def __init__(self, position: int | None) -> None:
        self.at = position
        self.seeks: list[tuple[Any, int]] = []

    def assignment(self) -> set[Any]:
        return {TP0}

    async def position(self, _tp: Any) -> int | None:
        return self.at

    async def seek(self, tp: Any, offset: int) -> None:
        self.seeks.append((tp, offset))
        self.at = offset


TP0 = TopicPartition(TOPIC, 0)


def consumer_of(batches: Batches) -> ConsumerAt:
    consumer = batches.pipeline.app.consumer
    assert isinstance(consumer, ConsumerAt)
    return consumer


def idle_runner(tmp_path: Path, fetched_to: int | None, processed_to: int) -> Batches:
    """A runner whose agent processed offsets below `processed_to` and whose consumer fetched
    those below `fetched_to`."""
    batches = runner(tmp_path, log_of(tmp_path, 6, LogOfOnePartition([])))
    app: Any = batches.pipeline.app  # the fake app of `runner`
    app.consumer, app.rebalancing, app.in_recovery = ConsumerAt(fetched_to), False, False
    batches.pipeline.progress[0] = processed_to
    return batches


def test_given_offsets_fetched_but_never_delivered_then_the_consumer_fetches_them_again(
    tmp_path: Path,
) -> None:
    batches = idle_runner(tmp_path, fetched_to=12, processed_to=5)
    asyncio.run(batches.rewind([TP0], still_idle=lambda: True))
    assert consumer_of(batches).seeks == [(TP0, 5)]
    assert batches.metrics.registry.get_sample_value("uac_worker_consumer_rewinds_total") == 1
    assert batches.pipeline.progress[0] == 5


@pytest.mark.parametrize(
    ("fetched_to", "idle"),
    [(5, True), (3, True), (None, True), (12, False)],
    ids=["not fetched past", "fetching behind", "no position", "agent busy again"],
)
def test_given_nothing_fetched_past_the_agent_or_an_agent_at_work_then_the_consumer_stays(
    tmp_path: Path, fetched_to: int | None, idle: bool
) -> None:
    batches = idle_runner(tmp_path, fetched_to=fetched_to, processed_to=5)
    asyncio.run(batches.rewind([TP0], still_idle=lambda: idle))
    assert consumer_of(batches).seeks == []
    assert batches.metrics.registry.get_sample_value("uac_worker_consumer_rewinds_total") == 0


def test_given_a_rebalance_under_way_then_the_consumer_stays(tmp_path: Path) -> None:
    batches = idle_runner(tmp_path, fetched_to=12, processed_to=5)
    batches.pipeline.app.rebalancing = True
    asyncio.run(batches.rewind([TP0], still_idle=lambda: True))
    assert consumer_of(batches).seeks == []
