"""The streaming pipeline end to end on the real broker: `uac worker` processes published events,
quarantines bad input with reason codes, never duplicates, and survives restarts."""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
import socket
import struct
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from projections.document import event_document
from projections.gate import GateContext
from rules.batch import Submitted, in_processing_order, replay_batch
from rules.engine import default_rules
from rules.knowledge.bundled import load_bundled_knowledge
from schemas.alerts import Alert
from schemas.codec import event_codec, event_record, frame
from schemas.events import Event
from streams import local_kafka
from streams.app import changelog_specs
from streams.event_files import read_ndjson_file
from streams.publisher import wire_bytes
from streams.query_clients import running_sink
from streams.settings import Settings
from streams.tenants import load_gate_policy
from streams.topic_reader import topic_partitions
from streams.topics import STATE_MESSAGE_BYTES, TopicSpec, ensure_topics
from tests.certificates import SessionCertificates
from tests.factories import make_event
from tests.integration.harness import Pipeline, new_pipeline, running, sasl_settings, wait_for
from tests.unit.fhir.test_undated_records import ALLERGY, ORDER

pytestmark = pytest.mark.integration
SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "events.ndjson"


def sample_events() -> list[Event]:
    submitted, errors = read_ndjson_file(SAMPLE)
    assert errors == []
    return [item.event for item in in_processing_order(submitted)]


def expected_alerts(events: list[Event]) -> list[tuple[str, str]]:
    """(alert_id, status) pairs the pure core produces for `events` in this order."""
    policy = load_gate_policy(Settings().tenants_file)
    now = datetime.now(UTC)

    def context(item: Submitted, owners: dict[str, str]) -> GateContext:
        return GateContext(now=now, policy=policy, encoded_size=item.encoded_size)

    batch = [Submitted(str(i), e, len(event_codec().encode(e))) for i, e in enumerate(events)]
    results = replay_batch(batch, context, default_rules(load_bundled_knowledge()))
    return sorted((str(a.alert_id), a.status.value) for r in results.values() for a in r.alerts)


def alert_pairs(alerts: list[Alert]) -> list[tuple[str, str]]:
    return sorted({(str(a.alert_id), a.status.value) for a in alerts})


PURPOSES = {"clinic-a": "care", "clinic-b": "care", "travel-assistant": "personalization"}
"""The purpose the sample records each tenant's events for (queries are purpose-bound)."""


def history(pipeline: Pipeline, tenant: str) -> tuple[int, int, int]:
    """(event rows, distinct event ids, accepted decisions) in ClickHouse for a tenant."""
    rows = pipeline.clickhouse(
        "SELECT (SELECT count() FROM events), (SELECT uniqExact(event_id) FROM events),"
        " (SELECT countIf(outcome = 'accepted') FROM gate_decisions)",
        tenant,
        PURPOSES.get(tenant, "care"),
    )
    return (int(rows[0][0]), int(rows[0][1]), int(rows[0][2])) if rows else (0, 0, 0)


def per_tenant(events: list[Event]) -> Counter[str]:
    return Counter(event.tenant_id for event in events)


def wait_for_history(pipeline: Pipeline, events: list[Event]) -> None:
    """Every event exactly once in ClickHouse, with its accepted decision, per tenant."""
    for tenant, count in per_tenant(events).items():

        def probe(t: str = tenant) -> tuple[int, int, int]:
            return history(pipeline, t)

        def done(h: tuple[int, int, int], c: int = count) -> bool:
            return h[2] >= c

        found = wait_for(probe, done, what=f"{tenant} rows")
        assert found == (count, count, count), tenant


def test_given_events_of_several_tenants_then_every_expected_alert_and_every_event_once_in_clickhouse(
    pipeline: Pipeline,
) -> None:
    events = sample_events()
    expected = expected_alerts(events)
    assert len(expected) >= 5
    assert len(per_tenant(events)) == 3
    pipeline.start("worker", "--loglevel", "info")
    pipeline.start("sink")
    pipeline.publish(events)
    alerts = wait_for(pipeline.alerts, lambda found: len(found) >= len(expected), what="alerts")
    assert alert_pairs(alerts) == expected
    assert len({a.lifecycle_id for a in alerts}) == len(alerts)
    accepted = wait_for(pipeline.accepted, lambda found: len(found) == len(events), what="accepted")
    assert sorted(e.id for e in accepted) == sorted(e.id for e in events)
    wait_for_history(pipeline, events)
    clinic_a = [a for a in alerts if a.tenant_id == "clinic-a"]
    rows = pipeline.clickhouse("SELECT count(), uniqExact(lifecycle_id) FROM alerts", "clinic-a")
    assert [int(v) for v in rows[0]] == [len(clinic_a), len(clinic_a)]
    now = wait_for(
        lambda: active_prescriptions(pipeline, "p-1001"),
        lambda active: active == ["rx-4420", "rx-5501"],
        what="the subject's checkpoint",
    )
    as_of_july = active_prescriptions(pipeline, "p-1001", "--as-of", "2024-07-01")
    assert (now, as_of_july) == (["rx-4420", "rx-5501"], ["rx-4410", "rx-4420"])
    before_refutation = ("--as-of", "2024-10-10")
    as_known_now, as_known_then = (
        wait_for(
            partial(allergy_statuses, pipeline, "clinic-b", "p-1001", *before_refutation, *known),
            lambda statuses: statuses is not None,
            what="the clinic-b subject's checkpoint",
        )
        for known in ((), ("--known-at", "2024-10-10"))
    )
    assert as_known_now == [("alg-amox", "refuted", False)]
    assert as_known_then == [("alg-amox", "unconfirmed", True)]


