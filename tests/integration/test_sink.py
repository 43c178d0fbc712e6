"""The ClickHouse sink against a real Kafka broker and the in-process ClickHouse engine.

One broker serves the session (see conftest.py); every test has its own topic prefix, consumer group and chDB
path (chDB hosts one engine path per process, so the sink of one test is stopped, and its
clients closed, before the next test opens another path). Records are produced directly with
aiokafka, framed with the real codecs, so the sink sees exactly the bytes the worker publishes.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import NAMESPACE_URL, uuid5

import aiohttp
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from clickhouse_connect.driver.client import Client

from projections.document import checkpoint_of, plain
from projections.state import replay
from schemas.alerts import Alert
from schemas.codec import alert_codec, checkpoint_codec, decision_codec, event_codec
from schemas.decisions import GateDecision
from schemas.events import Event
from streams import local_kafka
from streams.analytics import (
    DirectQueries,
    QueryFailed,
    QueryRefused,
    SinkQueries,
    TenantRequired,
    open_query_client,
    query_via_sink,
    running_sink,
)
from streams.clickhouse import Inserter, connect
from streams.settings import Settings
from streams.sink import RetryPolicy, Sink
from streams.topics import Topics, ensure_topics
from tests.factories import make_event

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        shutil.which("java") is None or shutil.which("mvn") is None,
        reason="needs java and mvn on PATH",
    ),
]

TENANT = "clinic-a"
PARTITIONS = 2
FAST_RETRY = RetryPolicy(first_seconds=0.05, max_seconds=0.2)


@pytest.fixture
def bootstrap(broker: local_kafka.BrokerInfo) -> str:
    """The session's broker (`tests/integration/conftest.py`, started with `running_broker`)."""
    return broker.bootstrap


@pytest.fixture
def settings(bootstrap: str, tmp_path: Path) -> Settings:
    name = uuid.uuid4().hex[:10]
    settings = Settings(
        home=tmp_path / "home",
        kafka_bootstrap=bootstrap,
        topic_prefix=f"t{name}.",
        partitions=PARTITIONS,
        app_id=f"uac-{name}",
        sink_batch_rows=200,
        sink_batch_seconds=0.2,
    )
    topics = Topics(settings.topic_prefix, settings.partitions)
    asyncio.run(ensure_topics(bootstrap, topics.specs()))
    return settings


# ------------------------------------------------------------------------------------------------
# What the worker would have published
# ------------------------------------------------------------------------------------------------


@dataclass
class Published:
    """Records produced in one test, and the offset after the last one per partition."""

    events: list[Event] = field(default_factory=list)
    decisions: int = 0
    alerts: int = 0
    checkpoints: int = 0
    ends: dict[TopicPartition, int] = field(default_factory=dict)

    def note(self, topic: str, partition: int, offset: int) -> None:
        tp = TopicPartition(topic, partition)
        self.ends[tp] = max(self.ends.get(tp, 0), offset + 1)


Message = tuple[str, bytes, bytes | None, list[tuple[str, bytes]]]


def _accepted(topics: Topics, events: Sequence[Event]) -> list[Message]:
    codec = event_codec()
    return [
        (
            topics.accepted,
            event.key.encode(),
            codec.encode(event),
            [
                ("uac-decision-id", str(uuid5(NAMESPACE_URL, f"d/{event.event_id}")).encode()),
                ("uac-source", f"{topics.events}/0/{index}".encode()),
                ("uac-decided-at", plain(datetime.now(UTC)).encode()),
            ],
        )
        for index, event in enumerate(events)
    ]


def _rejections(topics: Topics, count: int, tag: str) -> list[Message]:
    codec = decision_codec()
    messages: list[Message] = []
    for index in range(count):
        decision = GateDecision.model_validate(
            {
                "decision_id": uuid5(NAMESPACE_URL, f"rejected/{tag}/{index}"),
                "outcome": "rejected",
                "reasons": ["actor_not_allowed"],
                "detail": "actor is not allowed",
                "tenant_id": TENANT,
                "subject_id": f"patient-{index}",
                "message_sha256": "0" * 64,
                "source_topic": topics.events,
                "source_partition": 0,
                "source_offset": index,
                "decided_at": datetime.now(UTC),
            }
        )
        messages.append(
            (topics.quarantine, f"{TENANT}:patient-{index}".encode(), codec.encode(decision), [])
        )
    return messages


