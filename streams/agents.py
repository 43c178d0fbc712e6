"""The Faust agent: bytes in, bytes out, around the pure core.

`gate_and_project` reads raw messages from the events topic in batches, lets the Kafka-free
`BatchProcessor` open, decode, gate, fold and evaluate them, publishes accepted events,
quarantine decisions and (sealed) alerts, writes each changed subject's (sealed) state to the
table and its changelog once per batch, and carries out erasures; a timer publishes the changed
subjects' checkpoints on the compacted state topic (`streams.checkpoints`), another the
`ClockAdvanced` events of subjects whose validity bound wall-clock time has passed
(`streams.clock`), and a third reads the tenants file again (`streams.tenants_watch`). Outputs
and changelog records go out as one record batch per partition (`streams.record_batches`). The
batch's outputs are delivered before the table write, the table write before the batch is done,
and Faust flushes the producer before it commits offsets, so a crash replays events instead of
losing them or their outputs; replays are harmless (duplicate event ids are refused by the gate,
alert ids are deterministic). Each batch is checked against the next offset the worker expects
on each partition, so records the consumer passed over are read from the log and processed
rather than lost (`streams.continuity`, `Batches`).

An erasure is recorded in the ledger first (durable), then the subject's key is destroyed
(every sealed copy in every topic becomes unreadable), then its table entry and state topic
entry are tombstoned.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NoReturn

from aiokafka import TopicPartition
from aiokafka.errors import ConsumerStoppedError, KafkaError
from faust.exceptions import NotReady

from projections.document import forget_events, plain
from projections.state import UserState
from schemas.codec import (
    alert_codec,
    decision_codec,
    erasure_codec,
    event_codec,
)
from schemas.erasures import ErasureRecorded, ref_of_key
from schemas.errors import RegistryUnavailable
from schemas.events import Event
from streams.app import Pipeline
from streams.checkpoints import Checkpoints, publish_checkpoints
from streams.clock import Deadlines, send_ticks, ticks
from streams.consumer_state import consumer_state
from streams.continuity import Gap, Step, plan, reached
from streams.keys import SubjectErased
from streams.ledger import follow_ledger
from streams.liveness import StallWatch, group_committed_offsets
from streams.pipeline_access import (
    events_assignment,
    kafka_producer,
    loaded,
    owned_subjects,
    partition_of,
    producer_running,
    settled,
)
from streams.processing import (
    AcceptedEvent,
    BatchOutput,
    BatchProcessor,
    Incoming,
    quarantine_key,
)
from streams.record_batches import RecordBatches
from streams.runtime import dump_tasks_on_signal, restart_in_place
from streams.signatures import headers_of
from streams.table_codecs import StoredSegment, StoredState, is_segment_key, segment_key
from streams.tenants_watch import Refused, Reloaded, TenantsWatch
from streams.topic_reader import OffsetRanges, RangeReader
from streams.worker_metrics import WorkerMetrics

log = logging.getLogger(__name__)
EXIT_PUBLISH_FAILED = 75
STALL_CHECK_SECONDS = 5.0


def accepted_headers(item: AcceptedEvent, decided_at: bytes) -> list[tuple[str, bytes]]:
    """The decision's id, the event's place in the events topic and `decided_at` (the batch's
    decision time, as `plain` writes it)."""
    source = item.source
    return [
        ("uac-decision-id", str(item.decision_id).encode()),
        ("uac-source", f"{source.topic}/{source.partition}/{source.offset}".encode()),
        ("uac-decided-at", decided_at),
    ]


async def publish(pipeline: Pipeline, output: BatchOutput, decided_at: datetime) -> None:
    """Send the batch's accepted events, quarantine decisions and (sealed) alerts, and wait
    until Kafka has every one: only then may the table learn the new state (a replay after a
    crash in between finds the events already seen, so their outputs must already be out)."""
    decisions, alerts = decision_codec(), alert_codec()
    topics, batches = pipeline.topics, RecordBatches(kafka_producer(pipeline))
    decided = plain(decided_at).encode()
    for item in output.accepted:
        headers = accepted_headers(item, decided)
        partition = partition_of(pipeline, item.key)
        batches.add(topics.accepted, partition, item.key.encode(), item.value, headers)
    for decision in output.quarantined:
        subject = quarantine_key(decision)
        value = decisions.encode(decision)
        batches.add(topics.quarantine, partition_of(pipeline, subject), subject.encode(), value)
    for alert in output.alerts:
        subject = alert.key
        if subject in output.erased:
            continue
        try:
            sealed = pipeline.sealer.seal(subject, alerts.encode(alert))
        except SubjectErased:
            log.warning("alert of an erased subject not published (%s…)", ref_of_key(subject)[:12])
            continue
        batches.add(topics.alerts, partition_of(pipeline, subject), subject.encode(), sealed)
    await batches.deliver()


async def store(
    pipeline: Pipeline, output: BatchOutput, checkpoints: Checkpoints, deadlines: Deadlines
) -> None:
    """One head write per changed subject (its new events appended, sealed), after the history
    segments that closed, into the table and its changelog (delivered before this returns);
    the subject's checkpoint is then due on the compacted state topic, and its next validity
    bound is scheduled on the clock. A subject whose key was destroyed meanwhile (erased by
    another worker during a rebalance) is left out; the batch's other subjects are stored."""
    framed: dict[str, list[bytes]] = {}
    for item in output.accepted:
        framed.setdefault(item.key, []).append(item.framed)
    table, changelog = pipeline.states, pipeline.states.changelog_topic.get_topic_name()
    batches = RecordBatches(kafka_producer(pipeline))
    for key, state in output.states.items():
        if key in output.erased:
            continue
        previous = loaded(pipeline, key)
        try:
            if previous is None or previous.state is None:
                head, closed = StoredState.first(state, framed[key], pipeline.sealer)
            else:
                head, closed = previous.extended(state, framed[key], pipeline.sealer)
        except SubjectErased:
            log.warning("state of an erased subject not stored (%s…)", ref_of_key(key)[:12])
            continue
        partition = partition_of(pipeline, key)
        records: list[tuple[str, StoredState | StoredSegment]] = [*closed, (key, head)]
        for name, stored in records:
            table.data[name] = stored
            batches.add(changelog, partition, name.encode(), stored.encoded)
        checkpoints.touched(key)
        deadlines.update(key, state)
    await batches.deliver()