def active_prescriptions(pipeline: Pipeline, subject: str, *options: str) -> list[str] | None:
    """The prescriptions `uac state` shows active for a clinic-a subject, now or as of a time
    (None while it has no state)."""
    shown = shown_state(pipeline, "clinic-a", subject, *options)
    if shown is None:
        return None
    return sorted(m["prescription_id"] for m in shown["medications"]["active"])


def allergy_statuses(
    pipeline: Pipeline, tenant: str, subject: str, *options: str
) -> list[tuple[str, str, bool]] | None:
    """(allergy id, verification status, active) of each allergy `uac state` shows."""
    shown = shown_state(pipeline, tenant, subject, *options)
    if shown is None:
        return None
    return [(a["allergy_id"], a["verification_status"], a["active"]) for a in shown["allergies"]]


def shown_state(pipeline: Pipeline, tenant: str, subject: str, *options: str) -> Any:
    """The document `uac state --json` prints for a subject (None while it has no state)."""
    shown = pipeline.uac("state", "--tenant", tenant, "--subject", subject, "--json", *options)
    if shown.returncode == 4:
        return None
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def run_sample_through(pipeline: Pipeline) -> None:
    """Start a worker and a sink, publish the sample file with `uac publish` (its events are out
    of order) and check what came out: the alerts replay prints, `uac alerts` reading them all
    (and `--follow` printing them as they come, until Ctrl-C), the history in ClickHouse and no
    consumer group behind."""
    events = sample_events()
    expected = expected_alerts(events)
    pipeline.start("worker")
    pipeline.start("sink")
    published = pipeline.uac("publish", str(SAMPLE))
    assert published.returncode == 0, published.stderr
    follower = pipeline.start("alerts", "--tenant", "clinic-a", "--follow", "--json")
    alerts = wait_for(pipeline.alerts, lambda found: len(found) >= len(expected), what="alerts")
    assert alert_pairs(alerts) == expected
    for tenant in ("clinic-a", "clinic-b"):
        read = pipeline.uac("alerts", "--tenant", tenant, "--json")
        assert read.returncode == 0, read.stderr
        shown = sorted(json.loads(line)["lifecycle_id"] for line in read.stdout.splitlines())
        assert shown == sorted(str(a.lifecycle_id) for a in alerts if a.tenant_id == tenant)
    clinic_a = sorted(str(a.lifecycle_id) for a in alerts if a.tenant_id == "clinic-a")
    followed = wait_for(
        lambda: [line for line in follower.log.read_text().splitlines() if line.startswith("{")],
        lambda lines: len(lines) >= len(clinic_a),
        what="the alerts `uac alerts --follow` printed",
    )
    assert sorted(json.loads(line)["lifecycle_id"] for line in followed) == clinic_a
    assert follower.stop(signal.SIGINT) == 130
    assert "interrupted" in follower.log.read_text().splitlines()
    assert "Traceback" not in follower.log.read_text()
    wait_for_history(pipeline, events)
    wait_for(
        lambda: pipeline.clickhouse(
            "SELECT action, purpose, subject_ref FROM audit_reads WHERE action = 'alerts'",
            "clinic-a",
        ),
        lambda rows: [list(row) for row in rows] == [["alerts", "care", None]],
        what="the read of clinic-a's alerts in audit_reads",
    )
    no_group_behind(pipeline)


@pytest.mark.parametrize(
    ("mechanism", "tls"),
    [("PLAIN", False), ("SCRAM-SHA-256", False), ("SCRAM-SHA-512", False), ("SCRAM-SHA-512", True)],
    ids=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "SASL_SSL-SCRAM-SHA-512"],
)
def test_given_a_broker_that_requires_sasl_then_every_process_authenticates_end_to_end(
    pipeline: Pipeline,
    broker: local_kafka.BrokerInfo,
    broker_ca: SessionCertificates,
    mechanism: str,
    tls: bool,
) -> None:
    """Worker, sink, publisher and readers all connect through a SASL listener (the harness
    only watches, through the plaintext one), with each mechanism, and over TLS trusting the
    session's certificate authority; a wrong password is one line. The sample file lists its
    events out of order: `uac publish` sends them in the order `uac replay --file` folds them,
    so the stream raises exactly the alerts replay prints. Over TLS, a client that does not
    trust the authority is refused with the certificate error, not a traceback."""
    bootstrap = broker.sasl_ssl_bootstrap if tls else broker.sasl_bootstrap
    ca_file = broker_ca.ca_file if tls else None
    assert bootstrap is not None
    pipeline.settings.update(sasl_settings(bootstrap, mechanism=mechanism, ca_file=ca_file))
    run_sample_through(pipeline)
    wrong = sasl_settings(
        bootstrap, password=secrets.token_hex(16), mechanism=mechanism, ca_file=ca_file
    )
    pipeline.settings.update(wrong)
    refused = pipeline.uac("lag")
    assert refused.returncode == 3
    assert "Authentication failed" in refused.stderr
    assert "Traceback" not in refused.stderr
    if tls:
        pipeline.settings.update(sasl_settings(bootstrap, mechanism=mechanism))
        pipeline.settings["UAC_KAFKA_SECURITY_PROTOCOL"] = "SASL_SSL"
        del pipeline.settings["UAC_KAFKA_SSL_CAFILE"]
        untrusted = pipeline.uac("lag")  # the session's authority is not trusted now
        assert untrusted.returncode == 3
        assert "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr
        assert "Traceback" not in untrusted.stderr