def _alerts(topics: Topics, count: int, tag: str) -> list[Message]:
    codec = alert_codec()
    messages: list[Message] = []
    for index in range(count):
        alert_id = uuid5(NAMESPACE_URL, f"alert/{tag}/{index}")
        alert = Alert.model_validate(
            {
                "lifecycle_id": uuid5(alert_id, "raised"),
                "alert_id": alert_id,
                "tenant_id": TENANT,
                "subject_id": "patient-0",
                "rule_id": "drug-allergy",
                "rule_version": 1,
                "status": "raised",
                "severity": "critical",
                "title": f"alert {index}",
                "detail": "",
                "cause": (f"claim-{index}",),
                "evidence": (),
                "trigger_event_id": "e",
                "occurred_at": datetime(2024, 1, 1, tzinfo=UTC),
            }
        )
        messages.append((topics.alerts, f"{TENANT}:patient-0".encode(), codec.encode(alert), []))
    return messages


def _checkpoints(topics: Topics, events: Sequence[Event]) -> list[Message]:
    codec = checkpoint_codec()
    by_subject: dict[str, list[Event]] = {}
    for event in events:
        by_subject.setdefault(event.subject_id, []).append(event)
    return [
        (
            topics.state,
            f"{TENANT}:{subject}".encode(),
            codec.encode(checkpoint_of(replay(history))),
            [],
        )
        for subject, history in sorted(by_subject.items())
    ]


def _events(count: int, tag: str) -> list[Event]:
    return [
        make_event(
            "TravelRecorded",
            f"{tag}-{index}",
            at=timedelta(minutes=index),
            subject=f"patient-{index % 5}",
            payload={"trip_id": f"{tag}-trip-{index}"},
        )
        for index in range(count)
    ]


async def _produce(bootstrap: str, messages: Sequence[Message], published: Published) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        sent = [
            await producer.send(topic, value, key=key, headers=headers)
            for topic, key, value, headers in messages
        ]
        for metadata in await asyncio.gather(*sent):
            published.note(metadata.topic, metadata.partition, metadata.offset)
    finally:
        await producer.stop()


async def publish(
    settings: Settings,
    events: int,
    *,
    rejected: int = 0,
    alerts: int = 0,
    extra: Sequence[Message] = (),
) -> Published:
    """Produce `events` accepted events (plus their checkpoints), rejections, alerts, extras."""
    topics = Topics(settings.topic_prefix, settings.partitions)
    tag = uuid.uuid4().hex[:6]
    published = Published(events=_events(events, tag), decisions=rejected, alerts=alerts)
    checkpoints = _checkpoints(topics, published.events)
    published.checkpoints = len(checkpoints)
    messages = [
        *_accepted(topics, published.events),
        *_rejections(topics, rejected, tag),
        *_alerts(topics, alerts, tag),
        *checkpoints,
        *extra,
    ]
    assert settings.kafka_bootstrap is not None
    await _produce(settings.kafka_bootstrap, messages, published)
    return published


# ------------------------------------------------------------------------------------------------
# Observing the sink: committed offsets, rows (through the sink's /query), metrics
# ------------------------------------------------------------------------------------------------


async def committed(settings: Settings) -> dict[TopicPartition, int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(f"{settings.app_id}-sink")
    finally:
        await admin.close()
    return {tp: meta.offset for tp, meta in offsets.items() if meta.offset >= 0}


async def rows(settings: Settings, sql: str) -> list[list[Any]]:
    result = await asyncio.to_thread(query_via_sink, settings.home, sql, TENANT)
    return result.rows


async def counts(settings: Settings) -> dict[str, int]:
    """Rows per relation after FINAL, and the raw stored count of events."""
    sql = (
        "SELECT (SELECT count() FROM events), (SELECT count() FROM gate_decisions), "
        "(SELECT count() FROM alerts), (SELECT count() FROM state_checkpoints), "
        "(SELECT uniqExact(event_id) FROM events)"
    )
    found = (await rows(settings, sql))[0]
    names = ("events", "gate_decisions", "alerts", "state_checkpoints", "distinct_events")
    return dict(zip(names, found, strict=True))


def expected_counts(*batches: Published) -> dict[str, int]:
    events = sum(len(batch.events) for batch in batches)
    return {
        "events": events,
        "gate_decisions": events + sum(batch.decisions for batch in batches),
        "alerts": sum(batch.alerts for batch in batches),
        "state_checkpoints": sum(batch.checkpoints for batch in batches),
        "distinct_events": events,
    }


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.1)


