"""The worker's `/health` and `/metrics`: a supervisor sees whether the worker is serving (200)
or starting, rebalancing, recovering its tables or waiting for the broker (503), which
partitions it owns and how far behind each is."""

from __future__ import annotations

import asyncio
import socket
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from faust.exceptions import NotReady
from faust.types import TP

from streams.broker_contact import BROKER_SILENCE_SECONDS
from streams.ports import PortUnavailable
from streams.topics import Topics
from streams.worker_http import (
    Phase,
    WorkerHealth,
    endpoints,
    serve_worker_http,
    worker_health,
)
from streams.worker_metrics import WorkerMetrics
from tests.kafka_fakes import BatchProducer

TOPICS = Topics("p.", 4)


def _not_started() -> Any:
    raise NotReady("the producer is not started")


OWNED = {TP(TOPICS.events, 2), TP(TOPICS.events, 0), TP(TOPICS.alerts, 1)}


def _pipeline(
    *,
    started: bool = True,
    rebalancing: bool = False,
    recovering: bool = False,
    owned: set[TP] = OWNED,
) -> Any:
    ensure = BatchProducer if started else _not_started
    app = SimpleNamespace(
        producer=SimpleNamespace(_ensure_producer=ensure),
        rebalancing=rebalancing,
        in_recovery=recovering,
        consumer=SimpleNamespace(assignment=lambda: owned),
    )
    return SimpleNamespace(app=app, topics=TOPICS)


@pytest.mark.parametrize(
    ("state", "phase"),
    [
        ({"started": False}, Phase.STARTING),
        ({"rebalancing": True}, Phase.REBALANCING),
        ({"recovering": True}, Phase.RECOVERING),
        ({}, Phase.RUNNING),
    ],
)
def test_the_phase_follows_what_the_worker_is_doing(state: dict[str, Any], phase: Phase) -> None:
    assert worker_health(_pipeline(**state), WorkerMetrics()).phase is phase


def _metrics_read(seconds_ago: float | None, now: float) -> WorkerMetrics:
    metrics = WorkerMetrics()
    metrics.broker_heard_at = None if seconds_ago is None else now - seconds_ago
    return metrics


@pytest.mark.parametrize(
    ("seconds_ago", "owned", "phase"),
    [
        pytest.param(
            BROKER_SILENCE_SECONDS + 1, True, Phase.WAITING_FOR_BROKER, id="broker silent too long"
        ),
        pytest.param(BROKER_SILENCE_SECONDS - 1, True, Phase.RUNNING, id="a reading missed or two"),
        pytest.param(None, True, Phase.RUNNING, id="no reading yet"),
        pytest.param(
            BROKER_SILENCE_SECONDS * 10, False, Phase.RUNNING, id="no partitions to read offsets of"
        ),
    ],
)
def test_a_worker_whose_offset_readings_go_unanswered_says_it_waits_for_the_broker(
    seconds_ago: float | None, owned: bool, phase: Phase
) -> None:
    now = 10_000.0
    pipeline = _pipeline() if owned else _pipeline(owned=set())
    health = worker_health(pipeline, _metrics_read(seconds_ago, now), now)
    assert (health.phase, health.serving) == (phase, phase is Phase.RUNNING)


def test_a_rebalance_is_told_before_a_silent_broker() -> None:
    now = 10_000.0
    metrics = _metrics_read(BROKER_SILENCE_SECONDS * 2, now)
    assert worker_health(_pipeline(rebalancing=True), metrics, now).phase is Phase.REBALANCING


def test_a_running_worker_reports_its_events_partitions_and_their_lag() -> None:
    metrics = WorkerMetrics()
    metrics.observe_lag({0: 3, 2: 0})
    health = worker_health(_pipeline(), metrics)
    assert health.partitions == (0, 2)
    assert health.as_json() == {"status": "running", "assigned": [0, 2], "lag": {"0": 3, "2": 0}}


def _get(health: WorkerHealth, metrics: WorkerMetrics, path: str) -> tuple[int, str]:
    async def fetch() -> tuple[int, str]:
        async with TestClient(TestServer(endpoints(metrics, lambda: health))) as client:
            response = await client.get(path)
            return response.status, await response.text()

    return asyncio.run(fetch())


def test_health_answers_200_while_serving_and_503_otherwise() -> None:
    metrics = WorkerMetrics()
    status, body = _get(WorkerHealth(Phase.RUNNING, (1,), {1: 0}), metrics, "/health")
    assert (status, body) == (200, '{"status": "running", "assigned": [1], "lag": {"1": 0}}')
    status, body = _get(WorkerHealth(Phase.RECOVERING, (), {}), metrics, "/health")
    assert status == 503
    assert '"recovering"' in body


def test_metrics_serves_the_workers_prometheus_registry() -> None:
    metrics = WorkerMetrics()
    metrics.observe_lag({3: 7})
    status, body = _get(WorkerHealth(Phase.RUNNING, (3,), {3: 7}), metrics, "/metrics")
    assert status == 200
    assert 'uac_worker_lag_records{partition="3"} 7.0' in body


def test_given_a_taken_port_then_the_worker_says_so_before_it_starts() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(PortUnavailable, match=f"127.0.0.1:{port}"):
            serve_worker_http(_pipeline(), WorkerMetrics(), port)
