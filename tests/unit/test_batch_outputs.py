"""The worker's outputs of one batch when a subject's key is destroyed in the middle of it (an
erasure carried out by another worker during a rebalance): that subject's alert and state are
left out, every other subject's are published and stored."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rules.engine import default_rules
from schemas.codec import alert_codec, event_codec
from streams.agents import publish, store
from streams.checkpoints import Checkpoints
from streams.clock import Deadlines
from streams.keys import FileKeyStore
from streams.processing import BatchProcessor, Incoming
from streams.sealing import Sealer
from streams.table_codecs import StoredState
from tests.factories import T0, make_event
from tests.fakes import TableKnowledge
from tests.kafka_fakes import BatchProducer, Table, faust_app
from tests.unit.test_processing import POLICY


def conflicting_events(sealer: Sealer, subject: str, first_offset: int) -> list[Incoming]:
    allergy = make_event("AllergyRecorded", f"{subject}-a", subject=subject)
    drug = make_event("MedicationPrescribed", f"{subject}-rx", subject=subject, at=timedelta(1))
    return [
        Incoming(e.key.encode(), sealer.seal(e.key, event_codec().encode(e)), "uac.events", 0, n)
        for n, e in enumerate([allergy, drug], start=first_offset)
    ]


def test_given_a_key_destroyed_during_the_batch_then_only_that_subject_is_left_out(
    tmp_path: Path,
) -> None:
    keys = FileKeyStore(tmp_path / "keys")
    sealer = Sealer(keys)
    messages = conflicting_events(sealer, "kept", 0) + conflicting_events(sealer, "erased", 2)
    processor = BatchProcessor(event_codec(), default_rules(TableKnowledge()), POLICY, sealer)
    output = processor.process_batch(messages, lambda _key: None, T0 + timedelta(days=30))
    assert {a.subject_id for a in output.alerts} == {"kept", "erased"}
    keys.destroy("clinic-a:erased")
    producer = BatchProducer()
    pipeline: Any = SimpleNamespace(
        app=faust_app(producer),
        topics=SimpleNamespace(accepted="acc", quarantine="q", alerts="alerts", partitions=4),
        states=Table(),
        sealer=sealer,
    )
    asyncio.run(publish(pipeline, output, T0))
    sent = producer.sent
    alerts = [alert_codec().decode(sealer.open(v)[1]) for t, _, v in sent if t == "alerts"]
    assert [a.subject_id for a in alerts] == ["kept"]
    assert len([t for t, _, _ in sent if t == "acc"]) == 4
    checkpoints = Checkpoints(1.0)
    asyncio.run(store(pipeline, output, checkpoints, Deadlines()))
    assert list(pipeline.states) == ["clinic-a:kept"]
    assert [key for t, key, _ in producer.sent if t == "changelog"] == [b"clinic-a:kept"]
    head = pipeline.states["clinic-a:kept"]
    assert isinstance(head, StoredState) and head.state is not None
    assert head.state.version == 2
    assert list(checkpoints.dirty) == ["clinic-a:kept"]
