"""The broker goes away under a running worker and sink, and comes back: both carry on, every
event before and after the outage is processed once, both `/health` endpoints say they wait for
the broker meanwhile, and their logs say so in a few lines instead of thousands
(`streams.log_repeats`). The test has a broker of its own, so stopping it stops no other
test's."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from schemas.events import Event
from streams import local_kafka
from tests.integration.harness import new_pipeline, running, wait_for
from tests.integration.test_pipeline import (
    allergies_then_drugs,
    free_port,
    health_at,
    wait_for_history,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[local_kafka.BrokerInfo]:
    with local_kafka.running_broker(tmp_path / "kafka") as info:
        yield info


def conflicts(tag: str, count: int) -> list[Event]:
    """A penicillin allergy and, a day later, amoxicillin, for `count` patients."""
    allergies, drugs = allergies_then_drugs(count, tag)
    return [*allergies, *drugs]


def test_given_the_broker_down_for_a_while_then_worker_and_sink_carry_on_and_lose_nothing(
    own_broker: local_kafka.BrokerInfo, tmp_path: Path
) -> None:
    before, after = conflicts("before", 10), conflicts("after", 10)
    port, sink_port = free_port(), free_port()
    with running(new_pipeline(own_broker.bootstrap, tmp_path / "pipeline")) as pipeline:
        worker = pipeline.start("worker", env={"UAC_WORKER_METRICS_PORT": str(port)})
        sink = pipeline.start("sink", "--port", str(sink_port))
        pipeline.publish(before)
        wait_for(pipeline.alerts, lambda found: len(found) >= 10, what="alerts before")
        assert (health_at(port)[0], health_at(sink_port)[0]) == (200, 200)
        assert local_kafka.stop(tmp_path / "kafka")
        for service_port in (port, sink_port):
            waiting = wait_for(
                partial(health_at, service_port),
                lambda found: found[0] == 503,
                what=f"the service on port {service_port} waiting",
            )
            assert waiting[1]["status"] == "waiting_for_broker"
        assert (worker.process.poll(), sink.process.poll()) == (None, None)
        restarted, _ = local_kafka.start(tmp_path / "kafka")
        assert restarted.bootstrap == own_broker.bootstrap
        for service_port in (port, sink_port):
            wait_for(
                partial(health_at, service_port), lambda found: found[0] == 200, what="serving"
            )
        pipeline.publish(after)
        alerts = wait_for(
            pipeline.alerts, lambda found: len(found) >= 20, timeout=180, what="alerts after"
        )
        assert sorted(a.subject_id for a in alerts) == sorted(
            {e.subject_id for e in before + after}
        )
        assert len({a.alert_id for a in alerts}) == 20
        wait_for_history(pipeline, before + after)
        for service in (worker, sink):
            log = service.log.read_text(encoding="utf-8").splitlines()
            unreachable = [line for line in log if "Unable connect to node" in line]
            assert 1 <= len(unreachable) <= 3, service.log_tail()
            assert len(log) < 100, service.log_tail()