def metric(sink: Sink, name: str, labels: dict[str, str] | None = None) -> float:
    return sink.metrics.registry.get_sample_value(name, labels or {}) or 0.0


@asynccontextmanager
async def sink_running(settings: Settings, **options: Any) -> AsyncIterator[Sink]:
    """A started sink whose loop runs as a task; stopped and closed on exit, failure or not."""
    sink = Sink(settings, retry=FAST_RETRY, **options)
    await sink.start()
    stop = asyncio.Event()
    task = asyncio.create_task(sink.run(stop))
    try:
        yield sink
    finally:
        stop.set()
        try:
            await asyncio.wait_for(task, timeout=30)
        finally:
            await sink.stop()


async def all_committed(settings: Settings, published: Published) -> bool:
    done = await committed(settings)
    return all(done.get(tp, 0) >= end for tp, end in published.ends.items())


# ------------------------------------------------------------------------------------------------
# Tests
# ------------------------------------------------------------------------------------------------


def test_every_record_lands_exactly_once(settings: Settings) -> None:
    async def scenario() -> None:
        topics = Topics(settings.topic_prefix, settings.partitions)
        garbage: Message = (topics.accepted, b"clinic-a:patient-9", b"\x07not avro", [])
        tombstone: Message = (topics.state, b"clinic-a:patient-9", None, [])
        published = await publish(settings, 300, rejected=20, alerts=10, extra=[garbage, tombstone])
        async with sink_running(settings) as sink:
            await eventually(lambda: all_committed(settings, published))
            assert await counts(settings) == expected_counts(published)
            labels = {"topic": topics.accepted}
            assert metric(sink, "uac_sink_undecodable_records_total", labels) == 1
            assert metric(sink, "uac_sink_rows_written_total", {"table": "events"}) == 300
            trips = await rows(settings, "SELECT count() FROM trips")
            assert trips == [[300]]

    asyncio.run(scenario())


def test_offsets_are_committed_only_after_rows_are_visible(settings: Settings) -> None:
    async def scenario() -> None:
        published = await publish(settings, 1500)
        accepted = Topics(settings.topic_prefix, settings.partitions).accepted
        observations: list[tuple[int, int]] = []
        async with sink_running(settings):

            async def check() -> bool:
                done = await committed(settings)
                committed_events = sum(o for tp, o in done.items() if tp.topic == accepted)
                visible = (await rows(settings, "SELECT count() FROM events"))[0][0]
                observations.append((committed_events, visible))
                assert committed_events <= visible, "an offset was committed before its row"
                return all(done.get(tp, 0) >= end for tp, end in published.ends.items())

            await eventually(check)
        assert observations[-1][0] == 1500

    asyncio.run(scenario())


class FailingInserter:
    """Fails inserts (into `tables`, default all) until `healed` is set; otherwise delegates to
    the real client."""

    def __init__(
        self, client: Client, healed: threading.Event, tables: frozenset[str] | None = None
    ) -> None:
        self._client = client
        self._healed = healed
        self._tables = tables
        self.failures = 0

    def insert(
        self,
        table: str,
        data: Sequence[Sequence[Any]],
        *,
        column_names: Sequence[str],
        column_oriented: bool,
        settings: dict[str, Any],
    ) -> object:
        failing = self._tables is None or table in self._tables
        if failing and not self._healed.is_set():
            self.failures += 1
            raise ConnectionError("ClickHouse is down (injected)")
        return self._client.insert(
            table,
            data,
            column_names=column_names,
            column_oriented=column_oriented,
            settings=settings,
        )


def test_a_failing_insert_is_retried_and_nothing_is_committed_meanwhile(
    settings: Settings,
) -> None:
    healed = threading.Event()
    inserters: list[FailingInserter] = []

    def failing(client: Client) -> Inserter:
        inserters.append(FailingInserter(client, healed))
        return inserters[0]

    async def scenario() -> None:
        published = await publish(settings, 200, rejected=5, alerts=5)
        async with sink_running(settings, inserter_factory=failing) as sink:
            await eventually(lambda: _failed_often(inserters, 4))
            assert await committed(settings) == {}
            assert await counts(settings) == dict.fromkeys(expected_counts(published), 0)
            assert metric(sink, "uac_sink_insert_retries_total") >= 4
            assert await http_status(sink, "/health") == (503, "retrying")
            healed_metrics = await http_status(sink, "/metrics")
            assert "uac_sink_insert_retries_total" in healed_metrics[1]
            healed.set()
            await eventually(lambda: all_committed(settings, published))
            assert await counts(settings) == expected_counts(published)
            assert await http_status(sink, "/health") == (200, "ok")

    asyncio.run(scenario())


