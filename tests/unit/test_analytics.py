"""The analyst query layer against the real ClickHouse engine (chDB, in process, in a tmp path).

chDB hosts one engine per process: while any client is open on a data path, opening another
path raises (`test_one_engine_path_per_process` pins this), and after every client is closed a
different path opens fine. So this module shares one module-scoped engine and keeps tests apart
by tenant; the dedup tests use tenants of their own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

import clickhouse_connect
import pytest
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ProgrammingError

from projections.document import checkpoint_of, plain
from projections.queries import trips
from projections.state import UserState, replay
from schemas.alerts import Alert
from schemas.codec import event_codec
from schemas.decisions import GateDecision
from schemas.events import Event
from streams import analytics
from streams.analytics import QueryFailed, QueryRefused, TenantRequired, query
from streams.clickhouse import apply_schema, connect, ddl_statements, schema_files, write_batch
from streams.rows import (
    ALERT_COLUMNS,
    CHECKPOINT_COLUMNS,
    COLUMNS,
    DECISION_COLUMNS,
    EVENT_COLUMNS,
    Coordinates,
    Row,
    accepted_rows,
    alert_row,
    checkpoint_row,
    decision_row,
)
from streams.settings import Settings
from tests.factories import T0, make_event

A, B = "clinic-a", "clinic-b"
B_SUBJECT = "subject-of-b"
NOW = datetime(2024, 6, 1, tzinfo=UTC)
CODEC = event_codec()


def _accepted(events: Sequence[Event], first_offset: int = 0) -> tuple[list[Row], list[Row]]:
    event_rows, decision_rows = [], []
    for offset, event in enumerate(events, start=first_offset):
        headers = [
            ("uac-decision-id", str(uuid5(NAMESPACE_URL, f"d/{event.event_id}")).encode()),
            ("uac-source", f"uac.events/0/{offset}".encode()),
            ("uac-decided-at", b"2024-06-01T00:00:00.000Z"),
        ]
        at = Coordinates("uac.events.accepted", 0, offset)
        event_row, decision = accepted_rows(event, CODEC.encode(event), headers, at, NOW)
        event_rows.append(event_row)
        decision_rows.append(decision)
    return event_rows, decision_rows


def _alert(tenant: str, name: str, status: str, offset: int) -> Row:
    alert_id = uuid5(NAMESPACE_URL, f"alert/{tenant}/{name}")
    alert = Alert.model_validate(
        {
            "lifecycle_id": uuid5(alert_id, f"{status}/{offset}"),
            "alert_id": alert_id,
            "tenant_id": tenant,
            "subject_id": "patient-1" if tenant == A else B_SUBJECT,
            "rule_id": "drug-allergy",
            "rule_version": 1,
            "status": status,
            "severity": "critical",
            "title": name,
            "detail": "",
            "cause": (name,),
            "evidence": (),
            "trigger_event_id": "e",
            "occurred_at": T0,
        }
    )
    return alert_row(alert, Coordinates("uac.alerts", 0, offset), NOW)


def _rejection(tenant: str | None) -> Row:
    decision = GateDecision.model_validate(
        {
            "decision_id": uuid5(NAMESPACE_URL, f"rejected/{tenant}"),
            "outcome": "rejected",
            "reasons": ["actor_not_allowed"],
            "detail": "stranger",
            "tenant_id": tenant,
            "message_sha256": "0" * 64,
            "source_topic": "uac.events",
            "source_partition": 0,
            "source_offset": 99,
            "decided_at": NOW,
        }
    )
    return decision_row(decision, NOW)


def _checkpoint(state: UserState, offset: int) -> Row:
    return checkpoint_row(checkpoint_of(state), Coordinates("uac.state", 0, offset), NOW)


HOME_NL = make_event("FactAsserted", "home")
TRIP_ABROAD = make_event("TravelRecorded", "trip-fr", at=timedelta(days=1))
TRIP_HOME = make_event(
    "TravelRecorded",
    "trip-nl",
    at=timedelta(days=2),
    payload={"trip_id": "trip-2", "destination_country": "NL", "return_date": "2024-05-03"},
)
ALLERGY = make_event("AllergyRecorded", "allergy")
RX = make_event("MedicationPrescribed", "rx", at=timedelta(days=3))
RX_2 = make_event(
    "MedicationPrescribed",
    "rx-2",
    at=timedelta(days=3),
    payload={"prescription_id": "rx-2", "drug": "ibuprofen"},
)
STOP_2 = make_event(
    "MedicationStopped", "stop-2", at=timedelta(days=4), payload={"prescription_id": "rx-2"}
)
HISTORY_A = [HOME_NL, TRIP_ABROAD, TRIP_HOME, ALLERGY, RX, RX_2, STOP_2]
NO_HOME_TRIP = make_event("TravelRecorded", "no-home", subject="patient-2")
HISTORY_B = [
    make_event("FactAsserted", "b-home", tenant=B, subject=B_SUBJECT, payload={"value": "DE"}),
    make_event("TravelRecorded", "b-trip", tenant=B, subject=B_SUBJECT),
    make_event("AllergyRecorded", "b-allergy", tenant=B, subject=B_SUBJECT),
]


def _load(client: Client) -> None:
    events_a, decisions_a = _accepted([*HISTORY_A, NO_HOME_TRIP])
    events_b, decisions_b = _accepted(HISTORY_B, first_offset=100)
    write_batch(client, "events", EVENT_COLUMNS, events_a + events_b, "load-events")
    rejections = [_rejection(A), _rejection(B), _rejection(None)]
    all_decisions = decisions_a + decisions_b + rejections
    write_batch(client, "gate_decisions", DECISION_COLUMNS, all_decisions, "load-decisions")
    alerts = [
        _alert(A, "resolved-later", "raised", 1),
        _alert(A, "still-open", "raised", 2),
        _alert(A, "resolved-later", "resolved", 3),
        _alert(A, "acknowledged", "raised", 4),
        _alert(A, "acknowledged", "acknowledged", 5),
        _alert(B, "b-open", "raised", 6),
    ]
    write_batch(client, "alerts", ALERT_COLUMNS, alerts, "load-alerts")
    checkpoints = [
        _checkpoint(replay(HISTORY_A[:3]), 1),
        _checkpoint(replay(HISTORY_A), 2),
        _checkpoint(replay([NO_HOME_TRIP]), 3),
        _checkpoint(replay(HISTORY_B), 4),
    ]
    write_batch(client, "state_checkpoints", CHECKPOINT_COLUMNS, checkpoints, "load-checkpoints")
    client.command(
        "CREATE TABLE IF NOT EXISTS default.leaky (tenant_id String, subject_id String) "
        "ENGINE = MergeTree ORDER BY tenant_id"
    )
    client.command("INSERT INTO default.leaky VALUES ('clinic-b', 'subject-of-b')")


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return Settings(home=tmp_path_factory.mktemp("analytics"))


@pytest.fixture(scope="module")
def client(settings: Settings) -> Iterator[Client]:
    engine = connect(settings)
    try:
        apply_schema(engine)
        _load(engine)
        yield engine
    finally:
        engine.close()


def _text(result: analytics.QueryResult) -> str:
    return json.dumps(result.to_json())


ISOLATION = [
    pytest.param("SELECT * FROM events", id="given all events then only tenant A's"),
    pytest.param(
        "SELECT * FROM events WHERE tenant_id = 'clinic-b' OR 1 = 1",
        id="given an OR 1=1 filter then still only tenant A's",
    ),
    pytest.param(
        "SELECT * FROM events WHERE subject_id = 'subject-of-b' OR true",
        id="given a filter naming B's subject then nothing of B",
    ),
    pytest.param(
        "SELECT * FROM events UNION ALL SELECT * FROM events WHERE tenant_id = 'clinic-b'",
        id="given a UNION ALL then every branch is tenant-scoped",
    ),
    pytest.param(
        "WITH everything AS (SELECT * FROM events) SELECT * FROM everything",
        id="given an analyst WITH then it sees only the scoped relations",
    ),
    pytest.param(
        "SELECT * FROM (SELECT * FROM gate_decisions) AS d WHERE 1 = 1",
        id="given a subquery over gate_decisions then only A's decisions",
    ),
    pytest.param("SELECT * FROM alerts", id="given all alert lifecycle rows then only A's"),
    pytest.param("SELECT * FROM open_alerts", id="given open alerts then only A's"),
    pytest.param("SELECT * FROM state_checkpoints", id="given every checkpoint then only A's"),
    pytest.param("SELECT * FROM current_state", id="given current states then only A's"),
    pytest.param("SELECT * FROM trips", id="given trips then only A's"),
    pytest.param("SELECT * FROM allergies", id="given allergies then only A's"),
    pytest.param("SELECT * FROM medications", id="given medications then only A's"),
    pytest.param(
        "SELECT e.subject_id FROM events AS e JOIN current_state AS s USING (subject_id)",
        id="given a join of two relations then only A's",
    ),
    pytest.param(
        "SELECT {tenant:String} AS tenant, count() FROM events",
        id="given the tenant parameter in analyst SQL then it is A",
    ),
]


@pytest.mark.parametrize("sql", ISOLATION)
def test_a_query_for_tenant_a_never_returns_a_row_of_tenant_b(client: Client, sql: str) -> None:
    result = query(client, sql, A)
    assert result.rows
    assert B not in _text(result)
    assert B_SUBJECT not in _text(result)


def test_tenant_b_sees_its_own_rows(client: Client) -> None:
    result = query(client, "SELECT DISTINCT subject_id FROM events", B)
    assert result.rows == [[B_SUBJECT]]


@pytest.mark.parametrize(
    "tenant",
    [
        pytest.param(None, id="given no tenant then refused"),
        pytest.param("", id="given an empty tenant then refused"),
        pytest.param("   ", id="given a blank tenant then refused"),
    ],
)
def test_a_query_without_a_tenant_is_refused(client: Client, tenant: str | None) -> None:
    with pytest.raises(TenantRequired):
        query(client, "SELECT 1", tenant)


REFUSED = [
    pytest.param("SELECT * FROM uac.events", "database 'uac'", id="given uac.events then refused"),
    pytest.param(
        "SELECT * FROM `uac`.`events`",
        "database 'uac'",
        id="given a quoted uac.events then refused",
    ),
    pytest.param(
        'SELECT * FROM "uac" /* hidden */ . events',
        "database 'uac'",
        id="given uac . events split by a comment then refused",
    ),
    pytest.param(
        "SELECT count() FROM events WHERE (tenant_id, subject_id) IN uac.events",
        "database 'uac'",
        id="given IN uac.events then refused",
    ),
    pytest.param(
        "SELECT * FROM system.tables", "database 'system'", id="given system.tables then refused"
    ),
    pytest.param(
        "SELECT * FROM INFORMATION_SCHEMA.TABLES",
        "information_schema",
        id="given information_schema then refused",
    ),
    pytest.param("SELECT 1; SELECT 2", "one statement", id="given two statements then refused"),
    pytest.param(
        "SELECT 1; DROP TABLE events", "one statement", id="given a trailing DROP then refused"
    ),
    pytest.param(
        "INSERT INTO events SELECT * FROM events", "read-only", id="given an INSERT then refused"
    ),
    pytest.param(
        "ALTER TABLE events DELETE WHERE 1", "read-only", id="given an ALTER then refused"
    ),
    pytest.param("DROP TABLE events", "read-only", id="given a DROP then refused"),
    pytest.param("SET readonly = 0", "read-only", id="given a SET then refused"),
    pytest.param("", "empty", id="given empty SQL then refused"),
    pytest.param("-- only a comment", "empty", id="given only a comment then refused"),
    pytest.param(
        "SELECT * FROM merge('uac', 'events')",
        "'merge'",
        id="given the merge table function over uac then refused",
    ),
    pytest.param(
        "SELECT * FROM remote('127.0.0.1', 'uac', 'events')",
        "'remote'",
        id="given the remote table function then refused",
    ),
    pytest.param(
        "SELECT `file`('/etc/hostname')", "'file'", id="given the file function then refused"
    ),
    pytest.param(
        "SELECT dictGet('d', 'a', 1)", "'dictget'", id="given a dictionary function then refused"
    ),
    pytest.param(
        "SELECT 1 SETTINGS readonly = 0", "SETTINGS", id="given a SETTINGS clause then refused"
    ),
    pytest.param("SELECT 1 INTO OUTFILE '/tmp/x'", "OUTFILE", id="given INTO OUTFILE then refused"),
    pytest.param(
        "SELECT * FROM leaky",
        "default.leaky",
        id="given a bare name of a table outside the relations then refused by the analyzer",
    ),
    pytest.param("SELECT 'unterminated", "unterminated", id="given an open literal then refused"),
]


@pytest.mark.parametrize(("sql", "message"), REFUSED)
def test_refused_sql(client: Client, sql: str, message: str) -> None:
    with pytest.raises(QueryRefused, match=message):
        query(client, sql, A)


ENGINE_CHECKS = [
    pytest.param(
        "AST",
        "SELECT * FROM uac.events",
        analytics.check_parsed,
        id="given the parse of uac.events then the parser check refuses it alone",
    ),
    pytest.param(
        "AST",
        "SELECT file('/etc/hostname')",
        analytics.check_parsed,
        id="given the parse of file() then the parser check refuses it alone",
    ),
    pytest.param(
        "AST",
        "SHOW TABLES",
        analytics.check_parsed,
        id="given the parse of SHOW then the parser check refuses it alone",
    ),
    pytest.param(
        "QUERY TREE",
        "SELECT * FROM leaky",
        analytics.check_resolved,
        id="given the resolution of a bare non-relation name then the analyzer check refuses it",
    ),
    pytest.param(
        "QUERY TREE",
        "SELECT * FROM merge('uac', '^events$')",
        analytics.check_resolved,
        id="given the resolution of merge() then the analyzer check refuses it alone",
    ),
]


@pytest.mark.parametrize(("kind", "sql", "check"), ENGINE_CHECKS)
def test_each_engine_check_refuses_on_its_own(
    client: Client, kind: str, sql: str, check: Any
) -> None:
    result = client.query(f"EXPLAIN {kind} {sql}")
    lines = [str(row[0]) for row in result.result_rows]
    with pytest.raises(QueryRefused):
        check(lines)


def test_trips_take_international_from_the_checkpoint(client: Client) -> None:
    result = query(
        client,
        "SELECT subject_id, trip_id, destination_country, home_country, international, "
        "departure_date, return_date FROM trips ORDER BY subject_id, trip_id",
        A,
    )
    assert result.rows == [
        ["patient-1", "trip-1", "FR", "NL", True, "2024-05-01", None],
        ["patient-1", "trip-2", "NL", "NL", False, "2024-05-01", "2024-05-03"],
        ["patient-2", "trip-1", "FR", None, None, "2024-05-01", None],
    ]


def test_trips_agree_with_the_fold(client: Client) -> None:
    state = replay(HISTORY_A)
    expected = [
        [t.trip_id, t.destination_country, t.home_country, t.international, plain(t.departure_date)]
        for t in trips(state)
    ]
    sql = (
        "SELECT trip_id, destination_country, home_country, international, departure_date "
        "FROM trips WHERE subject_id = 'patient-1' ORDER BY departure_date, trip_id"
    )
    assert query(client, sql, A).rows == expected


def test_current_state_is_the_latest_version(client: Client) -> None:
    result = query(client, "SELECT subject_id, version FROM current_state ORDER BY subject_id", A)
    assert result.rows == [["patient-1", len(HISTORY_A)], ["patient-2", 1]]


def test_medications_and_allergies_come_from_the_current_state(client: Client) -> None:
    medications = query(
        client, "SELECT prescription_id, drug, active FROM medications ORDER BY 1", A
    )
    assert medications.rows == [["rx-1", "amoxicillin", True], ["rx-2", "ibuprofen", False]]
    allergies = query(client, "SELECT substance, active, categories FROM allergies", A)
    assert allergies.rows == [["penicillin", True, ["medication"]]]


def test_open_alerts_are_those_whose_latest_step_is_not_resolved(client: Client) -> None:
    result = query(client, "SELECT title, status FROM open_alerts ORDER BY title", A)
    assert result.rows == [["acknowledged", "acknowledged"], ["still-open", "raised"]]


def test_gate_decisions_hold_accepted_and_rejected(client: Client) -> None:
    result = query(
        client, "SELECT outcome, count() FROM gate_decisions GROUP BY outcome ORDER BY outcome", A
    )
    assert result.rows == [["accepted", len(HISTORY_A) + 1], ["rejected", 1]]


SHAPES = [
    pytest.param(
        "WITH abroad AS (SELECT * FROM trips WHERE international) SELECT count() FROM abroad",
        [[1]],
        id="given an analyst WITH list then it is merged after the relations",
    ),
    pytest.param(
        "WITH RECURSIVE n AS (SELECT 1 AS i UNION ALL SELECT i + 1 FROM n WHERE i < 3) "
        "SELECT count() FROM n",
        [[3]],
        id="given WITH RECURSIVE then the merged list stays recursive",
    ),
    pytest.param(
        "-- leading comment\nSELECT count() FROM events WHERE type = 'TravelRecorded'; -- done",
        [[3]],
        id="given surrounding comments and a semicolon then they are dropped",
    ),
    pytest.param(
        "SELECT occurred_at FROM events ORDER BY occurred_at LIMIT 1",
        [["2024-01-01T09:00:00.000Z"]],
        id="given a DateTime64 then it comes back as UTC text",
    ),
    pytest.param(
        "SELECT count() FROM events WHERE type LIKE '%Record%'",
        [[4]],
        id="given percent signs in a LIKE then they reach the engine untouched",
    ),
    pytest.param("SELECT 1 AS one", [[1]], id="given a constant SELECT then it runs"),
    pytest.param(
        "SELECT count() FROM numbers(10)", [[10]], id="given a generator function then it runs"
    ),
]


@pytest.mark.parametrize(("sql", "rows"), SHAPES)
def test_query_shapes(client: Client, sql: str, rows: list[list[Any]]) -> None:
    assert query(client, sql, A).rows == rows


def test_an_empty_result_still_names_its_columns(client: Client) -> None:
    result = query(client, "SELECT event_id, type FROM events WHERE 1 = 0", A)
    assert result == analytics.QueryResult(("event_id", "type"), [])


def test_an_engine_error_is_query_failed(client: Client) -> None:
    with pytest.raises(QueryFailed, match="no_such_column"):
        query(client, "SELECT no_such_column FROM events", A)


def _raw_count(client: Client, tenant: str) -> int:
    """Rows stored for `tenant`, before any FINAL collapse."""
    result = client.query(
        "SELECT count() FROM uac.events WHERE tenant_id = {tenant:String}",
        parameters={"tenant": tenant},
    )
    return int(result.result_rows[0][0])


def test_the_same_batch_twice_with_the_same_token_leaves_one_copy(client: Client) -> None:
    tenant = "dedup-token"
    events = [make_event("PreferenceStated", f"t{i}", tenant=tenant) for i in range(3)]
    rows, _ = _accepted(events)
    write_batch(client, "events", EVENT_COLUMNS, rows, "uac-sink/events/same")
    write_batch(client, "events", EVENT_COLUMNS, rows, "uac-sink/events/same")
    assert _raw_count(client, tenant) == 3


def test_a_reinsert_with_another_token_is_collapsed_by_final(client: Client) -> None:
    tenant = "dedup-final"
    events = [make_event("PreferenceStated", f"f{i}", tenant=tenant) for i in range(3)]
    rows, _ = _accepted(events)
    write_batch(client, "events", EVENT_COLUMNS, rows, "uac-sink/events/first")
    write_batch(client, "events", EVENT_COLUMNS, rows, "uac-sink/events/second")
    assert _raw_count(client, tenant) == 6
    assert query(client, "SELECT count() FROM events", tenant).rows == [[3]]


def test_the_tables_have_the_mappers_columns(client: Client) -> None:
    for table, columns in COLUMNS.items():
        described = client.query(f"DESCRIBE TABLE uac.{table}")
        assert tuple(row[0] for row in described.result_rows) == columns


def test_every_time_column_is_utc_datetime64(client: Client) -> None:
    result = client.query(
        "SELECT table, name, type FROM system.columns WHERE database = 'uac' "
        "AND type LIKE '%DateTime%'"
    )
    assert result.result_rows
    for table, name, column_type in result.result_rows:
        assert "DateTime64(3, 'UTC')" in column_type, (table, name)


def test_the_schema_applies_twice(client: Client) -> None:
    statements = sum(len(ddl_statements(path.read_text())) for path in schema_files())
    assert apply_schema(client) == statements


def test_tenant_is_the_first_sort_key_everywhere(client: Client) -> None:
    result = client.query("SELECT name, sorting_key FROM system.tables WHERE database = 'uac'")
    assert sorted(name for name, _ in result.result_rows) == sorted(COLUMNS)
    assert all(key.startswith("tenant_id,") for _, key in result.result_rows)


def test_one_engine_path_per_process(client: Client, tmp_path: Path) -> None:
    with pytest.raises(ProgrammingError, match="already initialized"):
        connect(Settings(home=tmp_path / "other"))
    script = textwrap.dedent(
        f"""
        import clickhouse_connect
        first = clickhouse_connect.get_client(interface="chdb", path={str(tmp_path / "a")!r})
        second = clickhouse_connect.get_client(interface="chdb", path={str(tmp_path / "a")!r})
        second.close()
        first.close()
        other = clickhouse_connect.get_client(interface="chdb", path={str(tmp_path / "b")!r})
        print(other.query("SELECT 1").result_rows[0][0])
        other.close()
        """
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.stdout.strip() == "1", completed.stderr


def test_uuid_values_come_back_as_text(client: Client) -> None:
    result = query(client, "SELECT event_id FROM events WHERE type = 'AllergyRecorded'", A)
    assert result.rows == [[str(UUID(ALLERGY.event_id))]]


def test_the_dedup_token_needs_the_window_setting(client: Client) -> None:
    """Why every table sets non_replicated_deduplication_window: without it a non-replicated
    table ignores insert_deduplication_token and keeps both copies."""
    client.command(
        "CREATE TABLE IF NOT EXISTS default.no_window (id UInt32) "
        "ENGINE = ReplacingMergeTree ORDER BY id"
    )
    for _ in range(2):
        client.insert(
            "default.no_window",
            [[1, 2]],
            column_names=["id"],
            column_oriented=True,
            settings={"insert_deduplication_token": "same"},
        )
    assert client.query("SELECT count() FROM default.no_window").result_rows == [(4,)]


def test_isolation_holds_when_the_default_database_is_uac(
    settings: Settings, client: Client
) -> None:
    """A server DSN may name `uac` as the default database: the relations still shadow the
    tables, and a bare name of any other table there is refused."""
    in_uac = clickhouse_connect.get_client(
        interface="chdb", path=str(settings.chdb_path), database="uac", tz_mode="aware"
    )
    try:
        assert query(in_uac, "SELECT DISTINCT tenant_id FROM events", A).rows == [[A]]
        assert query(in_uac, "SELECT DISTINCT tenant_id FROM open_alerts", A).rows == [[A]]
        in_uac.command("CREATE TABLE IF NOT EXISTS uac.unwrapped (x String) ENGINE = Memory")
        with pytest.raises(QueryRefused, match=r"uac\.unwrapped"):
            query(in_uac, "SELECT * FROM unwrapped", A)
    finally:
        in_uac.close()
