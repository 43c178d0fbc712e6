"""The ClickHouse sink against a real Kafka broker and the in-process ClickHouse engine.

One broker serves the session (see conftest.py); every test has its own topic prefix, consumer
group, key store and chDB path (chDB hosts one engine path per process, so the sink of one test
is stopped, and its clients closed, before the next test opens another path). Records are
produced directly with aiokafka, framed with the real codecs and sealed with the subject's key
where the worker seals them (accepted events, alerts, checkpoints), so the sink sees exactly
the bytes the worker publishes.
"""

from __future__ import annotations

import asyncio
import shutil
import stat
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
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
from schemas.codec import (
    AvroCodec,
    alert_codec,
    checkpoint_codec,
    decision_codec,
    erasure_codec,
    event_codec,
    read_audit_codec,
)
from schemas.decisions import GateDecision
from schemas.erasures import ErasureRecorded, ReadAudited, subject_ref
from schemas.errors import RegistryUnavailable
from schemas.events import Event
from streams import local_kafka
from streams.alert_lineage import AlertNotFound
from streams.analytics import QueryFailed, TenantRequired
from streams.clickhouse import Inserter, connect
from streams.keys import FileKeyStore
from streams.query_clients import (
    DirectQueries,
    SinkAddress,
    SinkQueries,
    open_query_client,
    post_query,
    query_via_sink,
    running_sink,
    sink_record_path,
)
from streams.rows import SUBJECT_TABLES
from streams.sealing import Sealer
from streams.settings import Settings
from streams.sink import Sink
from streams.sink_batches import RetryPolicy
from streams.sql_guard import QueryRefused
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


def sealer_of(settings: Settings) -> Sealer:
    """The key store the worker shares with the sink (UAC_HOME/keys)."""
    return Sealer(FileKeyStore(settings.keys_dir))


def _accepted(topics: Topics, events: Sequence[Event], sealer: Sealer | None) -> list[Message]:
    """Accepted events as the worker forwards them: sealed, or unsealed (`sealer` None) as the
    gate lets erasure requests through."""
    codec = event_codec()
    return [
        (
            topics.accepted,
            event.key.encode(),
            codec.encode(event) if sealer is None else sealer.seal(event.key, codec.encode(event)),
            [
                ("uac-decision-id", str(uuid5(NAMESPACE_URL, f"d/{event.event_id}")).encode()),
                ("uac-source", f"{topics.events}/0/{index}".encode()),
                ("uac-decided-at", plain(datetime.now(UTC)).encode()),
            ],
        )
        for index, event in enumerate(events)
    ]


def _rejections(
    topics: Topics, count: int, tag: str, tenant: str = TENANT, subject: str | None = None
) -> list[Message]:
    """Quarantine decisions (never sealed) about `subject`, or about patient-0, patient-1, ..."""
    codec = decision_codec()
    messages: list[Message] = []
    for index in range(count):
        about = subject or f"patient-{index}"
        decision = GateDecision.model_validate(
            {
                "decision_id": uuid5(NAMESPACE_URL, f"rejected/{tag}/{tenant}/{about}/{index}"),
                "outcome": "rejected",
                "reasons": ["actor_not_allowed"],
                "detail": "actor is not allowed",
                "tenant_id": tenant,
                "subject_id": about,
                "message_sha256": "0" * 64,
                "source_topic": topics.events,
                "source_partition": 0,
                "source_offset": index,
                "decided_at": datetime.now(UTC),
            }
        )
        key = f"{tenant}:{about}".encode()
        messages.append((topics.quarantine, key, codec.encode(decision), []))
    return messages


