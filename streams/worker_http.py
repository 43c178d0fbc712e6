"""The worker's HTTP endpoint on UAC_WORKER_METRICS_PORT (at UAC_WORKER_METRICS_HOST, by default
127.0.0.1): `GET /metrics` (Prometheus, `streams.worker_metrics`) and `GET /health` (what the
worker is doing now, for a supervisor's readiness probe).

`/health` answers 200 while the worker runs (in the group, its tables recovered, its producer
up), with the events partitions it owns and the records each still has to process; 503 while
it starts, rebalances or recovers its tables from the changelog, or while it owns partitions
but has heard nothing from the broker (no offset reading answered, every 5 s; no batch fetched;
no rebalance completed) for `streams.broker_contact.BROKER_SILENCE_SECONDS`, when it must not be
counted as serving.
The body carries no personal data.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from streams.agents import assigned_events_partitions
from streams.app import Pipeline
from streams.broker_contact import broker_silent
from streams.pipeline_access import producer_running
from streams.ports import listen
from streams.worker_metrics import WorkerMetrics

HOST = "127.0.0.1"


class Phase(StrEnum):
    STARTING = "starting"
    REBALANCING = "rebalancing"
    RECOVERING = "recovering"
    WAITING_FOR_BROKER = "waiting_for_broker"
    RUNNING = "running"


@dataclass(frozen=True)
class WorkerHealth:
    phase: Phase
    partitions: tuple[int, ...]
    lag: Mapping[int, int]

    @property
    def serving(self) -> bool:
        return self.phase is Phase.RUNNING

    def as_json(self) -> dict[str, Any]:
        return {
            "status": self.phase.value,
            "assigned": list(self.partitions),
            "lag": {str(partition): records for partition, records in sorted(self.lag.items())},
        }


def worker_health(
    pipeline: Pipeline, metrics: WorkerMetrics, now: float | None = None
) -> WorkerHealth:
    """What the worker is doing at `now` (`time.monotonic()`, by default the present)."""
    app = pipeline.app
    partitions = tuple(tp.partition for tp in assigned_events_partitions(pipeline))
    if not producer_running(pipeline):
        phase = Phase.STARTING
    elif app.rebalancing:
        phase = Phase.REBALANCING
    elif app.in_recovery:
        phase = Phase.RECOVERING
    elif partitions and broker_silent(
        metrics.broker_heard_at, time.monotonic() if now is None else now
    ):
        phase = Phase.WAITING_FOR_BROKER
    else:
        phase = Phase.RUNNING
    return WorkerHealth(phase, partitions, dict(metrics.lag_by_partition))


def serve_worker_http(
    pipeline: Pipeline, metrics: WorkerMetrics, port: int, host: str = HOST
) -> None:
    """Listen on `port` now (PortUnavailable before the worker starts if it cannot), and serve
    `/metrics` and `/health` there from the worker's own event loop, from its start until it
    shuts down."""
    listening = listen(host, port, "worker HTTP")
    runners: list[web.AppRunner] = []

    @pipeline.app.task  # type: ignore[untyped-decorator]
    async def start_http() -> None:
        runner = web.AppRunner(
            endpoints(metrics, lambda: worker_health(pipeline, metrics)), access_log=None
        )
        await runner.setup()
        await web.SockSite(runner, listening).start()
        runners.append(runner)

    @pipeline.app.on_before_shutdown.connect
    async def stop_http(_sender: Any, /, *_args: Any, **_kwargs: Any) -> None:
        for runner in runners:
            await runner.cleanup()


def endpoints(metrics: WorkerMetrics, health: Callable[[], WorkerHealth]) -> web.Application:
    async def health_view(_request: web.Request) -> web.Response:
        now = health()
        return web.json_response(now.as_json(), status=200 if now.serving else 503)

    async def metrics_view(_request: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    app = web.Application()
    app.router.add_get("/health", health_view)
    app.router.add_get("/metrics", metrics_view)
    return app
