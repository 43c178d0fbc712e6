"""The ClickHouse sink: the worker's four output topics into the `uac` tables, at least once.

A plain aiokafka consumer loop, not a Faust agent, because it must own its commits:

1. fetch records from the accepted, quarantine, alerts and state topics and map each to rows
   (`streams.rows`); a record that does not decode is logged with its coordinates, counted and
   skipped, never fatal;
2. when `sink_batch_rows` rows are pending or `sink_batch_seconds` have passed, insert each
   table's rows in one column-wise insert whose `insert_deduplication_token` is derived from the
   batch's topic/partition/offset ranges (and the records' timestamps);
3. commit the batch's offsets only after every insert succeeded.

A failing insert is retried with capped exponential backoff. Meanwhile nothing is committed and
every assigned partition is paused, so memory stays bounded while the consumer keeps polling
(and so keeps its group membership). A retry of the same batch carries the same tokens, so the
engine drops whatever part of it had already landed; a batch re-read after a crash or a
rebalance has other boundaries and other tokens, and ReplacingMergeTree collapses its rows
(read with FINAL, as `streams.analytics` does).

The sink process owns the chDB data path while it runs, so it also serves the analyst query
layer over HTTP on 127.0.0.1 (`GET /health`, `GET /metrics`, `POST /query`) and records its pid
and port in `{home}/sink.json` for `streams.analytics.open_query_client`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, NamedTuple

from aiohttp import web
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError
from clickhouse_connect.driver.client import Client
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from schemas.codec import alert_codec, checkpoint_codec, decision_codec, event_codec
from streams import analytics
from streams.clickhouse import Inserter, apply_schema, connect, write_batch
from streams.kafka_address import bootstrap_servers
from streams.rows import (
    ALERTS,
    COLUMNS,
    EVENTS,
    GATE_DECISIONS,
    STATE_CHECKPOINTS,
    Coordinates,
    Row,
    accepted_rows,
    alert_row,
    checkpoint_row,
    decision_row,
)
from streams.settings import Settings
from streams.topics import Topics

log = logging.getLogger(__name__)

HOST: Final = "127.0.0.1"
IDLE_POLL_SECONDS: Final = 0.2
MAX_BATCH_BYTES: Final = 64 * 1024 * 1024
"""A batch is also flushed at this many record bytes: checkpoints carry whole state documents,
so a row count alone does not bound memory."""

InserterFactory = Callable[[Client], Inserter]


class SinkAlreadyRunning(RuntimeError):
    """Another live sink is recorded under the same home (it owns the chDB path)."""


@dataclass(frozen=True)
class RetryPolicy:
    """Capped exponential backoff between insert attempts."""

    first_seconds: float = 0.1
    max_seconds: float = 10.0
    factor: float = 2.0

    def delay(self, attempt: int) -> float:
        return float(min(self.max_seconds, self.first_seconds * self.factor**attempt))


class SinkMetrics:
    """The sink's Prometheus metrics, in a registry of its own (one per sink instance)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.rows_written = Counter(
            "uac_sink_rows_written", "Rows inserted, by table", ["table"], registry=self.registry
        )
        self.batches = Counter(
            "uac_sink_batches", "Batches inserted and committed", registry=self.registry
        )
        self.retries = Counter(
            "uac_sink_insert_retries", "Failed insert attempts, retried", registry=self.registry
        )
        self.undecodable = Counter(
            "uac_sink_undecodable_records",
            "Records skipped because they do not decode or map to rows",
            ["topic"],
            registry=self.registry,
        )
        self.commit_lag = Gauge(
            "uac_sink_commit_lag_records",
            "Records between the last committed offsets and the end of the log, at that commit",
            registry=self.registry,
        )
        self.last_commit = Gauge(
            "uac_sink_last_commit_timestamp_seconds",
            "Unix time of the last successful commit",
            registry=self.registry,
        )
        self.flush_seconds = Histogram(
            "uac_sink_flush_seconds",
            "Time to insert and commit one batch, retries included",
            registry=self.registry,
        )