def test_given_a_broker_that_admits_clients_by_certificate_then_every_process_presents_one(
    pipeline: Pipeline, broker: local_kafka.BrokerInfo, broker_ca: SessionCertificates
) -> None:
    """Worker, sink, publisher and readers connect through the broker's mutual-TLS listener
    (SSL, no SASL) with the session's client certificate; a client without one, or with a key
    file that does not exist, is refused in one line."""
    assert broker.ssl_bootstrap is not None
    pipeline.settings.update(
        {
            "UAC_KAFKA_BOOTSTRAP": broker.ssl_bootstrap,
            "UAC_KAFKA_SECURITY_PROTOCOL": "SSL",
            "UAC_KAFKA_SSL_CAFILE": str(broker_ca.ca_file),
            "UAC_KAFKA_SSL_CERTFILE": str(broker_ca.client_certificate),
            "UAC_KAFKA_SSL_KEYFILE": str(broker_ca.client_key),
        }
    )
    run_sample_through(pipeline)
    pipeline.settings["UAC_KAFKA_SSL_KEYFILE"] = str(broker_ca.client_key) + ".missing"
    unusable = pipeline.uac("lag")
    assert unusable.returncode == 3
    assert "cannot be used" in unusable.stderr
    assert "Traceback" not in unusable.stderr
    for setting in ("UAC_KAFKA_SSL_CERTFILE", "UAC_KAFKA_SSL_KEYFILE"):
        del pipeline.settings[setting]
    anonymous = pipeline.uac("lag", timeout=180)
    assert anonymous.returncode == 3, anonymous.stdout
    assert "Traceback" not in anonymous.stderr


def _invalid_record_bytes(event: Event) -> bytes:
    """Avro that decodes with the registered schema but breaks the model (confidence 7.5)."""
    import io

    from fastavro import schemaless_writer

    from schemas.registry import bundled_registry

    record = event_record(event) | {"confidence": 7.5}
    body = io.BytesIO()
    latest = bundled_registry().latest("uac.Event")
    schemaless_writer(body, latest.parsed, record)
    return frame(latest.schema_id, body.getvalue())


def test_given_bad_messages_then_quarantine_records_with_reasons_while_valid_events_flow(
    pipeline: Pipeline,
) -> None:
    good = make_event("PreferenceStated", "flows-after-garbage")
    wrong_key = make_event("PreferenceStated", "wrong-key")
    codec = event_codec()
    key = good.key.encode()
    pipeline.start("worker", "--loglevel", "info")
    unsealed = make_event("PreferenceStated", "unsealed")
    pipeline.publish_raw(
        [
            (key, codec.encode(unsealed)),
            (key, b"not avro at all"),
            (key, frame(999, b"\x02\x04")),
            (key, _invalid_record_bytes(make_event("PreferenceStated", "bad-confidence"))),
            (b"clinic-a:somebody-else", codec.encode(wrong_key)),
            (key, struct.pack(">bI", 0, 1) + b"\xff\xff\xff"),
        ]
    )
    pipeline.publish([good])
    pipeline.start("sink")
    decisions = wait_for(pipeline.quarantined, lambda found: len(found) >= 6, what="quarantine")
    reasons = Counter(reason for decision in decisions for reason in decision.reasons)
    assert reasons == Counter(
        {
            "bad_framing": 1,
            "unknown_schema_id": 1,
            "invalid_record": 1,
            "key_mismatch": 1,
            "malformed_avro": 1,
            "not_sealed": 1,
        }
    )
    assert all(d.source_topic == pipeline.topics.events and d.message_sha256 for d in decisions)
    assert all("7.5" not in d.detail for d in decisions)
    accepted = wait_for(pipeline.accepted, lambda found: len(found) == 1, what="the valid event")
    assert [e.id for e in accepted] == [good.id]
    every_event_decided(pipeline, 7)
    recorded = wait_for(
        lambda: pipeline.clickhouse(
            "SELECT outcome, reasons FROM gate_decisions ORDER BY outcome", "clinic-a"
        ),
        lambda rows: len(rows) >= 7,
        what="decisions in ClickHouse",
    )
    assert sorted(r[1][0] for r in recorded if r[0] == "rejected") == sorted(reasons)
    assert [r for r in recorded if r[0] == "accepted"] == [["accepted", []]]


def test_given_the_same_events_published_twice_then_no_duplicates_anywhere(
    pipeline: Pipeline,
) -> None:
    events = sample_events()
    pipeline.start("worker", "--loglevel", "info")
    pipeline.start("sink")
    pipeline.publish(events)
    expected = expected_alerts(events)
    first_alerts = wait_for(pipeline.alerts, lambda f: len(f) >= len(expected), what="alerts")
    wait_for_history(pipeline, events)
    pipeline.publish(events)
    duplicates = wait_for(pipeline.quarantined, lambda f: len(f) >= len(events), what="duplicates")
    assert Counter(r for d in duplicates for r in d.reasons) == Counter(
        {"duplicate_event_id": len(events)}
    )
    assert len(pipeline.accepted()) == len(events)
    assert sorted(a.lifecycle_id for a in pipeline.alerts()) == sorted(
        a.lifecycle_id for a in first_alerts
    )
    clinic_a = per_tenant(events)["clinic-a"]
    wait_for(
        lambda: pipeline.clickhouse(
            "SELECT count() FROM gate_decisions WHERE outcome = 'rejected'", "clinic-a"
        ),
        lambda rows: bool(rows) and int(rows[0][0]) == clinic_a,
        what="the duplicate decisions in ClickHouse",
    )
    wait_for_history(pipeline, events)