async def erase(pipeline: Pipeline, erasures: Sequence[Event], now: datetime) -> None:
    """Ledger entry (delivered before anything is destroyed), key destruction, tombstones.
    After a crash in between, start-up reconciliation destroys the keys of every ledger entry."""
    codec = erasure_codec()
    for request in erasures:
        key = request.key
        entry = ErasureRecorded(
            erasure_id=request.id,
            tenant_id=request.tenant_id,
            subject_ref=ref_of_key(key),
            requested_at=request.occurred_at,
            recorded_at=now,
            requested_by=request.actor,
            key_destroyed=True,
        )
        delivery = await pipeline.erasures.send(
            key=entry.subject_ref.encode(), value=codec.encode(entry)
        )
        await delivery
        pipeline.ledger.add(entry)
        destroyed = pipeline.keys.destroy(key)
        head = pipeline.states.get(key)
        if isinstance(head, StoredState) and head.state is not None:
            forget_events(head.state.events.values())
        segments = head.segments if isinstance(head, StoredState) else 0
        for number in range(segments):
            if segment_key(key, number) in pipeline.states:
                del pipeline.states[segment_key(key, number)]
        if key in pipeline.states:
            del pipeline.states[key]
        await pipeline.state.send(key=key.encode(), value=None)
        log.info("erased subject %s… (a key was destroyed: %s)", entry.subject_ref[:12], destroyed)


def load_state(pipeline: Pipeline) -> Any:
    def load(key: str) -> Any:
        stored = loaded(pipeline, key)
        return None if stored is None else stored.state

    return load


def history_bytes(pipeline: Pipeline) -> Any:
    def held(key: str) -> int:
        stored = pipeline.states.data.get(key)
        return stored.history_bytes if isinstance(stored, StoredState) else 0

    return held