class Span(NamedTuple):
    """The records of one partition in a batch: first and last offset, and their timestamps.

    The timestamps make the dedup token tell apart two logs with the same offsets (a topic that
    was deleted and created again while ClickHouse kept its data and its dedup window).
    """

    first: int
    last: int
    first_timestamp: int
    last_timestamp: int

    def extended(self, offset: int, timestamp: int) -> Span:
        first = (self.first, self.first_timestamp) if self.first <= offset else (offset, timestamp)
        last = (self.last, self.last_timestamp) if self.last >= offset else (offset, timestamp)
        return Span(first[0], last[0], first[1], last[1])

    def __str__(self) -> str:
        return f"{self.first}@{self.first_timestamp}-{self.last}@{self.last_timestamp}"


@dataclass
class Batch:
    """Rows waiting to be inserted, and the partition spans they came from."""

    started: float = field(default_factory=time.monotonic)
    rows: dict[str, list[Row]] = field(default_factory=lambda: {table: [] for table in COLUMNS})
    spans: dict[TopicPartition, Span] = field(default_factory=dict)
    size: int = 0

    @property
    def row_count(self) -> int:
        return sum(len(rows) for rows in self.rows.values())

    @property
    def empty(self) -> bool:
        return not self.spans

    def add(self, record: Any, rows: Iterable[tuple[str, Row]]) -> None:
        """Add a consumed record (offset, timestamp, size) and the rows made from it."""
        partition = TopicPartition(record.topic, record.partition)
        known = self.spans.get(partition)
        self.spans[partition] = (
            Span(record.offset, record.offset, record.timestamp, record.timestamp)
            if known is None
            else known.extended(record.offset, record.timestamp)
        )
        self.size += len(record.value or b"")
        for table, row in rows:
            self.rows[table].append(row)

    def due(self, max_rows: int, max_seconds: float, max_bytes: int = MAX_BATCH_BYTES) -> bool:
        if self.empty:
            return False
        full = self.row_count >= max_rows or self.size >= max_bytes
        return full or time.monotonic() - self.started >= max_seconds

    def token(self, table: str) -> str:
        """The insert_deduplication_token of `table`'s insert: same batch, same token."""
        return batch_token(table, self.spans)

    def next_offsets(self) -> dict[TopicPartition, int]:
        """What to commit once the rows are in: the offset after the last record, per partition."""
        return {partition: span.last + 1 for partition, span in self.spans.items()}


def batch_token(table: str, spans: Mapping[TopicPartition, Span]) -> str:
    """A deterministic token from the batch's topic/partition/offset spans (and timestamps)."""
    lines = sorted(f"{tp.topic}/{tp.partition}/{span}" for tp, span in spans.items())
    digest = hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()
    return f"uac-sink/{table}/{digest}"


@dataclass(frozen=True)
class Received:
    """One consumed record, as the row mappers need it."""

    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    at: Coordinates
    ingested_at: datetime


class RecordRows:
    """Decodes the records of each subscribed topic and maps them to table rows."""

    def __init__(self, topics: Topics) -> None:
        self._events = event_codec()
        self._decisions = decision_codec()
        self._alerts = alert_codec()
        self._checkpoints = checkpoint_codec()
        self._by_topic: dict[str, Callable[[Received], list[tuple[str, Row]]]] = {
            topics.accepted: self._accepted,
            topics.quarantine: self._quarantined,
            topics.alerts: self._alert,
            topics.state: self._checkpoint,
        }

    @property
    def topics(self) -> list[str]:
        return list(self._by_topic)

    def rows(self, topic: str, received: Received) -> list[tuple[str, Row]]:
        """The rows of one record; raises if it does not decode or map."""
        return self._by_topic[topic](received)

    def _accepted(self, received: Received) -> list[tuple[str, Row]]:
        event = self._events.decode(received.value)
        event_row, decision = accepted_rows(
            event, received.value, received.headers, received.at, received.ingested_at
        )
        return [(EVENTS, event_row), (GATE_DECISIONS, decision)]

    def _quarantined(self, received: Received) -> list[tuple[str, Row]]:
        decision = self._decisions.decode(received.value)
        return [(GATE_DECISIONS, decision_row(decision, received.ingested_at))]

    def _alert(self, received: Received) -> list[tuple[str, Row]]:
        alert = self._alerts.decode(received.value)
        return [(ALERTS, alert_row(alert, received.at, received.ingested_at))]

    def _checkpoint(self, received: Received) -> list[tuple[str, Row]]:
        checkpoint = self._checkpoints.decode(received.value)
        return [(STATE_CHECKPOINTS, checkpoint_row(checkpoint, received.at, received.ingested_at))]