def test_given_fhir_records_without_a_time_published_twice_then_one_alert_and_only_duplicates(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    """`uac publish --format fhir` through the broker: an allergy and an order with no time of
    their own raise one critical alert; publishing the same files again later (with `--json`,
    one line per record: each event sent where it went, the unsupported resource skipped)
    sends the same events (dated when their files were written), which the gate drops as
    duplicates."""
    paths = []
    unsupported = {"resourceType": "Observation", "id": "obs-1", "status": "final"}
    for name, resource in (
        ("allergy.json", ALLERGY),
        ("order.json", ORDER),
        ("obs.json", unsupported),
    ):
        path = tmp_path / name
        path.write_text(json.dumps(resource), encoding="utf-8")
        paths.append(str(path))
    pipeline.start("worker", "--loglevel", "info")
    first = pipeline.uac("publish", "--format", "fhir", *paths)
    assert first.returncode == 0, first.stderr
    assert "skipped 1 resource(s): unsupported resource type Observation" in first.stderr
    (alert,) = wait_for(pipeline.alerts, lambda found: len(found) >= 1, what="the alert")
    assert (alert.subject_id, alert.severity.value) == ("p-undated", "critical")
    again = pipeline.uac("publish", "--format", "fhir", "--json", *paths)
    assert again.returncode == 0, again.stderr
    records = [json.loads(line) for line in again.stdout.splitlines()]
    assert [(r["result"], r.get("resource")) for r in records] == [
        ("skipped", "Observation/obs-1"),
        ("sent", None),
        ("sent", None),
    ]
    assert {r["event_id"] for r in records[1:]} == {str(e.event_id) for e in pipeline.accepted()}
    assert all(r["partition"] >= 0 and r["offset"] >= 0 for r in records[1:])
    repeats = wait_for(pipeline.quarantined, lambda found: len(found) >= 2, what="the repeats")
    assert Counter(r for d in repeats for r in d.reasons) == Counter({"duplicate_event_id": 2})
    assert len(pipeline.accepted()) == 2
    assert [a.lifecycle_id for a in pipeline.alerts()] == [alert.lifecycle_id]


def allergies_then_drugs(count: int, tag: str = "restart") -> tuple[list[Event], list[Event]]:
    """Allergies of `count` patients, then a conflicting drug for each (needs the state)."""
    allergies = [
        make_event(
            "AllergyRecorded",
            f"{tag}-allergy-{n}",
            subject=f"{tag}-{n}",
            payload={"substance": "penicillin"},
        )
        for n in range(count)
    ]
    drugs = [
        make_event(
            "MedicationPrescribed",
            f"{tag}-rx-{n}",
            subject=f"{tag}-{n}",
            at=timedelta(days=1),
            payload={"drug": "amoxicillin 500 mg capsule", "prescription_id": f"rx-{n}"},
        )
        for n in range(count)
    ]
    return allergies, drugs


def wait_for_an_alert_per_subject(
    pipeline: Pipeline, drugs: list[Event], timeout: float = 90.0
) -> None:
    wanted = {e.subject_id for e in drugs}
    wait_for(
        lambda: wanted - {a.subject_id for a in pipeline.alerts()},
        lambda missing: not missing,
        timeout=timeout,
        what="an alert for every subject (showing the subjects still without one)",
    )


def wait_for_every_event_accepted(pipeline: Pipeline, events: list[Event]) -> None:
    """Every event once on the accepted topic (a redelivered copy counts once), none other."""
    ids = {e.id for e in events}
    accepted = wait_for(
        pipeline.accepted, lambda f: len({e.id for e in f}) == len(ids), what="every event accepted"
    )
    assert {e.id for e in accepted} == ids


@pytest.mark.parametrize(
    "stop_signal", [signal.SIGTERM, signal.SIGKILL], ids=["graceful-stop", "hard-kill"]
)
def test_given_a_worker_restart_mid_stream_then_state_is_recovered_and_nothing_is_lost_or_doubled(
    pipeline: Pipeline, stop_signal: int
) -> None:
    allergies, drugs = allergies_then_drugs(40)
    pipeline.start("sink")
    worker = pipeline.start("worker", "--loglevel", "info")
    pipeline.publish(allergies)
    wait_for(
        pipeline.accepted,
        lambda found: len(found) >= len(allergies) // 2,
        what="half of the allergies",
    )
    worker.stop(stop_signal)
    pipeline.publish(drugs)
    workers_behind_by_the_events_published_meanwhile(pipeline, len(drugs))
    port = free_port()
    pipeline.start("worker", "--loglevel", "info", env={"UAC_WORKER_METRICS_PORT": str(port)})
    wait_for_an_alert_per_subject(pipeline, drugs, timeout=120)
    raised = [a for a in pipeline.alerts() if a.status.value == "raised"]
    assert {a.subject_id for a in raised} == {e.subject_id for e in drugs}
    assert len({a.lifecycle_id for a in raised}) == len(drugs)
    wait_for_every_event_accepted(pipeline, allergies + drugs)
    replay_matches_the_checkpoints(pipeline, subjects=40)
    every_event_decided(pipeline, len(allergies + drugs))
    wait_for_history(pipeline, allergies + drugs)
    no_group_behind(pipeline)
    serving_every_partition_with_nothing_left(port, pipeline.partitions)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def health_at(port: int) -> tuple[int | None, Any]:
    """Status and body of `GET /health` on a worker's or sink's port (None: no answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as refused:
        return refused.code, json.load(refused)
    except OSError as error:
        return None, repr(error)


def serving_every_partition_with_nothing_left(port: int, partitions: int) -> None:
    """The restarted worker's `/health`: serving (200), owning every events partition, none of
    them with a record still to process."""
    _, health = wait_for(
        lambda: health_at(port),
        lambda found: (
            found[0] == 200 and bool(found[1]["lag"]) and not any(found[1]["lag"].values())
        ),
        what="the worker serving with no lag",
    )
    assert health["status"] == "running"
    assert health["assigned"] == list(range(partitions))


def lag_by_group(pipeline: Pipeline) -> dict[str, Any]:
    result = pipeline.uac("lag", "--json")
    assert result.returncode == 0, result.stderr
    return {group["group"]: group for group in json.loads(result.stdout)["groups"]}


def workers_behind_by_the_events_published_meanwhile(pipeline: Pipeline, published: int) -> None:
    """`uac lag` while the worker is stopped: its group is behind on the events topic by at
    least the events published since (more where the stopped worker had not committed), and
    `--max-lag` below that exits 1."""
    workers = lag_by_group(pipeline)[pipeline.app_id]
    assert {p["topic"] for p in workers["partitions"]} == {pipeline.topics.events}
    assert workers["lag"] >= published
    assert workers["lag"] == sum(p["end"] - (p["committed"] or 0) for p in workers["partitions"])
    assert pipeline.uac("lag", "--max-lag", str(workers["lag"] - 1)).returncode == 1


def no_group_behind(pipeline: Pipeline) -> None:
    """Once everything is processed and written: neither the workers' group nor the sink's
    (on every topic it consumes) is behind, and the restarted worker is the one member."""
    groups = wait_for(
        lambda: lag_by_group(pipeline),
        lambda found: all(group["lag"] == 0 for group in found.values()),
        what="both consumer groups caught up",
    )
    assert groups[pipeline.app_id]["members"] == 1
    sink = groups[f"{pipeline.app_id}-sink"]
    assert {p["topic"] for p in sink["partitions"]} == set(pipeline.topics.sink_inputs)
    assert pipeline.uac("lag", "--max-lag", "0").returncode == 0


def replay_matches_the_checkpoints(pipeline: Pipeline, subjects: int) -> None:
    """`uac replay --from-kafka` rebuilds every subject as its latest checkpoint has it, once
    the checkpoint timer has published the last changes (it runs every second, so a subject
    changed just before may still differ on a first try)."""
    result = wait_for(
        lambda: pipeline.uac("replay", "--from-kafka", "--json"),
        lambda result: result.returncode == 0,
        what="a replay from Kafka without differences",
    )
    assert json.loads(result.stdout) == {"subjects": subjects, "differences": []}


def every_event_decided(pipeline: Pipeline, count: int) -> None:
    """`uac check-log`: once the worker group has committed past all `count` events, each has a
    gate decision (accepted or quarantined)."""

    def check() -> Any:
        result = pipeline.uac("check-log", "--json")
        return json.loads(result.stdout) if result.returncode in (0, 1) else result.stderr

    report = wait_for(
        check,
        lambda r: isinstance(r, dict) and sum(r["events_below_committed"].values()) == count,
        what="the worker group's commit past every event",
    )
    assert report["undecided"] == []


def test_given_two_workers_and_one_killed_mid_stream_then_the_other_takes_over_and_loses_nothing(
    pipeline: Pipeline,
) -> None:
    allergies, drugs = allergies_then_drugs(40)
    pipeline.start("sink")
    first = pipeline.start("worker", "--loglevel", "info")
    pipeline.start("worker", "--loglevel", "info")
    pipeline.publish(allergies)
    wait_for(
        pipeline.accepted,
        lambda found: len(found) >= len(allergies) // 2,
        what="half of the allergies",
    )
    first.stop(signal.SIGKILL)
    pipeline.publish(drugs)
    wait_for_an_alert_per_subject(pipeline, drugs, timeout=150)
    raised = [a for a in pipeline.alerts() if a.status.value == "raised"]
    assert len({a.lifecycle_id for a in raised}) == len(drugs)
    wait_for_every_event_accepted(pipeline, allergies + drugs)
    replay_matches_the_checkpoints(pipeline, subjects=40)
    every_event_decided(pipeline, len(allergies + drugs))


@pytest.mark.parametrize(
    "command", [("check-log",), ("lag",), ("publish", str(SAMPLE))], ids=lambda c: c[0]
)
def test_given_no_pipeline_yet_then_commands_say_the_topic_is_missing(
    pipeline: Pipeline, command: tuple[str, ...]
) -> None:
    pipeline.settings["UAC_TOPIC_WAIT_SECONDS"] = "1"
    result = pipeline.uac(*command)
    assert result.returncode == 3
    assert f"topic {pipeline.topics.events} does not exist" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "command",
    [("state",), ("export", "--out")],
    ids=lambda c: c[0],
)
def test_given_no_pipeline_yet_then_subject_reads_say_it_is_not_set_up(
    pipeline: Pipeline, command: tuple[str, ...], tmp_path: Path
) -> None:
    """A read of one subject's state went to the partition its key maps to without asking
    whether the topic exists, and waited for metadata until it failed with a traceback. The
    first topic such a read needs is the erasure ledger (read before any record is opened)."""
    where = (str(tmp_path / "export"),) if command[-1] == "--out" else ()
    result = pipeline.uac(*command, *where, "--tenant", "clinic-a", "--subject", "p-1001")
    assert result.returncode == 3
    missing = f"topic {pipeline.topics.erasures} does not exist: the pipeline is not set up"
    assert missing in result.stderr
    assert "Traceback" not in result.stderr


def test_given_a_sink_running_then_a_second_one_on_the_same_home_says_so_in_one_line(
    pipeline: Pipeline,
) -> None:
    first = pipeline.start("sink")
    wait_for(lambda: running_sink(pipeline.home), lambda found: found is not None, what="sink")
    second = pipeline.uac("sink")
    assert second.returncode == 3
    assert f"sink pid {first.process.pid} already runs for {pipeline.home}" in second.stderr
    assert "Traceback" not in second.stderr
    assert first.process.poll() is None


def commit_past_everything(pipeline: Pipeline) -> None:
    """Commit the worker group's offsets at the end of the events topic, as Faust does when it
    acknowledges records it skipped during a rebalance (`streams.continuity`)."""

    async def commit() -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=pipeline.bootstrap, group_id=pipeline.app_id, enable_auto_commit=False
        )
        await consumer.start()
        try:
            partitions = await topic_partitions(pipeline.bootstrap, pipeline.topics.events)
            assigned = [TopicPartition(pipeline.topics.events, p) for p in partitions]
            consumer.assign(assigned)
            await consumer.commit(await consumer.end_offsets(assigned))
        finally:
            await consumer.stop()

    asyncio.run(commit())


@pytest.mark.parametrize("then", ["more-events", "end-of-log"])
def test_given_offsets_committed_past_unprocessed_events_then_the_worker_reads_them_from_the_log(
    pipeline: Pipeline, then: str
) -> None:
    allergies, drugs = allergies_then_drugs(16)
    passed_over, later = (drugs[:8], drugs[8:]) if then == "more-events" else (drugs, [])
    pipeline.start("sink")
    worker = pipeline.start("worker", "--loglevel", "info")
    pipeline.publish(allergies)
    wait_for(pipeline.accepted, lambda f: len(f) == len(allergies), what="every allergy")
    worker.stop(signal.SIGTERM)
    pipeline.publish(passed_over)
    commit_past_everything(pipeline)
    pipeline.publish(later)
    pipeline.start("worker", "--loglevel", "info")
    wait_for_an_alert_per_subject(pipeline, drugs, timeout=120)
    wait_for_every_event_accepted(pipeline, allergies + drugs)
    every_event_decided(pipeline, len(allergies + drugs))
    wait_for_history(pipeline, allergies + drugs)


def publish_in_transactions(pipeline: Pipeline, events: list[Event], per_transaction: int) -> None:
    """Publish as a transactional producer does: every commit leaves a marker, an offset that
    holds no record, behind each transaction's events."""
    codec, sealer = event_codec(), pipeline.sealer

    async def send() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=pipeline.bootstrap, transactional_id=f"{pipeline.app_id}-producer"
        )
        await producer.start()
        try:
            for start in range(0, len(events), per_transaction):
                async with producer.transaction():
                    for event in events[start : start + per_transaction]:
                        value = wire_bytes(codec, sealer, event)
                        await producer.send(pipeline.topics.events, value, key=event.key.encode())
        finally:
            await producer.stop()

    asyncio.run(send())


