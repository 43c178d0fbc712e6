"""Records written with Kafka features the UaC publisher does not use, on the real broker: every
compression codec Kafka has is read, the records of an aborted transaction never reach a
subject's state, and a record a producer put on another partition than its key's is refused as
`wrong_partition` (another worker may own its subject) and admitted once redriven."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from schemas.codec import event_codec
from schemas.events import Event
from streams.record_batches import default_partition
from tests.factories import make_event
from tests.integration.harness import Pipeline, wait_for
from tests.integration.test_pipeline import every_event_decided

pytestmark = pytest.mark.integration
CODECS = ("gzip", "snappy", "lz4", "zstd")


def sealed_value(pipeline: Pipeline, event: Event) -> bytes:
    return pipeline.sealer.seal(event.key, event_codec().encode(event))


async def _send(pipeline: Pipeline, event: Event, **options: Any) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=pipeline.bootstrap, **options)
    await producer.start()
    try:
        await producer.send_and_wait(
            pipeline.topics.events, sealed_value(pipeline, event), key=event.key.encode()
        )
    finally:
        await producer.stop()


async def _in_transactions(pipeline: Pipeline, committed: Event, aborted: list[Event]) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=pipeline.bootstrap, transactional_id="probe-producer"
    )
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send(
                pipeline.topics.events,
                sealed_value(pipeline, committed),
                key=committed.key.encode(),
            )
        await producer.begin_transaction()
        for event in aborted:
            await producer.send(
                pipeline.topics.events, sealed_value(pipeline, event), key=event.key.encode()
            )
        await producer.abort_transaction()
    finally:
        await producer.stop()


def test_given_compressed_and_transactional_records_then_committed_ones_are_read_and_aborted_never(
    pipeline: Pipeline,
) -> None:
    compressed = {codec: make_event("PreferenceStated", f"c-{codec}") for codec in CODECS}
    committed = make_event("PreferenceStated", "committed", subject="txn")
    aborted = [
        make_event("MedicationPrescribed", "aborted-rx", subject="txn"),
        make_event("PreferenceStated", "aborted-pref", subject="txn"),
    ]
    pipeline.start("worker", "--loglevel", "info")
    for codec, event in compressed.items():
        asyncio.run(_send(pipeline, event, compression_type=codec))
    asyncio.run(_in_transactions(pipeline, committed, aborted))
    expected = {e.id for e in compressed.values()} | {committed.id}
    accepted = wait_for(
        pipeline.accepted,
        lambda found: {e.id for e in found} >= expected,
        what="every compressed record and the committed transaction accepted",
    )
    assert {e.id for e in accepted} == expected
    assert pipeline.quarantined() == []
    every_event_decided(pipeline, len(expected))
    state = pipeline.uac("state", "--tenant", "clinic-a", "--subject", "txn", "--json")
    assert state.returncode == 0, state.stderr
    assert str(committed.id) in state.stdout
    assert not any(str(event.id) in state.stdout for event in aborted)


def test_given_a_record_on_another_partition_than_its_keys_then_wrong_partition_until_redriven(
    pipeline: Pipeline,
) -> None:
    event = make_event("AllergyRecorded", "misplaced", subject="placed-elsewhere")
    home = default_partition(event.key.encode(), pipeline.topics.partitions)
    elsewhere = (home + 1) % pipeline.topics.partitions
    pipeline.start("worker", "--loglevel", "info")

    async def misplace() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=pipeline.bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(
                pipeline.topics.events,
                sealed_value(pipeline, event),
                key=event.key.encode(),
                partition=elsewhere,
            )
        finally:
            await producer.stop()

    asyncio.run(misplace())
    refused = wait_for(pipeline.quarantined, lambda found: len(found) == 1, what="the refusal")
    assert refused[0].reasons == ("wrong_partition",)
    assert refused[0].tenant_id == "clinic-a"
    assert f"belongs on partition {home}" in refused[0].detail
    assert pipeline.accepted() == []
    done = pipeline.uac("redrive", "--tenant", "clinic-a", "--reason", "wrong_partition", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sent"] == 1
    accepted = wait_for(pipeline.accepted, lambda found: len(found) == 1, what="the redriven copy")
    assert [e.id for e in accepted] == [event.id]
    placed = [
        record
        for record in pipeline.read(pipeline.topics.events)
        if record.partition == home and record.key == event.key.encode()
    ]
    assert len(placed) == 1