def test_a_retry_after_a_partial_insert_is_deduplicated_by_its_token(settings: Settings) -> None:
    healed = threading.Event()
    inserters: list[FailingInserter] = []

    def decisions_fail(client: Client) -> Inserter:
        inserters.append(FailingInserter(client, healed, frozenset({"uac.gate_decisions"})))
        return inserters[0]

    async def scenario() -> None:
        published = await publish(settings, 120)
        async with sink_running(settings, inserter_factory=decisions_fail):
            await eventually(lambda: _failed_often(inserters, 3))
            healed.set()
            await eventually(lambda: all_committed(settings, published))
            stored = await asyncio.to_thread(raw_event_rows, settings)
        assert stored == 120

    asyncio.run(scenario())


def raw_event_rows(settings: Settings) -> int:
    """Rows physically stored in uac.events (no FINAL), read on the sink's own chDB path: the
    same process may open more clients on the path it already hosts."""
    client = connect(settings)
    try:
        return int(client.query("SELECT count() FROM uac.events").result_rows[0][0])
    finally:
        client.close()


async def http_status(sink: Sink, path: str) -> tuple[int, str]:
    """Status and body of a GET to the sink (for /health: the `status` field)."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{sink.port}{path}") as response,
    ):
        if path == "/health":
            return response.status, (await response.json())["status"]
        return response.status, await response.text()


async def _failed_often(inserters: list[FailingInserter], times: int) -> bool:
    return bool(inserters) and inserters[0].failures >= times


def test_a_restarted_sink_duplicates_nothing(settings: Settings) -> None:
    async def scenario() -> None:
        first = await publish(settings, 250, rejected=10, alerts=4)
        async with sink_running(settings):
            await eventually(lambda: all_committed(settings, first))
        second = await publish(settings, 150, rejected=5, alerts=2)
        async with sink_running(settings):
            await eventually(lambda: all_committed(settings, second))
            assert await counts(settings) == expected_counts(first, second)
        await forget_commits(settings, first.ends)
        async with sink_running(settings) as replaying:
            await eventually(lambda: all_committed(settings, second))
            assert await counts(settings) == expected_counts(first, second)
            reread = metric(replaying, "uac_sink_rows_written_total", {"table": "events"})
            assert reread == len(first.events) + len(second.events)

    asyncio.run(scenario())


async def forget_commits(settings: Settings, partitions: dict[TopicPartition, int]) -> None:
    """As if the sink had crashed after inserting but before committing: offsets back to 0."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap,
        group_id=f"{settings.app_id}-sink",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        consumer.assign(list(partitions))
        await consumer.commit(dict.fromkeys(partitions, 0))
    finally:
        await consumer.stop()


def test_queries_go_through_the_running_sink_then_directly(settings: Settings) -> None:
    async def scenario() -> None:
        published = await publish(settings, 40)
        async with sink_running(settings) as sink:
            await eventually(lambda: all_committed(settings, published))
            client = open_query_client(settings)
            assert isinstance(client, SinkQueries)
            assert client.address.port == sink.port
            result = await asyncio.to_thread(client.query, "SELECT count() FROM events", TENANT)
            assert result.rows == [[40]]
            with pytest.raises(QueryRefused, match="system"):
                await asyncio.to_thread(client.query, "SELECT * FROM system.tables", TENANT)
            with pytest.raises(TenantRequired):
                await asyncio.to_thread(query_via_sink, settings.home, "SELECT 1", None)
            with pytest.raises(QueryFailed, match="no_such_column"):
                await asyncio.to_thread(client.query, "SELECT no_such_column FROM events", TENANT)
        assert running_sink(settings.home) is None
        direct = open_query_client(settings)
        assert isinstance(direct, DirectQueries)
        with direct:
            assert direct.query("SELECT count() FROM events", TENANT).rows == [[40]]

    asyncio.run(scenario())