def test_given_a_transactional_producer_then_its_commit_markers_lose_and_stall_nothing(
    pipeline: Pipeline,
) -> None:
    allergies, drugs = allergies_then_drugs(12)
    pipeline.start("sink")
    pipeline.start("worker", "--loglevel", "info")
    publish_in_transactions(pipeline, allergies + drugs, per_transaction=5)
    wait_for_an_alert_per_subject(pipeline, drugs)
    wait_for_every_event_accepted(pipeline, allergies + drugs)
    assert pipeline.quarantined() == []
    wait_for_history(pipeline, allergies + drugs)


CLAIM_RULES = frozenset({"drug-allergy-conflict", "duplicate-therapy"})
"""Rules whose alerts are caused by allergy or prescription claims (a preference conflict or a
polypharmacy episode implicates no FHIR resource)."""


def alert_ids_shown_by_the_cli(pipeline: Pipeline, tenant: str = "clinic-a") -> set[str]:
    """`uac alerts --json` and `--format fhir` (DetectedIssue ids are alert ids) agree, and
    show the tenant's alerts only, each naming its claims by the tenant and subject."""
    as_json = pipeline.uac("alerts", "--tenant", tenant, "--json")
    assert as_json.returncode == 0, as_json.stderr
    shown = {json.loads(line)["alert_id"] for line in as_json.stdout.splitlines()}
    as_fhir = pipeline.uac("alerts", "--tenant", tenant, "--format", "fhir")
    assert as_fhir.returncode == 0, as_fhir.stderr
    bundle = json.loads(as_fhir.stdout)
    resources = [entry["resource"] for entry in bundle["entry"]]
    assert {r["resourceType"] for r in resources} <= {"DetectedIssue"}
    assert {r["meta"]["tag"][0]["code"] for r in resources} <= {tenant}
    assert {r["id"] for r in resources} == shown
    for resource in resources:
        subject = resource["patient"]["identifier"]["value"]
        claims = [
            *resource.get("implicated", []),
            *(d for e in resource.get("evidence", []) for d in e["detail"] if "type" in d),
        ]
        rule = resource["author"]["display"].split()[2]
        assert claims or rule not in CLAIM_RULES, resource
        assert {c["identifier"]["system"].rsplit(":", 1)[0] for c in claims} <= {
            f"urn:uac:tenant:{tenant}:subject:{subject}"
        }
        assert not [c for c in claims if "reference" in c]
    return shown


