"""`uac rejudge` on the real broker and ClickHouse engine: refused while workers run; with them
stopped, an alerts topic that disagrees with the current knowledge (an alert an earlier release
never raised, one it raised that the current rules do not find) is brought in line, once, and
the records reach alert consumers, ClickHouse and `uac explain`. The rulebook topic says which
build judged the alerts: a worker starting on an empty pipeline records its own, a worker of a
newer build says what changed and to run `uac rejudge`, which records its own once done.
Checkpoints an earlier build rendered otherwise are still read (`uac state`), named as such by
`uac replay --from-kafka`, and republished by `uac rejudge` in this build's rendering."""

from __future__ import annotations

import asyncio
import hashlib
import json
from datetime import UTC, datetime
from typing import Any
from uuid import NAMESPACE_URL, uuid5

import pytest

from rules.engine import default_rules
from rules.knowledge.bundled import load_bundled_knowledge
from schemas.alerts import Alert, AlertStatus
from schemas.checkpoint import StateCheckpoint
from schemas.codec import checkpoint_codec
from schemas.events import Event
from streams.rebuild import checkpoint_of_subject
from streams.rejudge import publish_alerts, publish_sealed
from streams.rulebook import Rulebook, check_rulebook, record_rulebook, recorded_rulebook
from tests.integration.harness import Pipeline, wait_for
from tests.integration.test_pipeline import expected_alerts, sample_events, wait_for_history

pytestmark = pytest.mark.integration
KNOWLEDGE = load_bundled_knowledge()
TRIGGER = f"knowledge:{KNOWLEDGE.version}"
CURRENT = Rulebook.of(default_rules(KNOWLEDGE), KNOWLEDGE.version)
EARLIER = Rulebook(
    tuple(rule for rule in CURRENT.rules if not rule.startswith("polypharmacy")),
    "uac-bundled-2026.12.1",
)
"""What an earlier release would have recorded: one rule fewer, an older knowledge release."""


def rejudge(pipeline: Pipeline, *args: str) -> tuple[list[Alert], str]:
    result = pipeline.uac("rejudge", "--json", *args)
    assert result.returncode == 0, result.stderr
    return [Alert.model_validate_json(line) for line in result.stdout.splitlines()], result.stderr


def a_stream_an_earlier_release_left(alerts: list[Alert]) -> tuple[Alert, Alert]:
    """(an alert the current rules raised, marked resolved as if never found; an alert the
    current rules do not find, marked raised as if an earlier release had found it)."""
    raised = next(a for a in alerts if a.rule_id == "drug-allergy-conflict")
    at = datetime(2026, 1, 1, tzinfo=UTC)
    never_found = raised.model_copy(
        update={
            "lifecycle_id": uuid5(NAMESPACE_URL, f"uac-test/{raised.alert_id}/resolved"),
            "status": AlertStatus.RESOLVED,
            "occurred_at": at,
        }
    )
    phantom = raised.model_copy(
        update={
            "alert_id": uuid5(NAMESPACE_URL, "uac-test/phantom-alert"),
            "lifecycle_id": uuid5(NAMESPACE_URL, "uac-test/phantom-alert/raised"),
            "cause": ("allergy:earlier-release", "medication:earlier-release"),
        }
    )
    return never_found, phantom


def test_given_a_knowledge_upgrade_then_rejudge_brings_the_alerts_in_line_once(
    pipeline: Pipeline,
) -> None:
    events = sample_events()
    expected = expected_alerts(events)
    worker = pipeline.start("worker")
    pipeline.start("sink")
    pipeline.publish(events)
    alerts = wait_for(pipeline.alerts, lambda found: len(found) >= len(expected))
    wait_for_history(pipeline, events)
    assert _recorded(pipeline) == CURRENT
    running = pipeline.uac("rejudge")
    assert running.returncode == 3
    assert "stop them first" in running.stderr
    worker.stop()
    attempt = wait_for(
        lambda: _attempt(pipeline), lambda outcome: outcome is not None, what="group empty"
    )
    assert attempt is not None
    records, summary = attempt
    assert records == []
    assert "0 raised, 0 resolved" in summary

    never_found, phantom = a_stream_an_earlier_release_left(alerts)
    sealer, topic = pipeline.sealer, pipeline.topics.alerts
    asyncio.run(publish_alerts(pipeline.bootstrap, topic, sealer, [never_found, phantom]))
    asyncio.run(record_rulebook(pipeline.bootstrap, pipeline.topics.rulebook, EARLIER))
    warning = _check(pipeline)
    assert warning is not None
    assert "new polypharmacy v2" in warning
    assert f"knowledge uac-bundled-2026.12.1 -> {KNOWLEDGE.version}" in warning
    assert "uac rejudge" in warning
    dry, _ = rejudge(pipeline, "--dry-run")
    assert _recorded(pipeline) == EARLIER
    records, summary = rejudge(pipeline)
    assert [r.lifecycle_id for r in records] == [r.lifecycle_id for r in dry]
    assert [(r.alert_id, r.status) for r in records] == [
        (never_found.alert_id, AlertStatus.RAISED),
        (phantom.alert_id, AlertStatus.RESOLVED),
    ]
    assert all(r.trigger_event_id == TRIGGER for r in records)
    assert "1 raised, 1 resolved" in summary
    assert (_recorded(pipeline), _check(pipeline)) == (CURRENT, None)
    assert rejudge(pipeline)[0] == []
    on_topic = [a for a in pipeline.alerts() if a.trigger_event_id == TRIGGER]
    assert sorted(a.lifecycle_id for a in on_topic) == sorted(r.lifecycle_id for r in records)

    tenant = never_found.tenant_id
    rows = wait_for(
        lambda: pipeline.clickhouse(
            "SELECT alert_id, status FROM alerts WHERE startsWith(trigger_event_id, 'knowledge:')",
            tenant,
        ),
        lambda found: len(found) == 2,
        what="re-judged alerts in ClickHouse",
    )
    assert sorted((str(r[0]), r[1]) for r in rows) == sorted(
        (str(r.alert_id), r.status.value) for r in records
    )
    explained = pipeline.uac("explain", str(never_found.alert_id), "--tenant", tenant, "--json")
    assert explained.returncode == 0, explained.stderr
    assert TRIGGER in json.dumps(json.loads(explained.stdout))