def fail_stop(failed: str, reason: BaseException) -> NoReturn:
    """Stop the process without acknowledging the batch: Faust would otherwise commit the
    offsets of events whose results were never published (silent loss). The supervisor
    restarts the worker, which replays from the last commit."""
    log.critical("%s failed; stopping without committing", failed, exc_info=reason)
    logging.shutdown()
    os._exit(EXIT_PUBLISH_FAILED)


def register_agents(
    pipeline: Pipeline,
    processor: BatchProcessor,
    tenants: TenantsWatch,
    batch_size: int,
    within: float,
    checkpoint_interval: float,
    clock_interval: float,
    stall_seconds: float,
    metrics: WorkerMetrics,
) -> None:
    checkpoints, deadlines = Checkpoints(checkpoint_interval), Deadlines()
    watch = StallWatch(stall_seconds, last_progress=time.monotonic())
    reader = RangeReader(broker_address(pipeline), pipeline.topics.events)
    batches = Batches(pipeline, processor, checkpoints, deadlines, metrics, reader, batch_size)

    gathered = pipeline.app.batches_of(pipeline.topics.events, batch_size, within)

    @pipeline.app.agent(pipeline.events, concurrency=1, name="gate_and_project")
    async def gate_and_project(_stream: Any) -> None:
        """The events reach the agent in batches the consumer's fetch loop gathers
        (`streams.delivery.TopicBatches`), not one by one through its Faust stream (which
        subscribes the topic)."""
        async for messages in gathered.batches(pipeline.app.acknowledge):
            await batches.handle([from_record(message) for message in messages])
            watch.progressed(time.monotonic())
            metrics.broker_heard_at = time.monotonic()

    @pipeline.app.timer(STALL_CHECK_SECONDS)  # type: ignore[untyped-decorator]
    async def watch_idle_partitions() -> None:
        try:
            await check_offsets(pipeline, watch, batches, metrics)
        except KafkaError as error:
            log.warning("offset check skipped (the broker did not answer): %r", error)
        except (NotReady, ConsumerStoppedError):
            log.info("offset check skipped: the consumer is starting or stopping")

    @pipeline.app.timer(checkpoint_interval)  # type: ignore[untyped-decorator]
    async def publish_pending_checkpoints() -> None:
        """Only subjects of partitions this worker owns, and only once it is settled: a standby
        copy, or one still recovering, may hold an older state than the owner published."""
        await checkpoints.publish_due(
            lambda keys: publish_checkpoints(pipeline, owned_subjects(pipeline, keys), metrics),
            lambda: producer_running(pipeline) and settled(pipeline),
        )

    @pipeline.app.timer(clock_interval)  # type: ignore[untyped-decorator]
    async def advance_clocks() -> None:
        await tick_due_subjects(pipeline, deadlines, metrics, batches.lock)

    @pipeline.app.timer(tenants.settings.tenants_reload_seconds)  # type: ignore[untyped-decorator]
    async def reload_tenants_file() -> None:
        enforce_tenants_file(tenants, processor, metrics)

    @pipeline.app.on_rebalance_complete.connect
    async def republish_after_recovery(_sender: Any, /, *_args: Any, **_kwargs: Any) -> None:
        """Recovered (or newly assigned) subjects get their checkpoint re-published and their
        validity bounds read again."""
        keys = [key for key in list(pipeline.states.keys()) if not is_segment_key(key)]
        subjects = owned_subjects(pipeline, keys)
        checkpoints.touch_all(subjects)
        deadlines.reread(subjects)

    @pipeline.app.on_rebalance_complete.connect
    async def note_the_broker_answered(_sender: Any, /, *_args: Any, **_kwargs: Any) -> None:
        metrics.broker_heard_at = time.monotonic()

    @pipeline.app.on_before_shutdown.connect
    async def close_reader(_sender: Any, /, *_args: Any, **_kwargs: Any) -> None:
        await reader.close()

    @pipeline.app.task  # type: ignore[untyped-decorator]
    async def diagnose_on_request() -> None:
        dump_tasks_on_signal(lambda: consumer_state(pipeline.app, pipeline.topics.events))

    @pipeline.app.task  # type: ignore[untyped-decorator]
    async def keep_ledger_current() -> None:
        await follow_ledger(
            broker_address(pipeline),
            pipeline.topics.erasures,
            pipeline.ledger,
            asyncio.Event(),
        )