def _alerts(
    topics: Topics,
    count: int,
    tag: str,
    sealer: Sealer,
    tenant: str = TENANT,
    subject: str = "patient-0",
) -> list[Message]:
    codec = alert_codec()
    messages: list[Message] = []
    for index in range(count):
        alert_id = uuid5(NAMESPACE_URL, f"alert/{tag}/{tenant}/{subject}/{index}")
        alert = Alert.model_validate(
            {
                "lifecycle_id": uuid5(alert_id, "raised"),
                "alert_id": alert_id,
                "tenant_id": tenant,
                "subject_id": subject,
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
        key = f"{tenant}:{subject}"
        sealed = sealer.seal(key, codec.encode(alert))
        messages.append((topics.alerts, key.encode(), sealed, []))
    return messages


def _checkpoints(topics: Topics, events: Sequence[Event], sealer: Sealer) -> list[Message]:
    codec = checkpoint_codec()
    by_subject: dict[str, list[Event]] = {}
    for event in events:
        by_subject.setdefault(event.key, []).append(event)
    return [
        (
            topics.state,
            key.encode(),
            sealer.seal(key, codec.encode(checkpoint_of(replay(history)))),
            [],
        )
        for key, history in sorted(by_subject.items())
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
    sealer = sealer_of(settings)
    tag = uuid.uuid4().hex[:6]
    published = Published(events=_events(events, tag), decisions=rejected, alerts=alerts)
    checkpoints = _checkpoints(topics, published.events, sealer)
    published.checkpoints = len(checkpoints)
    messages = [
        *_accepted(topics, published.events, sealer),
        *_rejections(topics, rejected, tag),
        *_alerts(topics, alerts, tag, sealer),
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
            tombstones = {"topic": topics.state, "reason": "tombstone"}
            assert metric(sink, "uac_sink_skipped_records_total", tombstones) == 1
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


def test_given_the_schema_registry_unreachable_then_the_sink_stops_without_committing(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An alert whose writer schema the registry cannot be asked about is not skipped as
    undecodable: the sink stops, and its offset stays for the restarted sink."""
    alert_schema = alert_codec().schema_id
    decode = AvroCodec.decode

    def registry_down_for_alerts(codec: AvroCodec[Any], data: bytes) -> Any:
        if codec.schema_id == alert_schema:
            raise RegistryUnavailable("schema registry unreachable: connection refused")
        return decode(codec, data)

    monkeypatch.setattr(AvroCodec, "decode", registry_down_for_alerts)

    async def scenario() -> None:
        published = await publish(settings, 20, alerts=5)
        sink = Sink(settings, retry=FAST_RETRY)
        await sink.start()
        try:
            with pytest.raises(RegistryUnavailable):
                await asyncio.wait_for(sink.run(asyncio.Event()), timeout=60)
        finally:
            await sink.stop()
        done = await committed(settings)
        alerts_topic = Topics(settings.topic_prefix, settings.partitions).alerts
        assert [tp for tp in published.ends if tp.topic == alerts_topic]
        assert not [tp for tp in done if tp.topic == alerts_topic]
        assert metric(sink, "uac_sink_undecodable_records_total", {"topic": alerts_topic}) == 0

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


def test_given_a_caller_without_the_read_token_then_the_sink_reads_nothing(
    settings: Settings,
) -> None:
    async def scenario() -> None:
        published = await publish(settings, 5)
        async with sink_running(settings) as sink:
            await eventually(lambda: all_committed(settings, published))
            record = sink_record_path(settings.home)
            assert stat.S_IMODE(record.stat().st_mode) == 0o600
            address = _address(settings)
            wrong = {"Authorization": "Bearer not-the-token"}
            for path, body in (
                ("/query", {"sql": "SELECT * FROM events", "tenant": TENANT}),
                ("/explain", {"alert_id": str(uuid.uuid4()), "tenant": TENANT}),
            ):
                for headers in ({}, wrong):
                    status, answer = await _post_json(sink.port, path, body, headers)
                    assert (status, answer["error"]) == (401, "unauthorized")
            forged = replace(address, read_token=address.read_token[::-1])
            count = "SELECT count() FROM events"
            with pytest.raises(QueryRefused, match="read token"):
                await asyncio.to_thread(post_query, forged, count, TENANT)
            allowed = await asyncio.to_thread(post_query, address, count, TENANT)
            assert allowed.rows == [[5]]

    asyncio.run(scenario())


async def _post_json(
    port: int, path: str, body: dict[str, Any], headers: dict[str, str]
) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"http://127.0.0.1:{port}{path}", json=body, headers=headers) as response,
    ):
        return response.status, await response.json()


# ------------------------------------------------------------------------------------------------
# Erasure, replays and the audit of reads
# ------------------------------------------------------------------------------------------------

VICTIM, BYSTANDER, OTHER_TENANT = "victim", "bystander", "clinic-b"


def _history(tenant: str, subject: str) -> list[Event]:
    return [
        make_event(
            kind,
            f"{tenant}/{subject}/{kind}",
            tenant=tenant,
            subject=subject,
            at=timedelta(hours=hour),
        )
        for hour, kind in enumerate(("PreferenceStated", "AllergyRecorded", "TravelRecorded"))
    ]


def _subject_records(
    topics: Topics, tenant: str, subject: str, sealer: Sealer, tag: str
) -> list[Message]:
    """Everything the worker publishes about one subject: sealed accepted events, a sealed
    checkpoint and alert, and an unsealed quarantine decision."""
    history = _history(tenant, subject)
    return [
        *_accepted(topics, history, sealer),
        *_checkpoints(topics, history, sealer),
        *_alerts(topics, 1, tag, sealer, tenant, subject),
        *_rejections(topics, 1, tag, tenant, subject),
    ]


def _erasure_request(tenant: str, subject: str) -> Event:
    return make_event(
        "ErasureRequested", f"erase/{tenant}/{subject}", tenant=tenant, subject=subject
    )


def _ledger_entry(topics: Topics, tenant: str, subject: str) -> Message:
    request = _erasure_request(tenant, subject)
    entry = ErasureRecorded(
        erasure_id=request.event_id,
        tenant_id=tenant,
        subject_ref=subject_ref(tenant, subject),
        requested_at=request.occurred_at,
        recorded_at=datetime.now(UTC),
        requested_by=request.actor,
        key_destroyed=True,
    )
    return topics.erasures, entry.subject_ref.encode(), erasure_codec().encode(entry), []


def stored_rows(
    settings: Settings, tenant: str, subject: str, *, final: bool = False
) -> dict[str, int]:
    """Rows of a subject physically stored in each table, masked rows included (`final`:
    after ReplacingMergeTree's collapse of re-inserted copies), read on the sink's own chDB
    path (the same process may open more clients on the path it hosts)."""
    collapse = " FINAL" if final else ""
    client = connect(settings)
    try:
        return {
            table: int(
                client.query(
                    f"SELECT count() FROM uac.{table}{collapse} WHERE tenant_id = {{t:String}} "  # noqa: S608
                    "AND subject_id = {s:String}",
                    parameters={"t": tenant, "s": subject},
                    settings={"apply_deleted_mask": 0},
                ).result_rows[0][0]
            )
            for table in SUBJECT_TABLES
        }
    finally:
        client.close()


def merged(*batches: Published) -> Published:
    """One Published whose ends are the furthest of all batches (to wait for every commit)."""
    whole = Published()
    for batch in batches:
        for tp, end in batch.ends.items():
            whole.ends[tp] = max(whole.ends.get(tp, 0), end)
    return whole


EVERY_TABLE = {"events": 3, "gate_decisions": 4, "alerts": 1, "state_checkpoints": 1}
NOTHING = dict.fromkeys(SUBJECT_TABLES, 0)
RECEIPTS = "SELECT erasure_id, subject_ref, removed_rows, verified, completed_at FROM erasures"


def test_an_erasure_reaches_every_table_and_no_replay_brings_the_subject_back(
    settings: Settings,
) -> None:
    topics = Topics(settings.topic_prefix, settings.partitions)
    sealer = sealer_of(settings)
    victim = _subject_records(topics, TENANT, VICTIM, sealer, "v")
    others = [
        *_subject_records(topics, TENANT, BYSTANDER, sealer, "b"),
        *_subject_records(topics, OTHER_TENANT, VICTIM, sealer, "o"),
    ]
    (request,) = _accepted(topics, [_erasure_request(TENANT, VICTIM)], None)
    bootstrap = settings.kafka_bootstrap
    assert bootstrap is not None

    async def scenario() -> None:
        before = Published()
        await _produce(bootstrap, [*victim, *others], before)
        async with sink_running(settings) as sink:
            await eventually(lambda: all_committed(settings, before))
            assert stored_rows(settings, TENANT, VICTIM) == EVERY_TABLE

            sealer.keys.destroy(f"{TENANT}:{VICTIM}")
            erasure = Published()
            tombstone: Message = (topics.state, f"{TENANT}:{VICTIM}".encode(), None, [])
            await _produce(bootstrap, [request, _ledger_entry(topics, TENANT, VICTIM)], erasure)
            await _produce(bootstrap, [tombstone], erasure)
            await eventually(lambda: all_committed(settings, erasure))
            assert stored_rows(settings, TENANT, VICTIM) == NOTHING
            assert stored_rows(settings, TENANT, BYSTANDER) == EVERY_TABLE
            assert stored_rows(settings, OTHER_TENANT, VICTIM) == EVERY_TABLE
            (receipt,) = await rows(settings, RECEIPTS)
            assert receipt[1:4] == [subject_ref(TENANT, VICTIM), EVERY_TABLE, True]

            resent = Published()
            await _produce(bootstrap, [*victim, request], resent)
            await eventually(lambda: all_committed(settings, resent))
            assert stored_rows(settings, TENANT, VICTIM) == NOTHING
            erased = {"topic": topics.accepted, "reason": "erased_subject"}
            assert metric(sink, "uac_sink_skipped_records_total", erased) == 3
            dropped = metric(sink, "uac_sink_erased_rows_dropped_total", {"table": "events"})
            assert dropped >= 1

        replay = Settings(**(settings.model_dump() | {"app_id": f"{settings.app_id}-replay"}))
        async with sink_running(replay) as replaying:
            await eventually(lambda: all_committed(replay, merged(before, erasure, resent)))
            assert stored_rows(settings, TENANT, VICTIM) == NOTHING
            assert stored_rows(settings, TENANT, BYSTANDER, final=True) == EVERY_TABLE
            assert stored_rows(settings, OTHER_TENANT, VICTIM, final=True) == EVERY_TABLE
            assert await rows(settings, RECEIPTS) == [receipt]
            assert metric(replaying, "uac_sink_erasures_total", {"outcome": "recheck"}) == 1

    asyncio.run(scenario())


def _read_audits(topics: Topics) -> list[Message]:
    codec = read_audit_codec()
    return [
        (
            topics.audit,
            TENANT.encode(),
            codec.encode(
                ReadAudited(
                    audit_id=uuid5(NAMESPACE_URL, f"audit/{action}"),
                    tenant_id=TENANT,
                    subject_ref=subject_ref(TENANT, "patient-1"),
                    actor="cli-reader",
                    purpose="subject_access",
                    action=action,
                    detail=f"{action} of one subject",
                    read_at=datetime.now(UTC),
                )
            ),
            [],
        )
        for action in ("state", "export")
    ]


def test_reads_are_audited_and_purpose_bound_through_the_sink(settings: Settings) -> None:
    topics = Topics(settings.topic_prefix, settings.partitions)

    async def scenario() -> None:
        published = await publish(settings, 20, extra=_read_audits(topics))
        async with sink_running(settings):
            await eventually(lambda: all_committed(settings, published))
            home = settings.home
            care = await asyncio.to_thread(
                query_via_sink, home, "SELECT count() FROM events", TENANT, actor="analyst-1"
            )
            marketing = await asyncio.to_thread(
                query_via_sink,
                home,
                "SELECT count() FROM events",
                TENANT,
                "marketing",
                actor="analyst-1",
            )
            assert (care.rows, marketing.rows) == ([[20]], [[0]])
            with pytest.raises(AlertNotFound):
                await asyncio.to_thread(
                    SinkQueries(_address(settings)).explain, str(uuid.uuid4()), TENANT
                )
            audited = await rows(
                settings,
                "SELECT actor, action, purpose, subject_ref IS NULL FROM audit_reads "
                "WHERE actor IN ('cli-reader', 'analyst-1') ORDER BY actor, action, purpose",
            )
        assert audited == [
            ["analyst-1", "query", "care", True],
            ["analyst-1", "query", "marketing", True],
            ["cli-reader", "export", "subject_access", False],
            ["cli-reader", "state", "subject_access", False],
        ]

    asyncio.run(scenario())


def test_a_tenant_added_to_the_tenants_file_is_served_without_a_sink_restart(
    settings: Settings, tmp_path: Path
) -> None:
    """The running sink reads the tenants file again before each read: a tenant it did not
    know is served once the file names it; a broken file leaves the last good one in force."""
    default = settings.tenants_file.read_text(encoding="utf-8")
    tenants = tmp_path / "tenants.json"
    tenants.write_text(default.replace(f'"{TENANT}"', '"another-clinic"'), encoding="utf-8")
    settings = settings.model_copy(update={"tenants_file": tenants})

    def count() -> Any:
        return query_via_sink(settings.home, "SELECT count() FROM events", TENANT).rows

    async def scenario() -> None:
        published = await publish(settings, 20)
        async with sink_running(settings):
            await eventually(lambda: all_committed(settings, published))
            with pytest.raises(QueryRefused, match=f"unknown tenant '{TENANT}'"):
                await asyncio.to_thread(count)
            tenants.write_text(default, encoding="utf-8")
            assert await asyncio.to_thread(count) == [[20]]
            tenants.write_text('{"tenants": {', encoding="utf-8")
            assert await asyncio.to_thread(count) == [[20]]

    asyncio.run(scenario())


def _address(settings: Settings) -> SinkAddress:
    address = running_sink(settings.home)
    assert address is not None
    return address