def conflict_in_order(drug_first: bool) -> list[Event]:
    """The same allergy and the same prescription (same claim ids), learned in either order,
    after a "no known drug allergies" statement the allergy contradicts."""
    name = "drug-first" if drug_first else "allergy-first"
    statement = make_event(
        "AllergyRecorded",
        f"{name}-nkda",
        subject="order",
        at=-timedelta(days=1),
        payload={"allergy_id": "nkda", "substance": "NKDA", "negated": True},
    )
    allergy_at, drug_at = (
        (timedelta(days=1), timedelta(0)) if drug_first else (timedelta(0), timedelta(days=1))
    )
    allergy = make_event(
        "AllergyRecorded",
        f"{name}-allergy",
        subject="order",
        at=allergy_at,
        payload={"substance": "Penicillin G"},
    )
    drug = make_event(
        "MedicationPrescribed",
        f"{name}-rx",
        subject="order",
        at=drug_at,
        payload={"drug": "Zosyn 4.5 g (piperacillin/tazobactam)", "prescription_id": "rx-zosyn"},
    )
    return [statement, *([drug, allergy] if drug_first else [allergy, drug])]


def test_given_the_same_conflict_in_either_order_then_the_same_alert_id_in_the_stream_and_in_replay(
    pipeline: Pipeline, broker: Any, tmp_path: Path
) -> None:
    other = new_pipeline(broker.bootstrap, tmp_path / "other-order")
    with running(other):
        for target, drug_first in ((pipeline, False), (other, True)):
            target.start("worker", "--loglevel", "info")
            target.publish(conflict_in_order(drug_first))
        streamed = {
            (str(a.alert_id), a.severity.value)
            for target in (pipeline, other)
            for a in wait_for(
                target.alerts, lambda found: len(found) >= 2, what="the two conflict alerts"
            )
        }
    assert sorted(severity for _, severity in streamed) == ["critical", "warning"]
    assert alert_ids_shown_by_the_cli(pipeline) == {alert_id for alert_id, _ in streamed}
    for drug_first in (False, True):
        events_file = tmp_path / f"drug-first-{drug_first}.ndjson"
        lines = (json.dumps(event_document(e)) + "\n" for e in conflict_in_order(drug_first))
        events_file.write_text("".join(lines), encoding="utf-8")
        replayed = pipeline.uac("replay", "--file", str(events_file), "--json")
        assert replayed.returncode == 0, replayed.stderr
        (subject,) = [json.loads(line) for line in replayed.stdout.splitlines()]
        assert {(a["alert_id"], a["severity"]) for a in subject["alerts"]} == streamed