def partition_names(partitions: Iterable[TopicPartition]) -> list[str]:
    return sorted(f"{tp.topic}/{tp.partition}" for tp in partitions)


class _PauseNewAssignments(ConsumerRebalanceListener):  # type: ignore[misc]
    """Keeps newly assigned partitions paused while the sink is retrying a failed insert."""

    def __init__(self, sink: Sink) -> None:
        self._sink = sink

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        log.info("sink: partitions revoked: %s", partition_names(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        log.info("sink: partitions assigned: %s", partition_names(assigned))
        if self._sink.retrying and self._sink.consumer is not None:
            self._sink.consumer.pause(*assigned)


class Sink:
    """The sink's lifecycle: `start()`, then `run(stop)` until `stop` is set, then `stop()`."""

    def __init__(
        self,
        settings: Settings,
        *,
        http_port: int = 0,
        inserter_factory: InserterFactory | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.settings = settings
        self.topics = Topics(settings.topic_prefix, settings.partitions)
        self.group_id = f"{settings.app_id}-sink"
        self.metrics = SinkMetrics()
        self.retry = retry or RetryPolicy()
        self.retrying = False
        self.consumer: AIOKafkaConsumer | None = None
        self._http_port = http_port
        self._inserter_factory = inserter_factory
        self._records = RecordRows(self.topics)
        self._client: Client | None = None
        self._query_client: Client | None = None
        self._inserter: Inserter | None = None
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._batch = Batch()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the sink's HTTP server is not running")
        return self._port

    @property
    def record_path(self) -> Path:
        return analytics.sink_record_path(self.settings.home)

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Open ClickHouse (applying the schema), the HTTP server and the consumer."""
        other = analytics.running_sink(self.settings.home)
        if other is not None and other.pid != os.getpid():
            raise SinkAlreadyRunning(f"sink pid {other.pid} already runs for {self.settings.home}")
        try:
            self._client = await asyncio.to_thread(connect, self.settings)
            await asyncio.to_thread(apply_schema, self._client)
            self._query_client = await asyncio.to_thread(connect, self.settings)
            factory = self._inserter_factory
            self._inserter = factory(self._client) if factory else self._client
            await self._start_http()
            await self._start_consumer()
            self._write_record()
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Close everything this sink opened; pending (uncommitted) rows are re-read later."""
        with contextlib.suppress(Exception):
            self._remove_record()
        if self.consumer is not None:
            consumer, self.consumer = self.consumer, None
            await consumer.stop()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        for client in (self._query_client, self._client):
            if client is not None:
                await asyncio.to_thread(client.close)
        self._client = self._query_client = None
        self._port = None

    async def run(self, stop: asyncio.Event) -> None:
        """Consume, batch, insert and commit until `stop` is set; then flush once more."""
        while not stop.is_set():
            await self._fetch(self._wait_seconds())
            if self._batch.due(self.settings.sink_batch_rows, self.settings.sink_batch_seconds):
                await self._flush(stop)
        if not self._batch.empty:
            await self._flush(stop)

    # -- consuming ----------------------------------------------------------------------------

    async def _start_consumer(self) -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap_servers(self.settings),
            group_id=self.group_id,
            client_id="uac-sink",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        consumer.subscribe(self._records.topics, listener=_PauseNewAssignments(self))
        self.consumer = consumer
        await consumer.start()

    def _running_consumer(self) -> AIOKafkaConsumer:
        if self.consumer is None:
            raise RuntimeError("the sink is not started")
        return self.consumer

    def _wait_seconds(self) -> float:
        if self._batch.empty:
            return IDLE_POLL_SECONDS
        remaining = self.settings.sink_batch_seconds - (time.monotonic() - self._batch.started)
        return max(0.0, min(IDLE_POLL_SECONDS, remaining))

    async def _fetch(self, wait_seconds: float) -> None:
        consumer = self._running_consumer()
        room = max(1, self.settings.sink_batch_rows - self._batch.row_count)
        fetched = await consumer.getmany(timeout_ms=int(wait_seconds * 1000), max_records=room)
        if not fetched:
            return
        if self._batch.empty:
            self._batch = Batch()
        now = datetime.now(UTC)
        for records in fetched.values():
            for record in records:
                self._batch.add(record, self._rows_of(record, now))

    def _rows_of(self, record: Any, now: datetime) -> list[tuple[str, Row]]:
        """A record's rows; none for a tombstone (compaction marker) or an undecodable record."""
        at = Coordinates(record.topic, record.partition, record.offset)
        if record.value is None:
            return []
        received = Received(record.value, tuple(record.headers or ()), at, now)
        try:
            return self._records.rows(record.topic, received)
        except Exception as error:  # noqa: BLE001 (a bad record is counted and skipped, never fatal)
            self.metrics.undecodable.labels(topic=record.topic).inc()
            log.warning(
                "sink: skipping undecodable record %s: %s: %s", at, type(error).__name__, error
            )
            return []

    # -- inserting and committing ---------------------------------------------------------------

    async def _flush(self, stop: asyncio.Event) -> None:
        batch, self._batch = self._batch, Batch()
        started = time.monotonic()
        if not await self._insert_with_retries(batch, stop):
            log.warning(
                "sink: stopping with %d uncommitted rows; they will be re-read", batch.row_count
            )
            return
        await self._commit(batch)
        for table, rows in batch.rows.items():
            self.metrics.rows_written.labels(table=table).inc(len(rows))
        self.metrics.batches.inc()
        self.metrics.flush_seconds.observe(time.monotonic() - started)

    async def _insert_with_retries(self, batch: Batch, stop: asyncio.Event) -> bool:
        """Insert until it works (True) or `stop` is set after a failure (False)."""
        attempt = 0
        while True:
            try:
                await asyncio.to_thread(self._insert, batch)
            except Exception as error:  # noqa: BLE001 (any failure of the store is retried, never fatal)
                self.metrics.retries.inc()
                delay = self.retry.delay(attempt)
                log.warning(
                    "sink: insert failed (%s: %s); retry %d in %.2fs",
                    type(error).__name__,
                    error,
                    attempt + 1,
                    delay,
                )
                if stop.is_set():
                    self._resume()
                    return False
                self._pause()
                await self._idle(delay, stop)
                attempt += 1
                continue
            self._resume()
            return True

    def _insert(self, batch: Batch) -> None:
        inserter = self._inserter
        if inserter is None:
            raise RuntimeError("the sink is not started")
        for table, rows in batch.rows.items():
            write_batch(inserter, table, COLUMNS[table], rows, batch.token(table))

    def _pause(self) -> None:
        consumer = self._running_consumer()
        self.retrying = True
        consumer.pause(*consumer.assignment())

    def _resume(self) -> None:
        if self.retrying and self.consumer is not None:
            self.consumer.resume(*self.consumer.assignment())
        self.retrying = False

    async def _idle(self, seconds: float, stop: asyncio.Event) -> None:
        """Wait while paused, still polling so the group keeps this member."""
        consumer = self._running_consumer()
        deadline = time.monotonic() + seconds
        while not stop.is_set() and time.monotonic() < deadline:
            wait = min(IDLE_POLL_SECONDS, deadline - time.monotonic())
            fetched = await consumer.getmany(timeout_ms=max(0, int(wait * 1000)))
            self._rewind(fetched)

    def _rewind(self, fetched: Mapping[TopicPartition, list[Any]]) -> None:
        """Records that slipped through a pause (a partition assigned mid-retry, before the
        listener paused it) are not dropped: the consumer is moved back to re-read them."""
        consumer = self._running_consumer()
        for partition, records in fetched.items():
            if records:
                consumer.seek(partition, min(record.offset for record in records))
                consumer.pause(partition)

    async def _commit(self, batch: Batch) -> None:
        consumer = self._running_consumer()
        owned = consumer.assignment()
        offsets = {tp: offset for tp, offset in batch.next_offsets().items() if tp in owned}
        if not offsets:
            return
        try:
            await consumer.commit(offsets)
        except (CommitFailedError, KafkaError) as error:
            log.warning("sink: commit failed after a rebalance (%s); rows will be re-read", error)
            return
        self.metrics.last_commit.set(time.time())
        self.metrics.commit_lag.set(self._lag(offsets))

    def _lag(self, committed: Mapping[TopicPartition, int]) -> int:
        consumer = self._running_consumer()
        lag = 0
        for tp, offset in committed.items():
            end = consumer.highwater(tp)
            lag += max(0, end - offset) if end is not None else 0
        return lag

    # -- HTTP -----------------------------------------------------------------------------------

    async def _start_http(self) -> None:
        app = web.Application()
        app.router.add_get("/health", self._health)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_post("/query", self._query)
        runner = web.AppRunner(app, access_log=None)
        self._runner = runner
        await runner.setup()
        site = web.TCPSite(runner, HOST, self._http_port)
        await site.start()
        self._port = int(runner.addresses[0][1])

    async def _health(self, _request: web.Request) -> web.Response:
        status = "retrying" if self.retrying else "ok"
        body = {
            "status": status,
            "group_id": self.group_id,
            "assigned": partition_names(self._assignment()),
            "pending_rows": self._batch.row_count,
        }
        return web.json_response(body, status=503 if self.retrying else 200)

    def _assignment(self) -> set[TopicPartition]:
        return set(self.consumer.assignment()) if self.consumer is not None else set()

    async def _metrics(self, _request: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(self.metrics.registry),
            headers={"Content-Type": CONTENT_TYPE_LATEST},
        )

    async def _query(self, request: web.Request) -> web.Response:
        try:
            document = await request.json()
        except ValueError:
            document = None
        if not isinstance(document, dict) or not isinstance(document.get("sql"), str):
            return _error(400, "bad_request", 'expected JSON {"sql": "...", "tenant": "..."}')
        sql, tenant = document["sql"], document.get("tenant")
        if tenant is not None and not isinstance(tenant, str):
            return _error(400, "bad_request", "tenant must be a string")
        if self._query_client is None:
            return _error(503, "unavailable", "the sink is not connected to ClickHouse")
        try:
            result = await asyncio.to_thread(analytics.query, self._query_client, sql, tenant)
        except analytics.TenantRequired as error:
            return _error(400, "tenant_required", str(error))
        except analytics.QueryRefused as error:
            return _error(400, "query_refused", str(error))
        except analytics.QueryFailed as error:
            return _error(400, "query_failed", str(error))
        return web.json_response(result.to_json())

    # -- sink.json ------------------------------------------------------------------------------

    def _write_record(self) -> None:
        record = {
            "pid": os.getpid(),
            "host": HOST,
            "port": self.port,
            "chdb_path": str(self.settings.chdb_path),
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        path = self.record_path
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        temporary.replace(path)

    def _remove_record(self) -> None:
        """Remove `sink.json` if it is this process's record (never another sink's)."""
        current = analytics.running_sink(self.settings.home)
        if current is None or current.pid == os.getpid():
            self.record_path.unlink(missing_ok=True)


def _error(status: int, kind: str, message: str) -> web.Response:
    return web.json_response({"error": kind, "message": message}, status=status)


async def run_sink(
    settings: Settings,
    *,
    stop: asyncio.Event | None = None,
    http_port: int = 0,
    inserter_factory: InserterFactory | None = None,
    retry: RetryPolicy | None = None,
) -> None:
    """Run a sink until `stop` is set (or the task is cancelled), then close it cleanly."""
    sink = Sink(settings, http_port=http_port, inserter_factory=inserter_factory, retry=retry)
    await sink.start()
    try:
        await sink.run(stop or asyncio.Event())
    finally:
        await sink.stop()


def serve_sink(settings: Settings, *, http_port: int = 0) -> None:
    """Run the sink in this process until SIGINT or SIGTERM, then flush and close cleanly
    (the entry point for a `uac sink` command)."""

    async def until_signalled() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await run_sink(settings, stop=stop, http_port=http_port)

    asyncio.run(until_signalled())
