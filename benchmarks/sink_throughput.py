"""Throughput of the ClickHouse sink into the embedded engine (chDB), and the cost of erasure.

Prints rows/s for 50,000 accepted events (each one `events` row and one `gate_decisions` row),
sealed with their subject's key as the worker publishes them:

1. decode + map: opening (AES-GCM), Avro decode and the row mappers, no I/O; and the same
   without the opening, for the ratio;
2. insert: column-wise `write_batch` of 10,000-event batches into chDB;
3. erasure: `carry_out_erasure` of a few subjects in that table (mutations, verification with
   `apply_deleted_mask = 0`, receipt), and how long the engine keeps the superseded parts;
4. end to end: the real sink (aiokafka consumer, opening, batching, inserts, commits) reading
   the events from a local Kafka broker that this script starts and stops (skipped without
   java/mvn).

Figures are noisy on a 2-core machine: compare them with each other within one run.
Run: `.venv/bin/python -m benchmarks.sink_throughput`.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from uuid import NAMESPACE_URL, uuid5

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from clickhouse_connect.driver.client import Client

from benchmarks.output import machine_speed_around, quiet_producer_retries
from benchmarks.synthetic import subject_events
from projections.document import plain
from schemas.codec import event_codec
from schemas.erasures import ErasureRecorded, subject_ref
from schemas.events import Event
from streams import local_kafka
from streams.clickhouse import apply_schema, carry_out_erasure, connect, write_batch
from streams.keys import FileKeyStore
from streams.rows import DECISION_COLUMNS, EVENT_COLUMNS, Coordinates, Row, accepted_rows
from streams.sealing import Sealer
from streams.settings import Settings
from streams.sink import Sink
from streams.topics import Topics, ensure_topics

EVENTS = 50_000
SUBJECTS = 500
BATCH = 10_000
PARTITIONS = 4
ERASED_SUBJECTS = 5
PART_REMOVAL_WAIT_SECONDS = 120.0

Record = tuple[bytes, bytes, list[tuple[str, bytes]]]


def synthetic_events() -> list[Event]:
    rng = random.Random(11)
    per_subject = EVENTS // SUBJECTS
    return [
        event
        for number in range(SUBJECTS)
        for event in subject_events(rng, "bench", f"s{number}", per_subject, number * per_subject)
    ]


def accepted_records(events: Sequence[Event], sealer: Sealer) -> list[Record]:
    """(key, sealed value, headers) as the worker publishes them on the accepted topic."""
    codec = event_codec()
    decided = plain(datetime.now(UTC)).encode()
    return [
        (
            event.key.encode(),
            sealer.seal(event.key, codec.encode(event)),
            [
                ("uac-decision-id", str(uuid5(NAMESPACE_URL, event.event_id)).encode()),
                ("uac-source", f"uac.events/0/{index}".encode()),
                ("uac-decided-at", decided),
            ],
        )
        for index, event in enumerate(events)
    ]


def decode_and_map(
    records: Sequence[Record], sealer: Sealer, opened: Sequence[bytes] | None = None
) -> tuple[list[Row], list[Row], float]:
    """Rows of every record and the seconds it took; with `opened` (the values already opened)
    the opening is left out of the timing, for the ratio."""
    codec = event_codec()
    now = datetime.now(UTC)
    events, decisions = [], []
    started = time.perf_counter()
    for offset, (_, value, headers) in enumerate(records):
        framed = sealer.open(value)[1] if opened is None else opened[offset]
        at = Coordinates("uac.events.accepted", 0, offset)
        event_row, decision = accepted_rows(codec.decode_record(framed), value, headers, at, now)
        events.append(event_row)
        decisions.append(decision)
    return events, decisions, time.perf_counter() - started


def insert_batches(client: Client, events: list[Row], decisions: list[Row]) -> float:
    apply_schema(client)
    started = time.perf_counter()
    for first in range(0, len(events), BATCH):
        token = f"bench/{first}"
        write_batch(client, "events", EVENT_COLUMNS, events[first : first + BATCH], token)
        chunk = decisions[first : first + BATCH]
        write_batch(client, "gate_decisions", DECISION_COLUMNS, chunk, token)
    return time.perf_counter() - started


@dataclass(frozen=True)
class ErasureTiming:
    seconds: list[float]
    """Delete (mutations), verify (`apply_deleted_mask = 0`) and receipt, per erasure."""
    removed_rows: list[int]
    parts_gone_seconds: float | None
    """From the last erasure until no superseded part was left on disk (None: not in time)."""


def erase_subjects(client: Client, count: int) -> ErasureTiming:
    seconds, removed = [], []
    for number in range(count):
        entry = ErasureRecorded(
            erasure_id=f"bench-erasure-{number}",
            tenant_id="bench",
            subject_ref=subject_ref("bench", f"s{number}"),
            requested_at=datetime.now(UTC),
            recorded_at=datetime.now(UTC),
            requested_by="benchmark",
            key_destroyed=True,
        )
        outcome = carry_out_erasure(client, entry, lambda: datetime.now(UTC))
        seconds.append(outcome.seconds)
        removed.append(sum(outcome.removed.values()))
    return ErasureTiming(seconds, removed, seconds_until_no_outdated_parts(client))


def seconds_until_no_outdated_parts(client: Client) -> float | None:
    started = time.perf_counter()
    while time.perf_counter() - started < PART_REMOVAL_WAIT_SECONDS:
        outdated = client.query(
            "SELECT count() FROM system.parts WHERE database = 'uac' AND NOT active"
        ).result_rows[0][0]
        if outdated == 0:
            return time.perf_counter() - started
        time.sleep(0.2)
    return None


async def produce(bootstrap: str, topic: str, records: Sequence[Record]) -> dict[int, int]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20)
    await producer.start()
    ends: dict[int, int] = {}
    try:
        sent = [
            await producer.send(topic, value, key=key, headers=headers)
            for key, value, headers in records
        ]
        for metadata in await asyncio.gather(*sent):
            ends[metadata.partition] = max(ends.get(metadata.partition, 0), metadata.offset + 1)
    finally:
        await producer.stop()
    return ends


async def committed(bootstrap: str, group: str) -> dict[TopicPartition, int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    return {tp: meta.offset for tp, meta in offsets.items()}


@dataclass(frozen=True)
class SinkTiming:
    total_seconds: float
    """From `Sink.start()` to the last commit: connecting, joining the group, everything."""
    steady_records: int
    steady_seconds: float
    """Records committed between the first and the last commit, and the time between them."""


async def time_sink(settings: Settings, bootstrap: str, records: Sequence[Record]) -> SinkTiming:
    """Produce everything first, then time the sink from start until the last commit."""
    topics = Topics(settings.topic_prefix, settings.partitions)
    await ensure_topics(bootstrap, topics.specs())
    ends = await produce(bootstrap, topics.accepted, records)
    wanted = {TopicPartition(topics.accepted, p): end for p, end in ends.items()}
    sink = Sink(settings)
    stop = asyncio.Event()
    started = time.perf_counter()
    first: tuple[float, int] | None = None
    await sink.start()
    task = asyncio.create_task(sink.run(stop))
    try:
        while True:
            done = await committed(bootstrap, sink.group_id)
            now, count = time.perf_counter(), sum(max(0, done.get(tp, 0)) for tp in wanted)
            if first is None and count > 0:
                first = (now, count)
            if all(done.get(tp, -1) >= end for tp, end in wanted.items()):
                first = first or (now, count)
                return SinkTiming(now - started, count - first[1], now - first[0])
            await asyncio.sleep(0.02)
    finally:
        stop.set()
        await task
        await sink.stop()


def report_erasures(timing: ErasureTiming) -> None:
    slowest, mean = max(timing.seconds), sum(timing.seconds) / len(timing.seconds)
    print(
        f"erasure:       {mean * 1000:>10,.0f} ms mean, {slowest * 1000:,.0f} ms slowest "
        f"({len(timing.seconds)} subjects of {SUBJECTS}, {timing.removed_rows[0]:,} rows each)"
    )
    if timing.parts_gone_seconds is None:
        print(f"               superseded parts still on disk after {PART_REMOVAL_WAIT_SECONDS} s")
    else:
        print(f"               superseded parts removed {timing.parts_gone_seconds:.1f} s later")


def main() -> None:
    quiet_producer_retries()
    rows = 2 * EVENTS
    print(f"building {EVENTS:,} synthetic accepted events ({rows:,} rows) ...", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        sealer = Sealer(FileKeyStore(Path(scratch) / "keys"))
        records = accepted_records(synthetic_events(), sealer)
        opened = [sealer.open(value)[1] for _, value, _ in records]
        _, _, unsealed = decode_and_map(records, sealer, opened)
        events, decisions, mapping = decode_and_map(records, sealer)
        print(f"decode + map:  {rows / mapping:>10,.0f} rows/s ({mapping:.2f} s, opening included)")
        print(f"  unsealed:    {rows / unsealed:>10,.0f} rows/s ({unsealed:.2f} s, values opened)")
        client = connect(Settings(home=Path(scratch) / "insert"))
        try:
            inserting = insert_batches(client, events, decisions)
            print(
                f"chDB insert:   {rows / inserting:>10,.0f} rows/s ({inserting:.2f} s, "
                f"{BATCH:,}-event batches)"
            )
            report_erasures(erase_subjects(client, ERASED_SUBJECTS))
        finally:
            client.close()
        if shutil.which("java") is None or shutil.which("mvn") is None:
            print("end to end:    skipped (needs java and mvn to start a local Kafka broker)")
            return
        with local_kafka.running_broker(Path(scratch) / "kafka") as broker:
            settings = Settings(
                home=Path(scratch),
                kafka_bootstrap=broker.bootstrap,
                clickhouse_path=Path(scratch) / "sink",
                partitions=PARTITIONS,
                sink_batch_rows=BATCH,
                sink_batch_seconds=1.0,
            )
            timing = asyncio.run(time_sink(settings, broker.bootstrap, records))
        total = timing.total_seconds
        print(
            f"end to end:    {rows / total:>10,.0f} rows/s ({total:.2f} s from start to last "
            f"commit, {settings.sink_batch_rows:,}-row batches, start-up included)"
        )
        if timing.steady_seconds > 0:
            steady = 2 * timing.steady_records / timing.steady_seconds
            print(
                f"steady state:  {steady:>10,.0f} rows/s (first to last commit: "
                f"{timing.steady_records:,} events in {timing.steady_seconds:.2f} s)"
            )


if __name__ == "__main__":
    with machine_speed_around():
        main()