def acknowledged_then_regraded(alert_id: str) -> list[Event]:
    """An acceptance of the intolerance's warning, then the intolerance recorded as an allergy,
    then an override of the critical it became."""
    decisions = [("ack-accept", 2, "accepted", "seen"), ("ack-override", 4, "overridden", "tested")]
    accept, override = (
        make_event(
            "AlertAcknowledged",
            name,
            subject="ack",
            at=timedelta(days=day),
            payload={"alert_id": alert_id, "action": action, "reason": reason},
        )
        for name, day, action, reason in decisions
    )
    graver = make_event(
        "AllergyRecorded",
        "ack-allergy",
        subject="ack",
        at=timedelta(days=3),
        payload={"allergy_id": "pcn", "substance": "penicillin", "allergy_type": "allergy"},
    )
    return [accept, graver, override]


def test_given_an_accepted_warning_graded_critical_then_the_stream_raises_it_until_overridden(
    pipeline: Pipeline,
) -> None:
    intolerance = make_event(
        "AllergyRecorded",
        "ack-intolerance",
        subject="ack",
        payload={"allergy_id": "pcn", "substance": "penicillin", "allergy_type": "intolerance"},
    )
    order = make_event(
        "MedicationPrescribed",
        "ack-rx",
        subject="ack",
        at=timedelta(days=1),
        payload={"prescription_id": "rx-amox", "drug": "amoxicillin"},
    )
    pipeline.start("worker", "--loglevel", "info")
    pipeline.start("sink")
    pipeline.publish([intolerance, order])
    (raised,) = wait_for(pipeline.alerts, lambda found: len(found) >= 1, what="the warning")
    pipeline.publish(acknowledged_then_regraded(str(raised.alert_id)))
    alerts = wait_for(pipeline.alerts, lambda found: len(found) >= 4, what="four records")
    expected = [
        ("raised", "warning"),
        ("acknowledged", "warning"),
        ("raised", "critical"),
        ("overridden", "critical"),
    ]
    assert [(a.status.value, a.severity.value) for a in alerts] == expected
    assert "it needs a new acknowledgement" in str(alerts[2].reason)
    assert {a.alert_id for a in alerts} == {raised.alert_id}
    rows = wait_for(
        lambda: pipeline.clickhouse(
            "SELECT status, severity FROM alerts ORDER BY occurred_at, status", "clinic-a"
        ),
        lambda found: len(found) >= 4,
        what="the alert records in ClickHouse",
    )
    assert sorted(tuple(row) for row in rows) == sorted(expected)