def enforce_tenants_file(
    watch: TenantsWatch, processor: BatchProcessor, metrics: WorkerMetrics
) -> None:
    """Poll the tenants file once; the gate enforces a changed one from the next batch on."""
    change = watch.follow()
    if isinstance(change, Reloaded):
        processor.gate_policy = change.policy.gate_policy
        processor.actor_keys = change.policy.actor_keys
        metrics.tenants_file_enforced(change.policy.sha256)
    elif isinstance(change, Refused):
        metrics.tenants_file_refusals.inc()


async def tick_due_subjects(
    pipeline: Pipeline, deadlines: Deadlines, metrics: WorkerMetrics, lock: asyncio.Lock
) -> None:
    """One round of the clock (`streams.clock`): read the bounds of subjects recovered since the
    last round (between the agent's batches), then, holding the agent's `lock` so that no
    batch is between its outputs and its table write, publish a `ClockAdvanced` for each
    subject of this worker's partitions whose bound has passed."""
    if not assigned_events_partitions(pipeline) or not producer_running(pipeline):
        return
    for number, key in enumerate(list(deadlines.unknown)):
        schedule(pipeline, deadlines, key)
        if number % Checkpoints.CHUNK == 0:
            await asyncio.sleep(0)
    async with lock:
        await publish_ticks(pipeline, deadlines, metrics, datetime.now(UTC))


async def publish_ticks(
    pipeline: Pipeline, deadlines: Deadlines, metrics: WorkerMetrics, now: datetime
) -> None:
    """The ticks due at `now`, published; those Kafka refused are due again next round."""
    keys = deadlines.due(now)
    due = owned_subjects(pipeline, keys) if settled(pipeline) else []
    found = ticks(due, lambda key: stored_state(pipeline, key), now, event_codec(), pipeline.sealer)
    for tick in found:
        deadlines.sent(tick.key, tick.event.occurred_at)
    for key in set(due) - {tick.key for tick in found}:
        schedule(pipeline, deadlines, key)
    try:
        await send_ticks(
            found,
            RecordBatches(kafka_producer(pipeline)),
            pipeline.topics.events,
            lambda key: partition_of(pipeline, key),
        )
    except (KafkaError, NotReady) as error:
        for tick in found:
            deadlines.refused(tick.key)
        log.warning("clock ticks not published (tried again next round): %r", error)
        return
    metrics.clock_ticks.inc(len(found))


def schedule(pipeline: Pipeline, deadlines: Deadlines, key: str) -> None:
    """Schedule a subject's next bound from its stored state (none for a subject gone from the
    table)."""
    state = stored_state(pipeline, key)
    if state is None:
        deadlines.forget(key)
    else:
        deadlines.update(key, state)


def stored_state(pipeline: Pipeline, key: str) -> UserState | None:
    """A subject's state in the table; None when it is not there, or cannot be loaded (logged
    by reference: the clock leaves that subject out, the worker goes on)."""
    try:
        stored = loaded(pipeline, key)
    except LookupError as error:
        log.error("no clock for subject %s…: %s", ref_of_key(key)[:12], error.__class__.__name__)
        return None
    return None if stored is None else stored.state


def assigned_events_partitions(pipeline: Pipeline) -> list[Any]:
    """The events partitions this worker owns now (none while it rebalances or recovers)."""
    return events_assignment(pipeline) if settled(pipeline) else []


async def committed_of(pipeline: Pipeline, assigned: Sequence[Any]) -> dict[int, int]:
    """The worker group's committed offsets of `assigned` events partitions."""
    partitions = [TopicPartition(tp.topic, tp.partition) for tp in assigned]
    return await group_committed_offsets(broker_address(pipeline), pipeline.app.conf.id, partitions)


async def end_offsets(pipeline: Pipeline, assigned: Sequence[Any]) -> dict[int, int]:
    highwaters = await pipeline.app.consumer.highwaters(*assigned)
    return {tp.partition: end for tp, end in highwaters.items()}


