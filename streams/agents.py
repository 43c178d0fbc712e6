"""The Faust agent: bytes in, bytes out, around the pure core.

`gate_and_project` reads raw messages from the events topic in batches, lets the Kafka-free
`BatchProcessor` decode, gate, fold and evaluate them, publishes accepted events, quarantine
decisions and alerts, then writes each changed subject's state once per batch (table +
compacted state topic). Sends happen before the table write, and Faust flushes the producer
before it commits offsets, so a crash replays events instead of losing them; replays are
harmless (duplicate event ids are refused by the gate, alert ids are deterministic).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from projections.document import plain
from schemas.codec import alert_codec, decision_codec
from streams.app import Pipeline
from streams.processing import AcceptedEvent, BatchOutput, BatchProcessor, Incoming
from streams.table_codecs import StoredState

log = logging.getLogger(__name__)
EXIT_PUBLISH_FAILED = 75


def incoming(event: Any) -> Incoming:
    message = event.message
    return Incoming(message.key, message.value, message.topic, message.partition, message.offset)


def accepted_headers(item: AcceptedEvent, decided_at: datetime) -> list[tuple[str, bytes]]:
    source = item.source
    return [
        ("uac-decision-id", str(item.decision_id).encode()),
        ("uac-source", f"{source.topic}/{source.partition}/{source.offset}".encode()),
        ("uac-decided-at", plain(decided_at).encode()),
    ]


async def publish(pipeline: Pipeline, output: BatchOutput, decided_at: datetime) -> None:
    decisions, alerts = decision_codec(), alert_codec()
    for item in output.accepted:
        headers = accepted_headers(item, decided_at)
        await pipeline.accepted.send(key=item.key.encode(), value=item.value, headers=headers)
    for decision in output.quarantined:
        subject = f"{decision.tenant_id}:{decision.subject_id}" if decision.tenant_id else "unknown"
        await pipeline.quarantine.send(key=subject.encode(), value=decisions.encode(decision))
    for alert in output.alerts:
        subject = f"{alert.tenant_id}:{alert.subject_id}"
        await pipeline.alerts.send(key=subject.encode(), value=alerts.encode(alert))


async def store(pipeline: Pipeline, output: BatchOutput) -> None:
    for key, state in output.states.items():
        stored = StoredState.of(state)
        pipeline.states[key] = stored
        await pipeline.state.send(key=key.encode(), value=stored.encoded)


def load_state(pipeline: Pipeline) -> Any:
    def load(key: str) -> Any:
        stored = pipeline.states.get(key)
        return None if stored is None else stored.state

    return load


def fail_stop(reason: BaseException) -> None:
    """Stop the process without acknowledging the batch: Faust would otherwise commit the
    offsets of events whose results were never published (silent loss). The supervisor
    restarts the worker, which replays from the last commit."""
    log.critical(
        "publishing a processed batch failed; stopping without committing", exc_info=reason
    )
    logging.shutdown()
    os._exit(EXIT_PUBLISH_FAILED)


def register_agents(
    pipeline: Pipeline, processor: BatchProcessor, batch_size: int, within: float
) -> None:
    @pipeline.app.agent(pipeline.events, concurrency=1, name="gate_and_project")
    async def gate_and_project(stream: Any) -> None:
        async for batch in stream.take_events(batch_size, within=within):
            await handle_batch(pipeline, processor, batch)


async def handle_batch(pipeline: Pipeline, processor: BatchProcessor, batch: Sequence[Any]) -> None:
    now = datetime.now(UTC)
    output = processor.process_batch(
        [incoming(event) for event in batch], load_state(pipeline), now
    )
    try:
        await publish(pipeline, output, now)
        await store(pipeline, output)
    except Exception as error:  # noqa: BLE001 (any failure must stop before a commit)
        fail_stop(error)