def long_history(count: int, text_bytes: int) -> list[Event]:
    """One subject's many facts, together larger than a default Kafka message (1 MB)."""
    return [
        make_event(
            "FactAsserted",
            f"long-{n}",
            subject="long-history",
            at=timedelta(minutes=n),
            payload={"key": f"note-{n}", "value": f"observation {n} " + "x" * text_bytes},
        )
        for n in range(count)
    ]


def test_given_a_subject_whose_history_outgrows_a_kafka_message_then_it_is_still_kept_and_recovered(
    pipeline: Pipeline,
) -> None:
    events = long_history(700, 2_000)
    assert sum(len(event_codec().encode(e)) for e in events) > 1_200_000
    worker = pipeline.start("worker", "--loglevel", "info")
    pipeline.publish(events)
    wait_for(pipeline.accepted, lambda found: len(found) == len(events), what="every event")
    worker.stop()
    pipeline.start("worker", "--loglevel", "info")
    shown = wait_for(
        lambda: pipeline.uac(
            "state", "--tenant", "clinic-a", "--subject", "long-history", "--json"
        ),
        lambda result: (
            result.returncode == 0 and len(json.loads(result.stdout)["facts"]) == len(events)
        ),
        what="the whole history in the checkpoint",
    )
    assert json.loads(shown.stdout)["version"] == len(events)
    result = pipeline.uac("replay", "--from-kafka", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout) == {"subjects": 1, "differences": []}
    erased = pipeline.uac("erase", "--tenant", "clinic-a", "--subject", "long-history")
    assert erased.returncode == 0, erased.stderr
    wait_for(
        lambda: pipeline.uac("state", "--tenant", "clinic-a", "--subject", "long-history"),
        lambda result: result.returncode == 4,
        what="the erased subject gone from the state topic",
    )
    assert not pipeline.opened(f"{pipeline.app_id}-user-state-changelog")


def test_given_topics_made_for_another_configuration_then_the_worker_stops_and_names_them(
    pipeline: Pipeline,
) -> None:
    """Existing topics with other partition counts than UAC_PARTITIONS: the worker stops at
    start with one line naming each topic and what it needs (exit 3), never a crash loop."""
    asyncio.run(ensure_topics(pipeline.bootstrap, pipeline.topics.specs()))
    pipeline.settings["UAC_PARTITIONS"] = str(pipeline.partitions + 2)
    refused = pipeline.uac("worker", timeout=120)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    needed = f"has {pipeline.partitions} partitions, UaC needs {pipeline.partitions + 2}"
    assert f"{pipeline.topics.events} {needed}" in refused.stderr
    assert "Traceback" not in refused.stderr


async def create_topics(bootstrap: str, specs: tuple[TopicSpec, ...]) -> None:
    """Create topics as an administrator would, with exactly `specs`' configs (no check)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(s.name, s.partitions, 1, topic_configs=s.configs) for s in specs]
        )
    finally:
        await admin.close()


def test_given_topics_that_would_delete_or_refuse_what_uac_writes_then_both_processes_stop(
    pipeline: Pipeline,
) -> None:
    """Pre-created topics that would lose records (the accepted events deleted after a minute)
    or refuse them (a state topic that takes 1,000-byte records, below a checkpoint): the
    worker and the sink stop at start with one line naming topic, config, found and needed
    values (exit 3), instead of running and losing them."""
    changed = {
        pipeline.topics.accepted: {"retention.ms": "60000"},
        pipeline.topics.state: {"max.message.bytes": "1000"},
    }
    specs = pipeline.topics.specs() + changelog_specs(pipeline.app_id, pipeline.partitions)
    asyncio.run(
        create_topics(
            pipeline.bootstrap,
            tuple(replace(s, configs=s.configs | changed.get(s.name, {})) for s in specs),
        )
    )
    for process in ("worker", "sink"):
        refused = pipeline.uac(process, timeout=120)
        assert refused.returncode == 3, refused.stdout + refused.stderr
        assert f"{pipeline.topics.accepted} has retention.ms=60000, UaC needs -1" in (
            refused.stderr
        )
        needed = f"has max.message.bytes=1000, UaC needs at least {STATE_MESSAGE_BYTES}"
        assert f"{pipeline.topics.state} {needed}" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "Traceback" not in refused.stderr


def test_given_more_copies_than_the_cluster_holds_then_the_worker_stops_and_says_why(
    pipeline: Pipeline,
) -> None:
    """UAC_TOPIC_REPLICATION_FACTOR beyond the one-broker cluster: missing topics are refused
    by the broker, existing ones with fewer copies by the start-up check; each is one line and
    exit 3. Unset, the same cluster gets one copy and no complaint."""
    pipeline.settings["UAC_TOPIC_REPLICATION_FACTOR"] = "2"
    refused = pipeline.uac("worker", timeout=120)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert f"{pipeline.topics.events} (4 partitions; " in refused.stderr
    assert "InvalidReplicationFactorError" in refused.stderr
    specs = pipeline.topics.specs() + changelog_specs(pipeline.app_id, pipeline.partitions)
    created = asyncio.run(ensure_topics(pipeline.bootstrap, specs))
    assert pipeline.topics.events in created
    refused = pipeline.uac("worker", timeout=120)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    needed = "has replication factor 1, UaC needs 2"
    assert f"{pipeline.topics.events} {needed}" in refused.stderr
    assert "Traceback" not in refused.stderr
