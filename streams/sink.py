"""The ClickHouse sink: the worker's output topics into the `uac` tables, at least once.

A plain aiokafka consumer loop, not a Faust agent, because it must own its commits:

1. fetch records from the accepted, quarantine, alerts, state, audit and erasures topics. Each
   value is opened with its subject's key first (the worker seals accepted events, alerts and
   checkpoints; quarantine decisions, audit records and ledger entries are not sealed), then
   decoded and mapped to rows (`streams.rows`; an accepted event only to its Avro record, not
   to the event model again: the worker wrote it from a validated model). A record whose
   subject was erased no longer opens: it is skipped and counted, like a tombstone; a record
   that does not decode is logged with its coordinates, counted and skipped; neither is ever
   fatal;
2. when `sink_batch_rows` rows are pending or `sink_batch_seconds` have passed, drop the rows of
   erased subjects, insert each table's rows in one column-wise insert whose
   `insert_deduplication_token` is derived from the batch's topic/partition/offset ranges (and
   the records' timestamps), then carry out the batch's erasure ledger entries;
3. commit the batch's offsets only after every insert and every erasure succeeded.

Erasure. The sink keeps an `ErasureLedger`: loaded from the erasures topic before it consumes
anything, followed while it runs, extended by every ledger entry it consumes, and backed by the
key store's own record of destroyed keys. Every row whose (tenant_id, subject_id) belongs to an
erased subject is dropped at flush time, so a replay of the log (a new consumer group, a
restarted sink), a late copy or the same rows re-sent in another batch never bring the subject
back. Each ledger entry consumed is carried out by `streams.clickhouse.carry_out_erasure`: a
mutation deletes the subject's rows from every table that holds its id (parts rewritten, not
masked), a count with `apply_deleted_mask = 0` verifies that none is left, and a receipt goes
to `uac.erasures` (once; an entry seen again is re-checked and its first receipt kept). Its
offset is committed only after that.

A failing insert is retried with capped exponential backoff. Meanwhile nothing is committed and
every assigned partition is paused, so memory stays bounded while the consumer keeps polling
(and so keeps its group membership). A retry of the same batch carries the same tokens, so the
engine drops whatever part of it had already landed; a batch re-read after a crash or a
rebalance has other boundaries and other tokens, and ReplacingMergeTree collapses its rows
(read with FINAL, as `streams.analytics` does).

The sink process owns the chDB data path while it runs, so it also serves the analyst query
layer over HTTP on 127.0.0.1 (`GET /health`, `GET /metrics`, `POST /query`, `POST /explain`)
and records its pid, port and a fresh read token in `{home}/sink.json` (mode 0600) for
`streams.query_clients.open_query_client`: `/query` and `/explain` (`streams.sink_reads`)
answer only a caller that sends that token, so reading through the sink takes the rights of
the user who runs it. Every query and explanation it serves is audited in `uac.audit_reads`
(see `streams.analytics`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import signal
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from aiohttp import web
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError
from clickhouse_connect.driver.client import Client
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    generate_latest,
)

from schemas.codec import (
    erasure_codec,
)
from schemas.erasures import ErasureRecorded
from schemas.errors import RegistryUnavailable
from schemas.events import subject_key
from streams import query_clients
from streams.clickhouse import (
    ErasureOutcome,
    Inserter,
    apply_schema,
    carry_out_erasure,
    connect,
    load_insert_dependencies,
    write_batch,
)
from streams.kafka_address import bootstrap_servers
from streams.kafka_security import kafka_options
from streams.keys import FileKeyStore, SubjectErased
from streams.ledger import ErasureLedger, follow_ledger, load_ledger
from streams.log_repeats import LOG_FORMAT, hold_back_repeats
from streams.ports import listen
from streams.private_files import write_private
from streams.rows import (
    COLUMNS,
    Coordinates,
    ErasedCheck,
    Row,
    rows_of_living_subjects,
)
from streams.sealing import Sealer
from streams.settings import Settings
from streams.sink_batches import Applied, Batch, RetryPolicy
from streams.sink_health import sink_status
from streams.sink_metrics import SinkMetrics
from streams.sink_reads import ReadEndpoints
from streams.sink_records import Received, RecordRows
from streams.tenants import tenants_policy_of
from streams.tenants_watch import TenantsWatch
from streams.topic_reader import ensure_readable
from streams.topics import STATE_REQUEST_BYTES, Topics, ensure_topics

log = logging.getLogger(__name__)

HOST: Final = "127.0.0.1"
IDLE_POLL_SECONDS: Final = 0.2
LEDGER_STOP_SECONDS: Final = 5.0
LEDGER_RETRY_SECONDS: Final = 1.0
TOMBSTONE: Final = "tombstone"
ERASED_SUBJECT: Final = "erased_subject"
InserterFactory = Callable[[Client], Inserter]


class SinkAlreadyRunning(RuntimeError):
    """Another live sink is recorded under the same home (it owns the chDB path)."""


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
        self.group_id = settings.sink_group
        self.metrics = SinkMetrics()
        self.retry = retry or RetryPolicy()
        self.retrying = False
        self.consumer: AIOKafkaConsumer | None = None
        self._writing = False
        self._committed_at: float | None = None
        self.keys = FileKeyStore(settings.keys_dir)
        self.ledger = ErasureLedger(self.keys)
        self._http_port = http_port
        self._inserter_factory = inserter_factory
        self._records = RecordRows(self.topics, Sealer(self.keys))
        self._erasure_codec = erasure_codec()
        self._tenants: TenantsWatch | None = None
        self._ledger_stop = asyncio.Event()
        self._ledger_task: asyncio.Task[None] | None = None
        self._client: Client | None = None
        self._query_client: Client | None = None
        self._inserter: Inserter | None = None
        self._runner: web.AppRunner | None = None
        self._listening: socket.socket | None = None
        self._port: int | None = None
        self._read_token = secrets.token_urlsafe(32)
        self._reads = ReadEndpoints(
            self._read_token,
            lambda: self._query_client,
            lambda: self._tenants,
            lambda: frozenset(self.ledger.refs) | self.keys.destroyed_refs(),
        )
        self._batch = Batch()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the sink's HTTP server is not running")
        return self._port

    @property
    def record_path(self) -> Path:
        return query_clients.sink_record_path(self.settings.home)

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Take the HTTP port (PortUnavailable before anything else if it cannot), create or
        check the topics (as the worker does, so either may start first), load the erasure
        ledger, open ClickHouse (applying the schema), the HTTP server and the consumer, and
        follow the ledger."""
        other = query_clients.running_sink(self.settings.home)
        if other is not None and other.pid != os.getpid():
            raise SinkAlreadyRunning(f"sink pid {other.pid} already runs for {self.settings.home}")
        self._listening = listening = listen(HOST, self._http_port, "sink HTTP")
        try:
            self._tenants = TenantsWatch(self.settings, tenants_policy_of(self.settings))
            await ensure_topics(
                bootstrap_servers(self.settings),
                self.topics.specs(),
                self.settings.topic_replication_factor,
            )
            await ensure_readable(bootstrap_servers(self.settings), self._consumed_topics())
            await self._load_ledger()
            self._client = await asyncio.to_thread(connect, self.settings)
            await asyncio.to_thread(apply_schema, self._client)
            await asyncio.to_thread(load_insert_dependencies)
            self._query_client = await asyncio.to_thread(connect, self.settings)
            factory = self._inserter_factory
            self._inserter = factory(self._client) if factory else self._client
            await self._start_http(listening)
            await self._start_consumer()
            self._ledger_stop = asyncio.Event()
            self._ledger_task = asyncio.create_task(self._follow_ledger())
            self._write_record()
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Close everything this sink opened; pending (uncommitted) rows are re-read later."""
        with contextlib.suppress(Exception):
            self._remove_record()
        await self._stop_following_ledger()
        if self.consumer is not None:
            consumer, self.consumer = self.consumer, None
            await consumer.stop()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        if self._listening is not None:
            listening, self._listening = self._listening, None
            listening.close()
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

    # -- the erasure ledger ---------------------------------------------------------------------

    async def _load_ledger(self) -> None:
        """Every erasure recorded so far, before the first record is consumed."""
        loaded = await load_ledger(
            bootstrap_servers(self.settings), self.topics.erasures, self.keys
        )
        self.ledger.refs.update(loaded.refs)
        log.info("sink: erasure ledger loaded (%d erased subjects)", len(self.ledger.refs))

    async def _follow_ledger(self) -> None:
        """Entries recorded while the sink runs, whichever sink of the group consumes them
        (until the sink stops; started again after a failure such as a broker restart)."""
        bootstrap = bootstrap_servers(self.settings)
        stop = self._ledger_stop
        while not stop.is_set():
            try:
                await follow_ledger(bootstrap, self.topics.erasures, self.ledger, stop)
            except Exception as error:  # noqa: BLE001 (the consumed entries still reach the ledger)
                log.info("sink: following the erasure ledger again shortly (%r)", error)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=LEDGER_RETRY_SECONDS)

    async def _stop_following_ledger(self) -> None:
        self._ledger_stop.set()
        task, self._ledger_task = self._ledger_task, None
        if task is None:
            return
        try:
            await asyncio.wait_for(task, timeout=LEDGER_STOP_SECONDS)
        except TimeoutError:
            log.warning("sink: the erasure ledger follower did not stop in time; cancelled")

    def _erased_check(self) -> ErasedCheck:
        """Whether a subject is erased, asked of the ledger once per subject per flush."""
        known: dict[tuple[str, str], bool] = {}

        def erased(tenant: str, subject: str) -> bool:
            found = known.get((tenant, subject))
            if found is None:
                found = known[(tenant, subject)] = self.ledger.is_erased(
                    subject_key(tenant, subject)
                )
            return found

        return erased

    # -- consuming ----------------------------------------------------------------------------

    def _consumed_topics(self) -> list[str]:
        return [*self._records.topics, self.topics.erasures]

    async def _start_consumer(self) -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap_servers(self.settings),
            group_id=self.group_id,
            client_id="uac-sink",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=STATE_REQUEST_BYTES,
            **kafka_options(),
        )
        consumer.subscribe(self._consumed_topics(), listener=_PauseNewAssignments(self))
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
                if record.topic == self.topics.erasures:
                    self._batch.add(record, [])
                    self._take_erasure(record)
                else:
                    self._batch.add(record, self._rows_of(record, now))

    def _rows_of(self, record: Any, now: datetime) -> list[tuple[str, Row]]:
        """A record's rows; none for a tombstone (compaction marker), a record of an erased
        subject or an undecodable record."""
        at = Coordinates(record.topic, record.partition, record.offset)
        if record.value is None:
            self.metrics.skipped.labels(topic=record.topic, reason=TOMBSTONE).inc()
            return []
        received = Received(record.value, tuple(record.headers or ()), at, now)
        try:
            return self._records.rows(record.topic, received)
        except RegistryUnavailable:
            raise
        except SubjectErased:
            self.metrics.skipped.labels(topic=record.topic, reason=ERASED_SUBJECT).inc()
            return []
        except Exception as error:  # noqa: BLE001 (a bad record is counted and skipped, never fatal)
            self._undecodable(at, error)
            return []

    def _undecodable(self, at: Coordinates, error: Exception) -> None:
        self.metrics.undecodable.labels(topic=at.topic).inc()
        log.warning("sink: skipping undecodable record %s: %s: %s", at, type(error).__name__, error)

    def _take_erasure(self, record: Any) -> None:
        """A ledger entry: known to the ledger at once (so the batch's rows of the subject are
        dropped), carried out in ClickHouse when the batch is flushed."""
        at = Coordinates(record.topic, record.partition, record.offset)
        if record.value is None:
            self.metrics.skipped.labels(topic=record.topic, reason=TOMBSTONE).inc()
            return
        try:
            entry = self._erasure_codec.decode(record.value)
        except RegistryUnavailable:
            raise
        except Exception as error:  # noqa: BLE001 (a bad record is counted and skipped, never fatal)
            self._undecodable(at, error)
            return
        self.ledger.add(entry)
        self._batch.erasures.append(entry)

    # -- inserting and committing ---------------------------------------------------------------

    async def _flush(self, stop: asyncio.Event) -> None:
        batch, self._batch = self._batch, Batch()
        started = time.monotonic()
        self._writing = True
        try:
            applied = await self._apply_with_retries(batch, stop)
        finally:
            self._writing = False
        if applied is None:
            log.warning(
                "sink: stopping with %d uncommitted rows; they will be re-read", batch.row_count
            )
            return
        await self._commit(batch)
        self._count(applied)
        self.metrics.batches.inc()
        self.metrics.flush_seconds.observe(time.monotonic() - started)

    def _count(self, applied: Applied) -> None:
        for table, written in applied.written.items():
            self.metrics.rows_written.labels(table=table).inc(written)
        for table, dropped in applied.dropped.items():
            self.metrics.erased_rows_dropped.labels(table=table).inc(dropped)
        for outcome in applied.erasures:
            kind = "first" if outcome.receipt_written else "recheck"
            self.metrics.erasures.labels(outcome=kind).inc()
            self.metrics.erasure_seconds.observe(outcome.seconds)

    async def _apply_with_retries(self, batch: Batch, stop: asyncio.Event) -> Applied | None:
        """Insert and erase until it works, or None once `stop` is set after a failure."""
        attempt = 0
        while True:
            try:
                applied = await asyncio.to_thread(self._apply, batch)
            except Exception as error:  # noqa: BLE001 (any failure of the store is retried, never fatal)
                self.metrics.retries.inc()
                delay = self.retry.delay(attempt)
                log.warning(
                    "sink: writing the batch failed (%s: %s); retry %d in %.2fs",
                    type(error).__name__,
                    error,
                    attempt + 1,
                    delay,
                )
                if stop.is_set():
                    self._resume()
                    return None
                self._pause()
                await self._idle(delay, stop)
                attempt += 1
                continue
            self._resume()
            return applied

    def _apply(self, batch: Batch) -> Applied:
        """Insert the rows of living subjects, then carry out the batch's erasures."""
        inserter, client = self._inserter, self._client
        if inserter is None or client is None:
            raise RuntimeError("the sink is not started")
        erased = self._erased_check()
        applied = Applied()
        for table, rows in batch.rows.items():
            living = rows_of_living_subjects(table, rows, erased)
            applied.dropped[table] = len(rows) - len(living)
            token = batch.token(table)
            applied.written[table] = write_batch(inserter, table, COLUMNS[table], living, token)
        for entry in batch.erasures:
            applied.erasures.append(self._erase(client, entry))
        return applied

    def _erase(self, client: Client, entry: ErasureRecorded) -> ErasureOutcome:
        outcome = carry_out_erasure(client, entry, lambda: datetime.now(UTC))
        ref = entry.subject_ref[:12]
        if outcome.receipt_written:
            log.info(
                "sink: erasure %s (subject %s…) carried out in %.3fs; rows removed: %s",
                entry.erasure_id,
                ref,
                outcome.seconds,
                outcome.removed,
            )
        elif any(outcome.removed.values()):
            log.warning(
                "sink: erasure %s (subject %s…) seen again: removed rows that had come back "
                "(%s); its first receipt is kept",
                entry.erasure_id,
                ref,
                outcome.removed,
            )
        return outcome

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
        self._committed_at = time.time()
        self.metrics.last_commit.set(self._committed_at)
        self.metrics.commit_lag.set(self._lag(offsets))

    def _lag(self, committed: Mapping[TopicPartition, int]) -> int:
        consumer = self._running_consumer()
        lag = 0
        for tp, offset in committed.items():
            end = consumer.highwater(tp)
            lag += max(0, end - offset) if end is not None else 0
        return lag

    # -- HTTP -----------------------------------------------------------------------------------

    async def _start_http(self, listening: socket.socket) -> None:
        app = web.Application()
        app.router.add_get("/health", self._health)
        app.router.add_get("/metrics", self._metrics)
        self._reads.add_routes(app)
        runner = web.AppRunner(app, access_log=None)
        self._runner = runner
        await runner.setup()
        await web.SockSite(runner, listening).start()
        self._port = int(runner.addresses[0][1])

    async def _health(self, _request: web.Request) -> web.Response:
        assigned = self._assignment()
        status = sink_status(
            retrying=self.retrying,
            writing=self._writing,
            assigned=bool(assigned),
            heard_at=self._broker_heard_at(assigned),
            now=time.time(),
        )
        body = {
            "status": status.value,
            "group_id": self.group_id,
            "assigned": partition_names(assigned),
            "pending_rows": self._batch.row_count,
            "erased_subjects": len(self.ledger.refs),
        }
        return web.json_response(body, status=200 if status.serving else 503)

    def _assignment(self) -> set[TopicPartition]:
        return set(self.consumer.assignment()) if self.consumer is not None else set()

    def _broker_heard_at(self, assigned: set[TopicPartition]) -> float | None:
        """When (Unix time) the broker last answered the sink: a fetch response for a partition
        it owns (an empty one too: the consumer asks about every half second while idle), or a
        commit."""
        consumer = self.consumer
        polled = [] if consumer is None else [consumer.last_poll_timestamp(tp) for tp in assigned]
        heard = [milliseconds / 1000 for milliseconds in polled if milliseconds is not None]
        if self._committed_at is not None:
            heard.append(self._committed_at)
        return max(heard, default=None)

    async def _metrics(self, _request: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(self.metrics.registry),
            headers={"Content-Type": CONTENT_TYPE_LATEST},
        )

    # -- sink.json ------------------------------------------------------------------------------

    def _write_record(self) -> None:
        record = {
            "pid": os.getpid(),
            "host": HOST,
            "port": self.port,
            "read_token": self._read_token,
            "chdb_path": str(self.settings.chdb_path),
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        path = self.record_path
        path.parent.mkdir(parents=True, exist_ok=True)
        write_private(path, (json.dumps(record, indent=2) + "\n").encode("utf-8"))

    def _remove_record(self) -> None:
        """Remove `sink.json` if it is this process's record (never another sink's)."""
        current = query_clients.running_sink(self.settings.home)
        if current is None or current.pid == os.getpid():
            self.record_path.unlink(missing_ok=True)


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

    logging.basicConfig(format=LOG_FORMAT)
    hold_back_repeats(logging.getLogger().handlers)
    asyncio.run(until_signalled())