async def check_offsets(
    pipeline: Pipeline, watch: StallWatch, batches: Batches, metrics: WorkerMetrics
) -> None:
    """One reading of the owned events partitions' end offsets: the records of each that the
    agent has still to process (the lag gauge, and the watch's note of the partitions behind),
    then the idle-partition checks."""
    assigned = assigned_events_partitions(pipeline)
    ends = await end_offsets(pipeline, assigned) if assigned else {}
    if assigned:
        metrics.broker_heard_at = time.monotonic()
    expected = await batches.expected(ends)
    lag = {p: max(0, end - expected[p]) for p, end in ends.items()}
    metrics.observe_lag(lag)
    watch.seen_behind([p for p, records in lag.items() if records], time.monotonic())
    await check_idle_partitions(watch, batches, assigned, ends)


async def check_idle_partitions(
    watch: StallWatch, batches: Batches, assigned: Sequence[Any], ends: Mapping[int, int]
) -> None:
    """When no batch arrived for a while, look at the assigned events partitions' offsets:
    process the tails the consumer passed over (`Batches.fill_tails`), send the consumer back
    to offsets it fetched but never delivered (`Batches.rewind`), and restart the worker in
    place when partitions have work but nothing moved for the watch's period (see
    `streams.liveness`). The group's committed offsets are asked only when these need them."""
    if not assigned:
        watch.progressed(time.monotonic())
        return
    if time.monotonic() - watch.last_progress < STALL_CHECK_SECONDS:
        return
    pipeline = batches.pipeline
    behind = await batches.behind(assigned, ends)
    stalling = watch.may_stall(time.monotonic())
    if not (behind or stalling):
        return
    committed = await committed_of(pipeline, assigned)
    await batches.fill_tails(behind, ends, committed)
    await batches.rewind(
        behind, lambda: time.monotonic() - watch.last_progress >= STALL_CHECK_SECONDS
    )
    if not stalling:
        return
    stalled = watch.stalled(committed, ends, time.monotonic())
    if stalled:
        log.error(
            "no progress for %.0f s while partitions %s of %s have unprocessed events "
            "(committed %s, end %s); restarting the worker from the committed offsets",
            watch.stall_seconds,
            stalled,
            pipeline.topics.events,
            committed,
            ends,
        )
        restart_in_place()


def broker_address(pipeline: Pipeline) -> str:
    broker = pipeline.app.conf.broker[0]
    return f"{broker.host}:{broker.port}"


