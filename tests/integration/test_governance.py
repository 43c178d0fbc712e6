"""Erasure reaches every copy and survives replays, re-sends and restarts; export and
purpose-bound reads on the real pipeline.

A subject with canary values (an e-mail address in a note, an API-key-like string the gate
refuses) is erased; afterwards no system reader returns anything about it, no Kafka copy opens,
no ClickHouse table holds a row of it even with `apply_deleted_mask=0`, the canaries appear in
no topic, table or log in clear (except, on the events topic, the plaintext copies this test
itself re-sends afterwards as a careless producer would: refused, never stored), and other
subjects (including the same subject id in another tenant) are untouched.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from schemas.codec import event_codec
from schemas.erasures import subject_ref
from schemas.events import Event
from streams.clickhouse import connect
from streams.keys import FileKeyStore
from streams.settings import Settings
from tests.factories import make_event
from tests.integration.harness import Pipeline, wait_for

pytestmark = pytest.mark.integration
EMAIL = "victim.canary@example.org"
API_KEY = "sk-live-CANARY0123456789abcdef"
VICTIM, BYSTANDER = "victim", "bystander"


def subject_events(tenant: str, subject: str, marker: str) -> list[Event]:
    return [
        make_event(
            "PreferenceStated",
            f"{tenant}-{subject}-contact",
            tenant=tenant,
            subject=subject,
            payload={"key": "contact", "value": "email", "note": f"reach me at {marker}"},
        ),
        make_event(
            "AllergyRecorded",
            f"{tenant}-{subject}-allergy",
            tenant=tenant,
            subject=subject,
            at=timedelta(hours=1),
        ),
        make_event(
            "MedicationPrescribed",
            f"{tenant}-{subject}-rx",
            tenant=tenant,
            subject=subject,
            at=timedelta(hours=2),
            payload={"drug": "amoxicillin 500 mg", "prescription_id": f"rx-{subject}"},
        ),
    ]


def refused_secret(tenant: str, subject: str) -> Event:
    return make_event(
        "PreferenceStated",
        f"{tenant}-{subject}-secret",
        tenant=tenant,
        subject=subject,
        at=timedelta(hours=3),
        payload={"key": "portal", "value": "on", "note": f"api key {API_KEY}"},
    )


def victim_events() -> list[Event]:
    return subject_events("clinic-a", VICTIM, EMAIL)


def others() -> list[Event]:
    return subject_events("clinic-a", BYSTANDER, "bystander@example.org") + subject_events(
        "clinic-b", VICTIM, "same-id-other-tenant@example.org"
    )


def storage_rows(pipeline: Pipeline) -> dict[str, list[Sequence[Any]]]:
    """Every row of every UaC table, deleted-but-masked rows included (the sink must be stopped)."""
    settings = Settings(home=pipeline.home)
    client = connect(settings)
    try:
        tables = [
            row[0]
            for row in client.query(
                "SELECT name FROM system.tables WHERE database = 'uac'"
            ).result_rows
        ]
        return {
            table: list(
                client.query(
                    f"SELECT * FROM uac.{table} SETTINGS apply_deleted_mask = 0"  # noqa: S608
                ).result_rows
            )
            for table in tables
        }
    finally:
        client.close()


KEEP_SUBJECT_REF = {"erasures", "audit_reads"}
"""Receipts and the audit trail name subjects only by subject_ref, by design kept after erasure."""


def victim_rows(rows: dict[str, list[Sequence[Any]]]) -> dict[str, int]:
    ref = subject_ref("clinic-a", VICTIM)
    found = {}
    for table, table_rows in rows.items():
        hits = [row for row in table_rows if _mentions_victim(row, ref, table in KEEP_SUBJECT_REF)]
        if hits:
            found[table] = len(hits)
    return found


def _mentions_victim(row: Sequence[Any], ref: str, ref_allowed: bool) -> bool:
    text = " ".join(str(value) for value in row)
    by_id = "clinic-a" in row and VICTIM in row
    by_ref = ref in text and not ref_allowed
    return by_id or by_ref or EMAIL in text or API_KEY in text


def raw_topic_bytes(pipeline: Pipeline, skip: frozenset[str] = frozenset()) -> bytes:
    every = [
        *(spec.name for spec in pipeline.topics.specs()),
        f"{pipeline.app_id}-user-state-changelog",
    ]
    topics = [topic for topic in every if topic not in skip]
    chunks = []
    for topic in topics:
        for record in pipeline.read(topic):
            chunks += [
                record.key or b"",
                record.value or b"",
                *(value for _, value in record.headers),
            ]
    return b"\n".join(chunks)


def wait_until_settled(pipeline: Pipeline, events: list[Event]) -> None:
    wait_for(
        pipeline.accepted,
        lambda found: {e.id for e in events} <= {e.id for e in found},
        what="every event accepted",
    )


def erase_victim(pipeline: Pipeline) -> None:
    result = pipeline.uac(
        "erase", "--tenant", "clinic-a", "--subject", VICTIM, "--reason", "GDPR art. 17"
    )
    assert result.returncode == 0, result.stderr
    wait_for(
        lambda: pipeline.clickhouse("SELECT count() FROM erasures", "clinic-a"),
        lambda rows: bool(rows) and int(rows[0][0]) == 1,
        what="the erasure receipt",
    )


def assert_no_trace(pipeline: Pipeline, skip: frozenset[str] = frozenset()) -> None:
    assert not [e for e in pipeline.accepted() if e.key == f"clinic-a:{VICTIM}"]
    assert not [
        a for a in pipeline.alerts() if a.subject_id == VICTIM and a.tenant_id == "clinic-a"
    ]
    assert pipeline.uac("state", "--tenant", "clinic-a", "--subject", VICTIM).returncode == 4
    everything = raw_topic_bytes(pipeline, skip)
    assert EMAIL.encode() not in everything
    assert API_KEY.encode() not in everything
    for log in pipeline.home.glob("*.log"):
        text = log.read_text(encoding="utf-8", errors="replace")
        assert EMAIL not in text
        assert API_KEY not in text


def assert_others_untouched(pipeline: Pipeline) -> None:
    for tenant, subject in (("clinic-a", BYSTANDER), ("clinic-b", VICTIM)):
        shown = pipeline.uac("state", "--tenant", tenant, "--subject", subject, "--json")
        assert shown.returncode == 0, shown.stderr
        assert len(json.loads(shown.stdout)["allergies"]) == 1
    raised = {(a.tenant_id, a.subject_id) for a in pipeline.alerts() if a.status.value == "raised"}
    assert raised == {("clinic-a", BYSTANDER), ("clinic-b", VICTIM)}


def test_given_an_erased_subject_then_no_copy_survives_replays_resends_or_restarts(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    worker = pipeline.start("worker", "--loglevel", "info")
    pipeline.start("sink")
    victim = victim_events()
    pipeline.publish([*victim, refused_secret("clinic-a", VICTIM), *others()])
    wait_until_settled(pipeline, victim + others())
    wait_for(
        lambda: pipeline.clickhouse("SELECT count() FROM events", "clinic-a"),
        lambda r: bool(r) and int(r[0][0]) == 6,
    )
    copied_log = [
        r for r in pipeline.read(pipeline.topics.events) if r.key == f"clinic-a:{VICTIM}".encode()
    ]

    erase_victim(pipeline)
    assert_no_trace(pipeline)
    assert_others_untouched(pipeline)
    export = pipeline.uac(
        "export", "--tenant", "clinic-a", "--subject", VICTIM, "--out", str(tmp_path)
    )
    assert export.returncode == 0, export.stderr
    exported = json.loads((tmp_path / "export.json").read_text(encoding="utf-8"))
    assert (exported["state"]["erased"], exported["state"]["version"], exported["claims"]) == (
        True,
        0,
        [],
    )
    assert len(exported["erasure_receipts"]) == 1
    again = pipeline.uac("erase", "--tenant", "clinic-a", "--subject", VICTIM)
    assert again.returncode == 0, again.stderr
    assert "already erased" in again.stdout

    replay_worker = pipeline.start(
        "worker", "--loglevel", "info", env={"UAC_APP_ID": f"{pipeline.app_id}-replay"}
    )
    wait_for(
        lambda: [d for d in pipeline.quarantined() if d.reasons == ("subject_erased",)],
        lambda found: len(found) >= len(copied_log),
        what="the replayed copies refused",
    )
    replay_worker.stop()

    pipeline.publish_raw([(record.key, record.value) for record in copied_log])
    pipeline.publish_raw([(e.key.encode(), event_codec().encode(e)) for e in victim])
    worker.stop()
    pipeline.start("worker", "--loglevel", "info")
    wait_for(
        lambda: [
            d
            for d in pipeline.quarantined()
            if d.subject_id == VICTIM and d.tenant_id == "clinic-a"
        ],
        lambda found: len(found) >= 2 * len(copied_log) + len(victim),
        what="the re-sent copies refused",
    )
    assert_no_trace(pipeline, skip=frozenset({pipeline.topics.events}))
    assert_others_untouched(pipeline)
    pipeline.stop_all()
    rows = storage_rows(pipeline)
    assert victim_rows(rows) == {}
    assert len(rows["erasures"]) == 1
    assert any(VICTIM in " ".join(map(str, r)) for r in rows["events"])


def test_given_a_subject_then_its_export_round_trips_and_reads_are_purpose_bound_and_audited(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    pipeline.start("worker", "--loglevel", "info")
    sink = pipeline.start("sink")
    events = subject_events("clinic-a", "exported", "exported@example.org")
    pipeline.publish(events)
    wait_until_settled(pipeline, events)
    wait_for(
        lambda: pipeline.uac("state", "--tenant", "clinic-a", "--subject", "exported").returncode,
        lambda c: c == 0,
    )
    exported = pipeline.uac(
        "export", "--tenant", "clinic-a", "--subject", "exported", "--out", str(tmp_path)
    )
    assert exported.returncode == 0, exported.stderr
    not_a_directory = tmp_path / "export.json" / "inside"
    unwritable = pipeline.uac(
        "export", "--tenant", "clinic-a", "--subject", "exported", "--out", str(not_a_directory)
    )
    assert unwritable.returncode == 3
    assert f"cannot write the export to {not_a_directory}" in " ".join(unwritable.stderr.split())
    assert "Traceback" not in unwritable.stderr
    document = json.loads((tmp_path / "export.json").read_text(encoding="utf-8"))
    assert {c["event_id"] for c in document["claims"]} == {e.id for e in events}
    assert [a["rule_id"] for a in document["alerts"]] == ["drug-allergy-conflict"]
    personalization = json.loads(
        pipeline.uac(
            "state",
            "--tenant",
            "clinic-a",
            "--subject",
            "exported",
            "--purpose",
            "personalization",
            "--json",
        ).stdout
    )
    assert personalization["allergies"] == []
    assert personalization["read"]["withheld"] > 0
    expected_reads = {("export", "subject_access"), ("state", "personalization")}
    wait_for(
        lambda: pipeline.clickhouse(
            "SELECT action, purpose FROM audit_reads ORDER BY read_at", "clinic-a"
        ),
        lambda rows: {tuple(row) for row in rows} >= expected_reads,
        what="the export and the personalization read in audit_reads",
    )
    sink.stop()
    erased = pipeline.uac("erase", "--tenant", "clinic-a", "--subject", "exported")
    assert erased.returncode == 0, erased.stderr
    keys = FileKeyStore(pipeline.home / "keys")
    wait_for(lambda: keys.is_destroyed("clinic-a:exported"), bool, what="the key destroyed")
    pending = pipeline.uac(
        "export", "--tenant", "clinic-a", "--subject", "exported", "--out", str(tmp_path / "p")
    )
    assert pending.returncode == 4
    assert "the erasure of clinic-a:exported is under way" in " ".join(pending.stderr.split())
    for relation in ("events", "alerts", "allergies", "gate_decisions", "current_state"):
        counted = pipeline.uac(
            "query",
            f"SELECT count() FROM {relation} WHERE subject_id = 'exported'",  # noqa: S608
            "--tenant",
            "clinic-a",
            "--json",
        )
        assert counted.returncode == 0, counted.stderr
        assert json.loads(counted.stdout)["rows"] == [[0]], relation
    alert_id = document["alerts"][0]["alert_id"]
    unexplained = pipeline.uac("explain", alert_id, "--tenant", "clinic-a")
    assert unexplained.returncode == 4, unexplained.stdout


def studied_subject() -> list[Event]:
    """A subject of clinic-a who consents to research with health data: a penicillin allergy
    recorded for research, amoxicillin prescribed for care, ampicillin given in the study."""

    def event(kind: str, name: str, hours: int, recorded_for: str, **payload: Any) -> Event:
        return make_event(
            kind,
            f"studied-{name}",
            subject="studied",
            at=timedelta(hours=hours),
            payload=payload,
            purpose=recorded_for,
        )

    return [
        event("ConsentChanged", "consent", 0, "care", purpose="research", granted=True),
        event("AllergyRecorded", "allergy", 1, "research", substance="penicillin"),
        event("MedicationPrescribed", "amox", 2, "care", drug="amoxicillin 500 mg"),
        event("MedicationPrescribed", "amp", 3, "research", drug="ampicillin 1 g"),
    ]


def test_given_claims_recorded_for_research_then_their_alert_is_research_only_end_to_end(
    pipeline: Pipeline,
) -> None:
    """The allergy recorded for research is used for research: against the study's ampicillin
    (one alert, of purpose research), not against the care prescription; `uac alerts` (care)
    does not show it, a research query of the consenting subject does, and explain follows."""
    pipeline.start("worker", "--loglevel", "info")
    pipeline.start("sink")
    events = studied_subject()
    pipeline.publish(events)
    wait_until_settled(pipeline, events)
    (alert,) = wait_for(pipeline.alerts, lambda found: len(found) >= 1, what="the study's alert")
    assert (alert.purpose, alert.rule_id) == ("research", "drug-allergy-conflict")
    assert alert.drug_allergy is not None and alert.drug_allergy.drug == "ampicillin 1 g"
    shown = pipeline.uac("alerts", "--tenant", "clinic-a", "--json")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == ""
    research = "SELECT subject_id, purpose, alert_id FROM alerts"
    rows = wait_for(
        lambda: pipeline.clickhouse(research, "clinic-a", "research"),
        bool,
        what="the research alert in ClickHouse",
    )
    assert [list(row) for row in rows] == [["studied", "research", str(alert.alert_id)]]
    assert pipeline.clickhouse(research, "clinic-a", "care") == []
    for purpose, code in (("research", 0), ("care", 4)):
        explained = pipeline.uac(
            "explain", str(alert.alert_id), "--tenant", "clinic-a", "--purpose", purpose
        )
        assert explained.returncode == code, (purpose, explained.stdout, explained.stderr)


def test_given_a_key_store_restored_from_before_an_erasure_then_no_reader_opens_the_subject(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    """An operator restores the key store from a backup taken before an erasure, with the
    workers stopped: the first reading command destroys the erased subject's key again before it
    opens anything (it read the subject's alerts with the restored key until the worker's next
    start)."""
    pipeline.start("worker")
    pipeline.start("sink")
    pipeline.publish(victim_events() + others())
    wait_until_settled(pipeline, victim_events() + others())
    wait_for(
        pipeline.alerts,
        lambda found: any(a.key == f"clinic-a:{VICTIM}" for a in found),
        what="the victim's alert",
    )
    keys_dir, backup = pipeline.home / "keys", tmp_path / "keys-backup"
    shutil.copytree(keys_dir, backup)
    erase_victim(pipeline)
    pipeline.stop_all()
    shutil.rmtree(keys_dir)
    shutil.copytree(backup, keys_dir)

    shown = pipeline.uac("alerts", "--tenant", "clinic-a", "--json")
    assert shown.returncode == 0, shown.stderr
    subjects = {json.loads(line)["subject_id"] for line in shown.stdout.splitlines()}
    assert subjects == {BYSTANDER}
    exported = pipeline.uac(
        "export", "--tenant", "clinic-a", "--subject", VICTIM, "--out", str(tmp_path / "x")
    )
    assert exported.returncode == 0, exported.stderr
    document = json.loads((tmp_path / "x" / "export.json").read_text(encoding="utf-8"))
    assert (document["state"]["erased"], document["claims"], document["alerts"]) == (True, [], [])
    assert FileKeyStore(keys_dir).is_destroyed(f"clinic-a:{VICTIM}")