def _recorded(pipeline: Pipeline) -> Rulebook | None:
    return asyncio.run(recorded_rulebook(pipeline.bootstrap, pipeline.topics.rulebook))


def _check(pipeline: Pipeline) -> str | None:
    """What a worker of this build says when it starts on the pipeline."""
    topics = pipeline.topics
    return asyncio.run(
        check_rulebook(pipeline.bootstrap, topics.rulebook, topics.accepted, CURRENT)
    )


def _attempt(pipeline: Pipeline) -> tuple[list[Alert], str] | None:
    """A dry re-judge once the stopped worker has left its group (None while it has not)."""
    result = pipeline.uac("rejudge", "--json", "--dry-run")
    if result.returncode == 3:
        return None
    assert result.returncode == 0, result.stderr
    return [Alert.model_validate_json(line) for line in result.stdout.splitlines()], result.stderr


def test_given_checkpoints_an_earlier_build_rendered_otherwise_then_they_are_read_and_rejudge_rerenders_them(
    pipeline: Pipeline,
) -> None:
    events = sample_events()
    worker = pipeline.start("worker")
    pipeline.start("sink")
    pipeline.publish(events)
    wait_for_history(pipeline, events)
    agreed = wait_for(
        lambda: _replay(pipeline), lambda report: report["differences"] == [], what="agreement"
    )
    worker.stop()
    allergy = next(e for e in events if e.type.value == "AllergyRecorded")
    key, sealer, topics = allergy.key, pipeline.sealer, pipeline.topics
    current = asyncio.run(checkpoint_of_subject(pipeline.bootstrap, topics.state, key, sealer))
    assert current is not None
    earlier = _as_an_earlier_build_wrote_it(current)
    framed = checkpoint_codec().encode(earlier)
    asyncio.run(publish_sealed(pipeline.bootstrap, topics.state, sealer, [(key, framed)]))
    assert _current_hash(pipeline, allergy, earlier.state_hash) == earlier.state_hash

    shown = pipeline.uac(
        "state", "--tenant", allergy.tenant_id, "--subject", allergy.subject_id, "--json"
    )
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["state_hash"] == current.state_hash
    report = _replay(pipeline)
    assert [(d["key"], d["cause"]) for d in report["differences"]] == [(key, "rendering")]
    assert wait_for(lambda: _attempt(pipeline), lambda o: o is not None, what="group empty")
    _, summary = rejudge(pipeline)
    assert "1 checkpoint(s) re-rendered" in summary
    assert _replay(pipeline) == agreed
    assert "0 checkpoint(s) re-rendered" in rejudge(pipeline)[1]
    assert _current_hash(pipeline, allergy, current.state_hash) == current.state_hash


def _current_hash(pipeline: Pipeline, event: Event, expected: str) -> str | None:
    """The subject's `state_hash` in ClickHouse's `current_state`, once it is `expected`."""
    found: str | None = wait_for(
        lambda: dict(
            pipeline.clickhouse("SELECT subject_id, state_hash FROM current_state", event.tenant_id)
        ).get(event.subject_id),
        lambda found: found == expected,
        what=f"current_state of {event.key} with hash {expected[:12]}",
    )
    return found


def _replay(pipeline: Pipeline) -> dict[str, Any]:
    result = pipeline.uac("replay", "--from-kafka", "--json")
    assert result.returncode in (0, 1), result.stderr
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def _as_an_earlier_build_wrote_it(checkpoint: StateCheckpoint) -> StateCheckpoint:
    """The checkpoint as a build with another state document would have written it: a field
    this build does not render, and its own hash over that document."""
    document = json.loads(checkpoint.state_json)
    document["state"]["travel_summary"] = {"trips": 0}
    encoded = json.dumps(document, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return checkpoint.model_copy(
        update={"state_json": encoded.decode(), "state_hash": hashlib.sha256(encoded).hexdigest()}
    )