@dataclass
class Batches:
    """Runs the agent's batches so that every offset of the events topic is processed once
    the consumer has moved past it (`streams.continuity`): records the consumer passed over are
    read from the log and processed in order, and after each step the next expected offset of
    its partitions is written to the progress table (after the step's outputs were delivered)."""

    pipeline: Pipeline
    processor: BatchProcessor
    checkpoints: Checkpoints
    deadlines: Deadlines
    metrics: WorkerMetrics
    reader: OffsetRanges
    chunk: int
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def handle(self, messages: Sequence[Incoming]) -> None:
        async with self.lock:
            expected = await self.expected({message.partition for message in messages})
            steps = plan(expected, messages)
            planned = sum(len(step) for step in steps if not isinstance(step, Gap))
            if planned < len(messages):
                self.metrics.redelivered_records.inc(len(messages) - planned)
            for step in steps:
                if isinstance(step, Gap):
                    await self.fill(step)
                else:
                    await self.run(step)
                    self.advance(step)

    async def expected(self, partitions: Iterable[int]) -> dict[int, int]:
        """The next offset to process per partition; where none was recorded yet, the start of
        the log (a new pipeline, or a progress table lost)."""
        progress = self.pipeline.progress
        return {
            p: progress[p] if p in progress else await self.reader.log_start(p) for p in partitions
        }

    def advance(self, step: Step) -> None:
        progress = self.pipeline.progress
        for partition, offset in reached(step).items():
            if offset > progress.get(partition, -1):
                progress[partition] = offset

    async def run(self, messages: Sequence[Incoming]) -> None:
        pipeline, started, now = self.pipeline, time.monotonic(), datetime.now(UTC)
        try:
            output = self.processor.process_batch(
                messages,
                load_state(pipeline),
                now,
                pipeline.ledger.is_erased,
                history_bytes(pipeline),
            )
        except RegistryUnavailable as error:
            fail_stop("asking the schema registry for a writer schema", error)
        try:
            await publish(pipeline, output, now)
            await store(pipeline, output, self.checkpoints, self.deadlines)
            await erase(pipeline, output.erasures, now)
            for erasure in output.erasures:
                self.deadlines.forget(erasure.key)
        except Exception as error:  # noqa: BLE001 (any failure must stop before a commit)
            fail_stop("publishing a processed batch", error)
        self.metrics.observe(output, time.monotonic() - started)

    async def fill(self, gap: Gap) -> None:
        """Read the gap's records from the log and run them, chunk by chunk."""
        recovered = 0
        try:
            first = await self.reader.log_start(gap.partition)
            if first > gap.start:
                self.metrics.offsets_lost_to_retention.inc(min(first, gap.end) - gap.start)
                log.error(
                    "offsets %d-%d of partition %d were deleted by retention before the worker "
                    "processed them",
                    gap.start,
                    min(first, gap.end) - 1,
                    gap.partition,
                )
            async for records in self.reader.read(gap.partition, gap.start, gap.end, self.chunk):
                messages = [from_record(record) for record in records]
                await self.run(messages)
                self.advance(tuple(messages))
                recovered += len(messages)
        except Exception as error:  # noqa: BLE001 (unread, the gap must not be committed over)
            fail_stop("reading offsets the consumer passed over", error)
        self.advance(gap)
        where = (gap.start, gap.end - 1, self.pipeline.topics.events, gap.partition)
        if recovered:
            self.metrics.gaps.inc()
            self.metrics.recovered_records.inc(recovered)
            log.warning(
                "the consumer passed over offsets %d-%d of %s partition %d: %d events read "
                "from the log and processed",
                *where,
                recovered,
            )
        else:
            log.debug(
                "offsets %d-%d of %s partition %d hold no event (transaction markers)", *where
            )

    async def behind(self, assigned: Sequence[Any], ends: Mapping[int, int]) -> list[Any]:
        """The assigned partitions whose end lies past the next offset the agent expects."""
        expected = await self.expected(ends)
        return [tp for tp in assigned if expected[tp.partition] < ends[tp.partition]]

    async def fill_tails(
        self, behind: Sequence[Any], ends: Mapping[int, int], committed: Mapping[int, int]
    ) -> None:
        """Offsets at the end of a partition that the group committed but the agent never
        processed (no later record will arrive to reveal the jump). A partition that moved to
        another worker meanwhile (a rebalance: Faust does not pause timers) is left to that
        worker."""
        for tp in behind:
            if committed[tp.partition] < ends[tp.partition]:
                continue
            async with self.lock:
                if tp not in assigned_events_partitions(self.pipeline):
                    continue
                start = (await self.expected([tp.partition]))[tp.partition]
                if start < ends[tp.partition]:
                    await self.fill(Gap(tp.partition, start, ends[tp.partition]))

    async def rewind(self, behind: Sequence[Any], still_idle: Callable[[], bool]) -> None:
        """Offsets the consumer fetched but never handed to the agent (Faust can drop records
        fetched around a rebalance or its recovery, seen after a graceful restart of the only
        worker; its position has moved past them, so they would never come again): while the
        agent is `still_idle`, the consumer is sent back to the agent's next offset, and Faust
        delivers, acknowledges and commits them as usual."""
        consumer = self.pipeline.app.consumer
        for tp in behind:
            async with self.lock:
                if not still_idle() or tp not in assigned_events_partitions(self.pipeline):
                    continue
                start = (await self.expected([tp.partition]))[tp.partition]
                position = await consumer.position(tp)
                if position is None or position <= start:
                    continue
                await consumer.seek(tp, start)
            self.metrics.rewinds.inc()
            log.warning(
                "the consumer fetched offsets %d-%d of %s partition %d but never delivered "
                "them; fetching them again",
                start,
                position - 1,
                self.pipeline.topics.events,
                tp.partition,
            )


def from_record(record: Any) -> Incoming:
    return Incoming(
        record.key, record.value, record.topic, record.partition, record.offset, headers_of(record)
    )
