"""The pipeline with a Confluent-compatible schema registry (UAC_SCHEMA_REGISTRY_URL): every
process frames with the server's ids, and the alerts, accepted events and ClickHouse history are
the same as with the committed manifest."""

from __future__ import annotations

import pytest

from schemas.codec import unframe
from schemas.registry import use_registry
from streams.schema_registry import http_registry
from tests.integration.harness import Pipeline, wait_for
from tests.integration.test_pipeline import (
    alert_ids_shown_by_the_cli,
    alert_pairs,
    expected_alerts,
    sample_events,
    wait_for_history,
)
from tests.registry_server import FIRST_ID, registry_server

pytestmark = pytest.mark.integration


def test_given_a_schema_registry_then_every_process_frames_with_its_ids_and_nothing_changes(
    pipeline: Pipeline,
) -> None:
    events = sample_events()
    expected = expected_alerts(events)
    with registry_server() as (url, store):
        pipeline.settings["UAC_SCHEMA_REGISTRY_URL"] = url
        use_registry(http_registry(url, auto_register=True))
        try:
            pipeline.start("worker")
            pipeline.start("sink")
            pipeline.publish(events)
            alerts = wait_for(pipeline.alerts, lambda found: len(found) >= len(expected))
            assert alert_pairs(alerts) == expected
            wait_for_history(pipeline, events)
            framed = pipeline.opened(pipeline.topics.alerts) + pipeline.opened(
                pipeline.topics.accepted
            )
            assert min(unframe(record)[0] for record in framed) >= FIRST_ID
            for tenant in ("clinic-a", "clinic-b"):
                assert alert_ids_shown_by_the_cli(pipeline, tenant) == {
                    str(a.alert_id) for a in alerts if a.tenant_id == tenant
                }
            registered = {r.split()[1] for r in store.requests if r.endswith("/versions")}
            assert {"/subjects/uac.Event/versions", "/subjects/uac.Alert/versions"} <= registered
        finally:
            use_registry(None)
            pipeline.stop_all()
