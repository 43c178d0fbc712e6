"""The analyst query layer against the real ClickHouse engine (chDB, in process, in a tmp path):
tenant isolation, purpose-bound relations, audit of reads, alert explanations, erasure in
ClickHouse and its receipts, and the server's row policies (parsed).

chDB hosts one engine per process: while any client is open on a data path, opening another
path raises (`test_one_engine_path_per_process` pins this), and after every client is closed a
different path opens fine. So this module shares one module-scoped engine and keeps tests apart
by tenant; the dedup, purpose, explain and erasure tests use tenants of their own.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
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
from clickhouse_connect.driver.exceptions import ClickHouseError, ProgrammingError

from projections.document import checkpoint_of, plain, state_document
from projections.queries import trips
from projections.state import UserState, replay
from schemas.alerts import Alert, Evidence
from schemas.codec import event_codec
from schemas.decisions import GateDecision
from schemas.erasures import ErasureRecorded, ReadAudited, subject_ref
from schemas.events import Event
from streams import alert_lineage, analytics, query_clients, query_relations, sql_guard
from streams.alert_lineage import AlertNotFound
from streams.analytics import QueryFailed, TenantRequired, query
from streams.checkout import CHECKOUT
from streams.clickhouse import (
    SCHEMA_DIR,
    apply_schema,
    carry_out_erasure,
    connect,
    ddl_statements,
    schema_files,
    write_batch,
)
from streams.demo import ANALYST_QUESTIONS
from streams.query_clients import bearer_matches, running_sink, sink_record_path
from streams.rows import (
    ALERT_COLUMNS,
    AUDIT_COLUMNS,
    CHECKPOINT_COLUMNS,
    COLUMNS,
    DECISION_COLUMNS,
    EVENT_COLUMNS,
    RECEIPT_COLUMNS,
    SUBJECT_TABLES,
    Coordinates,
    Row,
    accepted_rows,
    alert_row,
    audit_row,
    checkpoint_row,
    decision_row,
    receipt_row,
)
from streams.settings import Settings
from streams.sql_guard import QueryRefused
from tests.factories import T0, event_id, make_event

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
        value = CODEC.encode(event)
        event_row, decision = accepted_rows(CODEC.decode_record(value), value, headers, at, NOW)
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
    "MedicationStopped",
    "stop-2",
    at=timedelta(days=4),
    payload={"prescription_id": "rx-2", "entered_in_error": True},
)
DIET = make_event("PreferenceStated", "diet", at=timedelta(days=5))
HISTORY_A = [HOME_NL, TRIP_ABROAD, TRIP_HOME, ALLERGY, RX, RX_2, STOP_2, DIET]
NO_HOME_TRIP = make_event("TravelRecorded", "no-home", subject="patient-2")
HISTORY_B = [
    make_event("FactAsserted", "b-home", tenant=B, subject=B_SUBJECT, payload={"value": "DE"}),
    make_event("TravelRecorded", "b-trip", tenant=B, subject=B_SUBJECT),
    make_event("AllergyRecorded", "b-allergy", tenant=B, subject=B_SUBJECT),
    make_event("PreferenceStated", "b-diet", tenant=B, subject=B_SUBJECT),
]


def _receipt(tenant: str, subject: str) -> Row:
    entry = ErasureRecorded(
        erasure_id=f"erasure-of-{subject}",
        tenant_id=tenant,
        subject_ref=subject_ref(tenant, subject),
        requested_at=T0,
        recorded_at=NOW,
        requested_by="uac-cli",
        key_destroyed=True,
    )
    return receipt_row(entry, {"events": 1}, NOW, verified=True)


def _audit(tenant: str) -> Row:
    audit = ReadAudited(
        audit_id=uuid5(NAMESPACE_URL, f"audit/{tenant}"),
        tenant_id=tenant,
        subject_ref=subject_ref(tenant, "patient-1"),
        actor="fixture",
        purpose="care",
        action="state",
        detail="state",
        read_at=NOW,
    )
    return audit_row(audit, NOW)


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
    receipts = [_receipt(A, "gone-a"), _receipt(B, "gone-b")]
    write_batch(client, "erasures", RECEIPT_COLUMNS, receipts, "load-receipts")
    write_batch(client, "audit_reads", AUDIT_COLUMNS, [_audit(A), _audit(B)], "load-audit")
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
    pytest.param("SELECT * FROM preferences", id="given preferences then only A's"),
    pytest.param("SELECT * FROM facts", id="given facts then only A's"),
    pytest.param(
        "SELECT e.subject_id FROM events AS e JOIN current_state AS s USING (subject_id)",
        id="given a join of two relations then only A's",
    ),
    pytest.param(
        "SELECT {tenant:String} AS tenant, count() FROM events",
        id="given the tenant parameter in analyst SQL then it is A",
    ),
    pytest.param("SELECT * FROM erasures", id="given erasure receipts then only A's"),
    pytest.param("SELECT * FROM audit_reads", id="given the audit of reads then only A's"),
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


def test_a_query_for_a_tenant_the_tenants_file_does_not_name_is_refused(client: Client) -> None:
    queries = query_clients.DirectQueries(client, {A: frozenset({"care"})})
    with pytest.raises(analytics.UnknownTenant, match="not in the tenants file"):
        queries.query("SELECT count() FROM events", "no-such-clinic")
    with pytest.raises(TenantRequired):
        queries.query("SELECT count() FROM events", "")
    assert queries.query("SELECT count() FROM events", A).rows


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
        id="given a bare name of a table outside the relations then refused",
    ),
    pytest.param("SELECT 'unterminated", "unterminated", id="given an open literal then refused"),
    pytest.param(
        "SELECT '" + "{a:" * 4_000 + "'",
        "no closing '}' at character 8",
        id="given query parameters left open (quadratic to bind) then refused",
    ),
]


@pytest.mark.parametrize(("sql", "message"), REFUSED)
def test_refused_sql(client: Client, sql: str, message: str) -> None:
    with pytest.raises(QueryRefused, match=message):
        query(client, sql, A)


SMUGGLED = [
    pytest.param(
        "SELECT toString('max_threads') AS x$a$ SETTINGS max_threads = 3 -- $a$",
        "SETTINGS",
        id="given SETTINGS after an identifier holding $ (read as a here-doc) then refused",
    ),
    pytest.param(
        "SELECT \u2018a'\u2019 AS s SETTINGS max_threads = 3 -- '",
        "SETTINGS",
        id="given SETTINGS after a unicode-quoted string holding ' then refused",
    ),
    pytest.param(
        "SELECT 1 // '\nSETTINGS max_threads = 3 -- '",
        "SETTINGS",
        id="given SETTINGS after a // comment holding ' then refused",
    ),
    pytest.param(
        "SELECT payload FROM events AS x$a$ INTO OUTFILE 'leak.tsv' -- $a$",
        "OUTFILE",
        id="given INTO OUTFILE after an identifier holding $ then refused",
    ),
    pytest.param(
        "SELECT 1 AS x$a$ INTO OUTFILE 'leak.tsv' APPEND -- $a$",
        "OUTFILE",
        id="given INTO OUTFILE APPEND after an identifier holding $ then refused",
    ),
]


@pytest.mark.parametrize(("sql", "message"), SMUGGLED)
def test_a_clause_hidden_from_the_lexical_check_is_refused(
    client: Client, sql: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ClickHouse lexes `x$a$`, U+2018 quotes and `//` differently from a naive SQL lexer: a clause
    hidden from one layer is still refused, nothing is written and no setting changes."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(QueryRefused, match=message):
        query(client, sql, A)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1 AS x$a$ SETTINGS max_threads = 3",
        "SELECT 1 INTO OUTFILE 'leak.tsv'",
        "SELECT * FROM (SELECT 1 SETTINGS max_threads = 3)",
    ],
)
def test_the_parser_check_refuses_settings_and_outfile_on_its_own(client: Client, sql: str) -> None:
    lines = [str(row[0]) for row in client.query(f"EXPLAIN AST {sql}").result_rows]
    with pytest.raises(QueryRefused):
        sql_guard.check_parsed(lines)


def test_the_lexical_check_reads_the_sql_as_clickhouse_does() -> None:
    def texts(sql: str) -> list[str]:
        return [token.text for token in sql_guard.tokens(sql)]

    assert texts("SELECT x$a$ SETTINGS -- $a$") == ["SELECT", "x$a$", "SETTINGS"]
    assert texts("SELECT $a b$ x $a b$ AS y") == ["SELECT", "$a b$ x $a b$", "AS", "y"]
    assert texts("SELECT \u2018it's\u2019, \u201cuac\u201d") == [
        "SELECT",
        "\u2018it's\u2019",
        ",",
        "\u201cuac\u201d",
    ]
    assert texts("SELECT 1 // comment\n, 2 # comment\n, 3 #! comment") == [
        "SELECT",
        "1",
        ",",
        "2",
        ",",
        "3",
    ]
    assert texts("SELECT 1 #x") == ["SELECT", "1", "#", "x"]
    assert texts("SELECT 1a.b") == ["SELECT", "1a", ".", "b"]


def test_given_many_unclosed_here_doc_tags_then_each_is_a_token_of_its_own() -> None:
    """Each unclosed `$tag$` was looked for up to the end of the SQL again (200 KB of them took
    the query layer about 20 s of CPU); now one pass finds none closes."""
    sql = "SELECT " + " ".join(f"$t{number}$" for number in range(25_000))
    assert len(list(sql_guard.tokens(sql))) == 25_001


def test_a_here_doc_closes_at_the_next_copy_of_its_own_tag() -> None:
    texts = [token.text for token in sql_guard.tokens("SELECT $a$ $b$ x $a$, $b$ $a$ y $b$")]
    assert texts == ["SELECT", "$a$ $b$ x $a$", ",", "$b$ $a$ y $b$"]


EVALUATED_EARLY = [
    pytest.param(
        "SELECT arrayJoin((SELECT groupArray(tuple(tenant_id, subject_id))"
        " FROM mergeTreeIndex('uac', 'events')))",
        "table function 'mergeTreeIndex'",
        id="given the storage index read in a scalar subquery then refused",
    ),
    pytest.param(
        "SELECT arrayJoin((SELECT groupArray(subject_id) FROM leaky))",
        "default.leaky",
        id="given a table outside the relations read in a folded scalar subquery then refused",
    ),
    pytest.param(
        "SELECT 1 FROM numbers(1) ARRAY JOIN (SELECT groupArray(subject_id) FROM leaky) AS s",
        "default.leaky",
        id="given a table outside the relations read in an ARRAY JOIN subquery then refused",
    ),
    pytest.param(
        "WITH leaky AS (SELECT * FROM leaky) SELECT arrayJoin((SELECT groupArray(subject_id)"
        " FROM leaky))",
        "default.leaky",
        id="given a WITH table named after the table it reads then refused",
    ),
    pytest.param(
        "SELECT (SELECT toUInt8(any(subject_id)) FROM leaky)",
        "default.leaky",
        id="given a scalar subquery whose error would quote a value then refused before it runs",
    ),
    pytest.param(
        "SELECT arrayJoin((SELECT groupArray(explain) FROM (EXPLAIN SELECT 1)))",
        "table function 'viewExplain'",
        id="given an EXPLAIN subquery then refused",
    ),
    pytest.param(
        "SELECT count() FROM events WHERE subject_id IN default.leaky",
        "default.leaky",
        id="given IN a table qualified by a database outside the three then refused",
    ),
]


@pytest.mark.parametrize(("sql", "message"), EVALUATED_EARLY)
def test_a_subquery_the_engine_would_evaluate_while_checking_is_refused_before(
    client: Client, sql: str, message: str
) -> None:
    """The analyzer evaluates scalar subqueries while it resolves the query (before the last
    check runs) and may fold one into `__getScalar`, hiding the table it read: the parser check
    refuses what it reads first, so nothing of it runs and no error can quote it."""
    with pytest.raises(QueryRefused, match=message) as refused:
        query(client, sql, A)
    assert B not in str(refused.value)
    assert B_SUBJECT not in str(refused.value)


def test_a_scalar_subquery_over_the_relations_still_runs(client: Client) -> None:
    sql = "SELECT arrayJoin((SELECT groupUniqArray(tenant_id) FROM events)) AS tenant"
    assert query(client, sql, A).rows == [[A]]


def test_the_analyzer_check_sees_the_table_of_a_folded_scalar_subquery(client: Client) -> None:
    sql = "SELECT arrayJoin((SELECT groupArray(subject_id) FROM leaky))"
    settings = dict(sql_guard.EXPLAIN_SETTINGS)
    lines = [
        str(row[0])
        for row in client.query(f"EXPLAIN QUERY TREE {sql}", settings=settings).result_rows
    ]
    with pytest.raises(QueryRefused, match=r"default\.leaky"):
        sql_guard.check_resolved(lines)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM mergeTreeIndex('uac', 'events')",
        "SELECT * FROM numbers(1) JOIN generateRandom('a String') AS g ON 1",
        "SELECT arrayJoin((SELECT groupArray(subject_id) FROM leaky))",
        "SELECT count() FROM events WHERE subject_id IN leaky",
        "SELECT count() FROM events WHERE subject_id IN default.leaky",
    ],
)
def test_the_parser_check_refuses_other_tables_and_table_functions_on_its_own(
    client: Client, sql: str
) -> None:
    lines = [str(row[0]) for row in client.query(f"EXPLAIN AST {sql}").result_rows]
    with pytest.raises(QueryRefused):
        sql_guard.check_parsed(lines, analytics.catalog(client))


def test_given_the_documented_parameters_then_analyst_sql_may_use_them(client: Client) -> None:
    """`{read_at}` is the time the current views judge validity at: the time of the read."""
    before = datetime.now(UTC)
    result = query(
        client,
        "SELECT {tenant:String} AS tenant, {purpose:String} AS purpose,"
        " {read_at:DateTime64(3, 'UTC')} AS read_at,"
        " countIf(recorded_at <= {read_at:DateTime64(3, 'UTC')}) AS recorded_by_then,"
        " count() AS recorded"
        " FROM events",
        A,
    )
    tenant, purpose, read_at, recorded_by_then, recorded = result.rows[0]
    assert (tenant, purpose, recorded_by_then) == (A, "care", recorded)
    assert recorded > 0
    read_time = datetime.fromisoformat(read_at)
    assert before - timedelta(milliseconds=1) <= read_time <= datetime.now(UTC)


OTHER_TENANTS_ERASURE = subject_ref(B, "erased-subject-of-b")
"""A subject of tenant B whose erasure is under way: its ref is bound to every read (the
relations leave its rows out), whoever the tenant."""


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT {erased:Array(String)}",
        "SELECT arrayJoin({ /* c */ erased : Array(String) }) AS ref",
        "SELECT count() FROM events WHERE has({erased:Array(String)}, 'x')",
        "SELECT {x:String}",
    ],
)
def test_given_a_query_parameter_other_than_the_documented_ones_then_refused(
    client: Client, sql: str
) -> None:
    """`erased` is the relations' own: it holds the refs of every tenant's subjects whose
    erasure is under way, which `SELECT {erased:Array(String)}` returned to any tenant."""
    with pytest.raises(QueryRefused, match="query parameter"):
        query(client, sql, A, erased=frozenset({OTHER_TENANTS_ERASURE}))


def test_given_the_parse_of_a_query_parameter_of_the_relations_then_the_engine_refuses_it_alone(
    client: Client,
) -> None:
    """The analyst's statement is parsed with the documented parameters alone bound, so a
    placeholder the lexical check would miss fails at the parse, before anything runs."""
    read = analytics.new_read(
        A, None, frozenset({"care"}), "tester", frozenset({OTHER_TENANTS_ERASURE})
    )
    with pytest.raises(ClickHouseError, match="erased"):
        analytics._explain(client, "AST", "SELECT {erased:Array(String)}", read.analyst_parameters)


def test_a_query_has_documented_limits_on_time_memory_and_result_size() -> None:
    assert analytics.QUERY_SETTINGS == {
        "readonly": 2,
        "max_execution_time": 60,
        "max_memory_usage": 2 * 1024**3,
        "max_result_rows": 1_000_000,
        "max_result_bytes": 256 * 1024**2,
    }


def test_a_result_over_the_row_limit_fails_with_the_engines_message(client: Client) -> None:
    with pytest.raises(QueryFailed, match="Limit for result exceeded"):
        query(client, "SELECT number FROM numbers(1000001)", A)
    assert query(client, "SELECT count() FROM numbers(2000000)", A).rows == [[2000000]]


@pytest.mark.parametrize(
    "sql",
    [
        pytest.param("SELECT count() FROM numbers_mt(1e13)", id="given a long query"),
        pytest.param(
            "SELECT (SELECT count() FROM numbers_mt(1e13))",
            id="given a long scalar subquery the analyzer evaluates while checking",
        ),
    ],
)
def test_a_query_that_runs_too_long_is_stopped(
    client: Client, sql: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(analytics.QUERY_SETTINGS, "max_execution_time", 1)
    with pytest.raises(QueryFailed, match="Timeout exceeded"):
        query(client, sql, A)


def test_a_query_that_fails_part_way_leaves_nothing_for_the_next_read(client: Client) -> None:
    """chDB keeps the unread rest of a result that failed part way and hands it to the next
    query on the client: the sink answers every tenant on one client."""
    failing = "SELECT e.payload, throwIf(n.number = 90000) FROM events AS e, numbers(100000) AS n"
    with pytest.raises(QueryFailed, match="throwIf"):
        query(client, failing, A)
    result = query(client, "SELECT count() FROM events", B)
    assert result.rows == [[len(HISTORY_B)]]


def test_a_query_the_engine_began_but_could_not_finish_is_audited_as_failed(
    client: Client,
) -> None:
    """Its error can quote a value it read (`Cannot parse string '...'`): it is a read."""
    sql = "SELECT toUInt8(subject_id) FROM events"
    with pytest.raises(QueryFailed, match="Cannot parse string 'patient-1'"):
        query(client, sql, A, actor="auditor-failed")
    with pytest.raises(QueryFailed, match="Syntax error"):
        query(client, "SELECT FROM WHERE", A, actor="auditor-failed")
    rows = _audit_rows(client, "auditor-failed")
    assert [(r["tenant_id"], r["action"], r["detail"]) for r in rows] == [
        (A, "query_failed", "sha256:" + hashlib.sha256(sql.encode()).hexdigest())
    ]


HOSTILE = [
    "SELECT * FROM system.query_log",
    "SELECT * FROM `SYSTEM`.tables",
    "SELECT * FROM Uac.events",
    "SELECT * FROM \u201cuac\u201d.events",
    "SELECT count() FROM events WHERE subject_id IN (SELECT subject_id FROM leaky)",
    "SELECT count() FROM events WHERE subject_id IN leaky",
    "SELECT arrayMap(x -> (SELECT any(subject_id) FROM leaky), [1])",
    "SELECT transform(1, [1], [(SELECT any(subject_id) FROM leaky)], 'x')",
    "WITH RECURSIVE r AS (SELECT 'x' AS s UNION ALL SELECT subject_id FROM leaky WHERE 0)"
    " SELECT * FROM r",
    "SELECT * FROM `Remote`('127.0.0.1', 'uac', 'events')",
    "SELECT * FROM view(SELECT * FROM leaky)",
    "SELECT * FROM numbers(1) AS n JOIN viewIfPermitted(SELECT * FROM leaky ELSE null('x String'))"
    " AS v ON 1",
    "SELECT * FROM generateRandom('a String') LIMIT 1",
    "SELECT * FROM format(JSONEachRow, '{\"a\": 1}')",
    "SELECT * FROM python('frame')",
    "SELECT * FROM cosn('http://127.0.0.1:1/bucket/key', 'CSV')",
    "SELECT * FROM _temporary_and_external_tables._tmp_x",
    "SELECT * FROM events /* ; */ ; DROP TABLE events",
    "SELECT 1 # comment\n SETTINGS max_threads = 3",
]


@pytest.mark.parametrize("sql", HOSTILE)
def test_a_hostile_query_is_refused(client: Client, sql: str) -> None:
    with pytest.raises(QueryRefused) as refused:
        query(client, sql, A)
    assert B_SUBJECT not in str(refused.value)


OUTSIDE_STATE = [
    pytest.param(
        "SELECT getServerSetting('path')",
        "'getserversetting'",
        id="given the server's configuration then refused",
    ),
    pytest.param(
        "SELECT getMergeTreeSetting('index_granularity')",
        "'getmergetreesetting'",
        id="given the storage engine's configuration then refused",
    ),
    pytest.param(
        "SELECT hasColumnInTable('uac', 'events', 'payload')",
        "'hascolumnintable'",
        id="given a probe of the catalog then refused",
    ),
    pytest.param(
        "SELECT filesystemAvailable()",
        "'filesystemavailable'",
        id="given the server's disk then refused",
    ),
    pytest.param(
        "SELECT aiGenerate(subject_id) FROM events",
        "'aigenerate'",
        id="given a function that sends rows to an AI service then refused",
    ),
    pytest.param(
        "SELECT `AIClassify`(subject_id, ['a']) FROM events",
        "'aiclassify'",
        id="given a quoted AI function in upper case then refused",
    ),
    pytest.param(
        "SELECT regionToName(toUInt32(1))",
        "'regiontoname'",
        id="given an embedded dictionary then refused",
    ),
    pytest.param(
        "SELECT generateSerialID('counter')",
        "'generateserialid'",
        id="given a function that writes a counter to Keeper then refused",
    ),
    pytest.param(
        "SELECT addressToSymbol(toUInt64(1))",
        "'addresstosymbol'",
        id="given an introspection of the server's binary then refused",
    ),
]


@pytest.mark.parametrize(("sql", "message"), OUTSIDE_STATE)
def test_given_a_function_that_reads_or_writes_outside_the_relations_then_refused(
    client: Client, sql: str, message: str
) -> None:
    with pytest.raises(QueryRefused, match=message):
        query(client, sql, A)


def test_given_the_parse_of_a_function_outside_the_relations_then_the_parser_refuses_it_alone(
    client: Client,
) -> None:
    lines = [str(r[0]) for r in client.query("EXPLAIN AST SELECT aiEmbed('x')").result_rows]
    with pytest.raises(QueryRefused, match="'aiEmbed'"):
        sql_guard.check_parsed(lines)


PARSER_OPERATORS = frozenset({"lambda", "exists", "grouping"})
"""Names the parser gives operators (`x -> y`, `EXISTS (...)`, `grouping(...)`) that
system.functions does not list: the only allowlist entries the engine need not know."""


def _engine_functions(client: Client) -> list[tuple[str, bool, str]]:
    result = client.query("SELECT name, is_aggregate, alias_to FROM system.functions")
    return [
        (str(name), bool(aggregate), str(alias)) for name, aggregate, alias in result.result_rows
    ]


def test_every_function_on_the_allowlist_is_one_the_engine_knows(client: Client) -> None:
    """So a typo cannot creep into the list (it would allow a name no engine has, yet)."""
    known = {name.lower() for name, _, _ in _engine_functions(client)}
    unknown = sql_guard.ANALYST_FUNCTIONS.functions - known
    assert unknown == PARSER_OPERATORS


def test_the_allowlist_marks_exactly_the_engines_aggregate_functions(client: Client) -> None:
    allowed = sql_guard.ANALYST_FUNCTIONS
    aggregates = {name.lower() for name, aggregate, _ in _engine_functions(client) if aggregate}
    assert allowed.aggregates == allowed.functions & aggregates


def test_a_function_and_its_aliases_are_on_the_allowlist_together(client: Client) -> None:
    allowed = sql_guard.ANALYST_FUNCTIONS.functions
    split = [
        (name, alias)
        for name, _, alias in _engine_functions(client)
        if alias and (name.lower() in allowed) != (alias.lower() in allowed)
    ]
    assert split == []


def test_no_word_let_through_before_a_parenthesis_is_a_function_off_the_allowlist(
    client: Client,
) -> None:
    refused = {
        name.lower()
        for name, _, _ in _engine_functions(client)
        if not sql_guard.ANALYST_FUNCTIONS.allows(name)
    }
    assert sql_guard.SQL_WORDS_BEFORE_PARENTHESES & refused == set()


SERVER_FUNCTIONS = [
    "hostName()",
    "`version`()",
    "\"getSetting\"('max_threads')",
    "CURRENTUSER()",
    "`UpTime`()",
    "serverUUID()",
    "FQDN()",
    "user()",
    "readServerSecrets(1)",
    "hostNameIf(1)",
    "readServerSecretsState(1)",
]


@pytest.mark.parametrize("call", SERVER_FUNCTIONS)
def test_given_a_function_off_the_allowlist_then_refused(client: Client, call: str) -> None:
    with pytest.raises(QueryRefused, match="is not among the functions analysts may call"):
        query(client, f"SELECT {call} AS x FROM events", A)  # noqa: S608 (the refusal is the point)


def test_given_the_parse_of_an_apply_transformer_then_the_parser_refuses_it_alone(
    client: Client,
) -> None:
    """`APPLY(f)` calls `f` on every column by its bare name: no `Function` node shows it."""
    sql = "SELECT * APPLY(hostName) FROM numbers(1)"
    lines = [str(r[0]) for r in client.query(f"EXPLAIN AST {sql}").result_rows]
    with pytest.raises(QueryRefused, match="APPLY is not allowed"):
        sql_guard.check_parsed(lines)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        pytest.param(
            "SELECT arrayReduce('flameGraph', [[toUInt64(1)]])",
            "'flameGraph' is not among the functions",
            id="given arrayReduce of an aggregate off the allowlist then refused",
        ),
        pytest.param(
            "SELECT arrayReduceInRanges('aggThrow', [(1, 1)], [1])",
            "'aggThrow' is not among the functions",
            id="given arrayReduceInRanges of an aggregate off the allowlist then refused",
        ),
        pytest.param(
            "SELECT initializeAggregation(concat('sum', 'State'), 1)",
            "as a string literal",
            id="given an aggregate named by an expression then refused",
        ),
    ],
)
def test_given_an_aggregate_function_named_in_a_string_then_it_must_be_on_the_allowlist(
    client: Client, sql: str, message: str
) -> None:
    with pytest.raises(QueryRefused, match=message):
        query(client, sql, A)


def test_an_allowed_aggregate_function_named_in_a_string_runs(client: Client) -> None:
    sql = (
        "SELECT arrayReduce('quantile(0.5)', [1, 2, 3]) AS median,"
        " arrayReduce('uniqExactIf', [1, 1, 2], [1, 1, 0]) AS distinct_kept,"
        " finalizeAggregation(initializeAggregation('sumState', toUInt64(2))) AS total"
    )
    assert query(client, sql, A).rows == [[2.0, 1, 2]]


@pytest.mark.parametrize("call", SERVER_FUNCTIONS)
def test_given_the_parse_of_a_function_off_the_allowlist_then_the_parser_refuses_it_alone(
    client: Client, call: str
) -> None:
    lines = [str(r[0]) for r in client.query(f"EXPLAIN AST SELECT {call} AS x").result_rows]
    with pytest.raises(QueryRefused, match="is not among the functions analysts may call"):
        sql_guard.check_parsed(lines)


def _documented_queries() -> list[Any]:
    """Every analyst query of docs/analyst.md, docs/data-subject.md and README.md (their SQL
    blocks and `uac query "..."` lines) and of the demo's questions."""
    docs = CHECKOUT / "docs"
    found: list[tuple[str, str]] = []
    for source in (docs / "analyst.md", docs / "data-subject.md", CHECKOUT / "README.md"):
        text = source.read_text("utf-8")
        found += [(source.name, block) for block in re.findall(r"```sql\n(.*?)```", text, re.S)]
        found += [
            (source.name, sql)
            for sql in re.findall(r'uac query "([^"]+)"', text)
            if "..." not in sql
        ]
    found += [("demo.py", question[3]) for question in ANALYST_QUESTIONS]
    return [
        pytest.param(sql, id=f"{source}: {' '.join(sql.split())[:60]}") for source, sql in found
    ]


DOCUMENTED = _documented_queries()


def test_the_documented_queries_are_found() -> None:
    assert len(DOCUMENTED) >= 19


@pytest.mark.parametrize("sql", DOCUMENTED)
def test_every_documented_query_passes_the_guard(client: Client, sql: str) -> None:
    query(client, sql, A)


ANALYST_CONSTRUCTS = [
    "SELECT type, countIf(confidence > 0.5) AS sure, uniqExactIf(subject_id, origin != '') AS s,"
    " sumIf(confidence, 1) AS c, avgOrDefaultIf(confidence, 0) AS a, countDistinct(actor) AS d,"
    " quantilesTDigestIf(0.5, 0.9)(confidence, 1) AS q, groupArrayDistinct(origin) AS o,"
    " sumOrNull(confidence) AS n, topK(3)(type) AS t, argMax(event_id, occurred_at) AS last"
    " FROM events GROUP BY type ORDER BY type",
    "SELECT finalizeAggregation(sumMergeState(s)) FROM (SELECT sumState(number) AS s"
    " FROM numbers(3))",
    "SELECT subject_id, occurred_at, row_number() OVER w AS n, rank() OVER w AS r,"
    " dense_rank() OVER w AS dr, lagInFrame(type) OVER w AS previous,"
    " leadInFrame(type) OVER w AS following, first_value(type) OVER w AS first,"
    " sum(confidence) FILTER (WHERE confidence > 0) OVER (PARTITION BY subject_id) AS total"
    " FROM events WINDOW w AS (PARTITION BY subject_id ORDER BY occurred_at)",
    "SELECT CAST(confidence AS Nullable(String)) AS c, confidence::Decimal(10, 2) AS d,"
    " CAST(occurred_at AS DateTime64(3, 'UTC')) AS t, EXTRACT(YEAR FROM occurred_at) AS y,"
    " occurred_at + INTERVAL 1 DAY AS next, toStartOfMonth(occurred_at) AS m,"
    " dateDiff('day', occurred_at, now()) AS age, today() AS day FROM events",
    "SELECT CASE WHEN confidence > 0.5 THEN 'high' ELSE 'low' END AS level,"
    " CASE type WHEN 'FactAsserted' THEN 1 ELSE 0 END AS fact, multiIf(1, 'a', 'b') AS m,"
    " coalesce(supersedes, event_id) AS id, ifNull(valid_until, occurred_at) AS until,"
    " JSONExtractString(payload, 'key') AS k, simpleJSONHas(payload, 'key') AS h,"
    " cityHash64(subject_id) AS h1, sipHash64(subject_id) AS h2, hex(MD5(subject_id)) AS h3,"
    " lower(type) LIKE '%record%' AS l, match(type, '^Fact') AS r,"
    " replaceRegexpAll(type, '[a-z]', '') AS caps, splitByChar('e', type) AS parts FROM events",
    "SELECT arrayMap(x -> x * 2, [1, 2]) AS doubled, arrayFilter(x -> x > 1, [1, 2]) AS big,"
    " (1, 'a').2 AS second, map('a', 1)['a'] AS one, tupleElement((1, 2), 1) AS first,"
    " [1, 2][1] AS head, round(pi(), 2) AS p, toUUID('00000000-0000-0000-0000-000000000000') AS u,"
    " IPv4StringToNum('127.0.0.1') AS ip, rand() >= 0 AS r",
    "WITH abroad (subject, country) AS (SELECT subject_id, destination_country FROM trips)"
    " SELECT subject, count() FROM abroad GROUP BY subject",
    "SELECT count() FROM events WHERE subject_id IN (SELECT subject_id FROM trips)"
    " AND EXISTS (SELECT 1 FROM trips) AND confidence > ALL (SELECT -1)"
    " AND type NOT IN ('x') AND subject_id = ANY (SELECT subject_id FROM events)",
    "SELECT COLUMNS('^subject') FROM events",
    "SELECT a FROM (SELECT 1) AS t (a)",
    "SELECT type, grouping(type) AS g, count() FROM events GROUP BY GROUPING SETS ((type), ())",
    "SELECT * EXCEPT (payload) REPLACE (upper(type) AS type) FROM events LIMIT 1",
]


@pytest.mark.parametrize("sql", ANALYST_CONSTRUCTS)
def test_an_ordinary_analyst_query_passes_every_check_and_runs(client: Client, sql: str) -> None:
    query(client, sql, A)


ENGINE_CHECKS = [
    pytest.param(
        "AST",
        "SELECT arrayMap(((a, b) -> true) AS equals, [1], [1])",
        sql_guard.check_parsed,
        id="given the parse of a named lambda then the parser check refuses it alone",
    ),
    pytest.param(
        "QUERY TREE",
        "WITH `uac.x` AS (SELECT 1 AS a) SELECT a FROM `uac.x`",
        sql_guard.check_resolved,
        id="given the resolution of a WITH table named with a dot then the analyzer refuses it",
    ),
    pytest.param(
        "AST",
        "SELECT * FROM uac.events",
        sql_guard.check_parsed,
        id="given the parse of uac.events then the parser check refuses it alone",
    ),
    pytest.param(
        "AST",
        "SELECT file('/etc/hostname')",
        sql_guard.check_parsed,
        id="given the parse of file() then the parser check refuses it alone",
    ),
    pytest.param(
        "AST",
        "SHOW TABLES",
        sql_guard.check_parsed,
        id="given the parse of SHOW then the parser check refuses it alone",
    ),
    pytest.param(
        "QUERY TREE",
        "SELECT * FROM leaky",
        sql_guard.check_resolved,
        id="given the resolution of a bare non-relation name then the analyzer check refuses it",
    ),
    pytest.param(
        "QUERY TREE",
        "SELECT * FROM merge('uac', '^events$')",
        sql_guard.check_resolved,
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
        client,
        "SELECT prescription_id, drug, active, entered_in_error, voided_event_id "
        "FROM medications ORDER BY 1",
        A,
    )
    assert medications.rows == [
        ["rx-1", "amoxicillin", True, False, None],
        ["rx-2", "ibuprofen", False, True, STOP_2.id],
    ]
    assert {type(flag) for row in medications.rows for flag in row[2:4]} == {bool}
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
        "WITH `recursive` AS (SELECT 1 AS a) SELECT count() FROM `recursive`",
        [[1]],
        id="given a WITH table named recursive in quotes then it is a table, not the keyword",
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


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT event_id, type FROM events WHERE 1 = 0",
        "SELECT event_id, type FROM events LIMIT 0",
        "select event_id, type from events limit 0; -- the columns only",
    ],
)
def test_an_empty_result_still_names_its_columns(client: Client, sql: str) -> None:
    result = query(client, sql, A)
    assert result == analytics.QueryResult(("event_id", "type"), [])


def test_an_engine_error_is_query_failed(client: Client) -> None:
    with pytest.raises(QueryFailed, match="no_such_column"):
        query(client, "SELECT no_such_column FROM events", A)


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        pytest.param(
            "SELECT subject_id, count() FROM events GROUP BY type",
            "(NOT_AN_AGGREGATE)",
            id="given an error the engine found in the built query",
        ),
        pytest.param(
            "SELECT FROM events",
            "failed at position 13 (events)",
            id="given a syntax error then its position in the SQL as written",
        ),
        pytest.param(
            "SELECT *\nFROM events WHERE",
            "(end of query) (line 2, col 18)",
            id="given a query that ends too soon then its own end",
        ),
        pytest.param(
            "SELECT count() FROM events WHERE subject_id IN other.t",
            "Database other does not exist",
            id="given a database that does not exist then that database",
        ),
        pytest.param(
            "WITH trips AS (SELECT * FROM trips WHERE international) SELECT count() FROM trips",
            "`trips` is the name of one of your relations",
            id="given a WITH table named like a relation then the name to change",
        ),
        pytest.param(
            "WITH RECURSIVE alerts AS (SELECT 1 AS i) SELECT i FROM alerts",
            "`alerts` is the name of one of your relations",
            id="given a recursive WITH table named like a relation then the name to change",
        ),
        pytest.param(
            "WITH x AS (SELECT 1 AS i), x AS (SELECT 2 AS i) SELECT i FROM x",
            "CTE with name x already exists",
            id="given two WITH tables of one name then the engine's words",
        ),
    ],
)
def test_an_engine_error_names_the_analysts_sql_never_the_query_built_around_it(
    client: Client, sql: str, said: str
) -> None:
    with pytest.raises(QueryFailed) as failed:
        query(client, sql, A)
    message = str(failed.value)
    assert said in message
    assert "uac." not in message
    assert "Native" not in message
    assert len(message) < 1500


def test_numbers_json_cannot_spell_are_null(client: Client) -> None:
    result = query(client, "SELECT nan AS a, inf AS b, -inf AS c, [nan, 1.5] AS d", A)
    assert result.rows == [[None, None, None, [None, 1.5]]]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count() FROM events FORMAT JSON",
        "SELECT count() FROM events FORMAT Native",
        "SELECT count() FROM events format native",
    ],
)
def test_a_format_clause_is_refused(client: Client, sql: str) -> None:
    with pytest.raises(QueryRefused, match="FORMAT clause"):
        query(client, sql, A)


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


def test_given_an_alerts_table_of_a_release_before_v2_then_the_schema_adds_the_finding(
    client: Client,
) -> None:
    rows = client.query("SELECT count() FROM uac.alerts").result_rows[0][0]
    client.command("ALTER TABLE uac.alerts DROP COLUMN duplicate_therapy")
    apply_schema(client)
    column = client.query(
        "SELECT type FROM system.columns WHERE database = 'uac' AND table = 'alerts' "
        "AND name = 'duplicate_therapy'"
    )
    assert column.result_rows == [("Nullable(String)",)]
    kept = client.query("SELECT count(), countIf(duplicate_therapy IS NULL) FROM uac.alerts")
    assert kept.result_rows == [(rows, rows)]


def test_given_an_alerts_table_of_a_release_before_v3_then_its_alerts_read_as_care(
    client: Client,
) -> None:
    rows = client.query("SELECT count() FROM uac.alerts").result_rows[0][0]
    client.command("ALTER TABLE uac.alerts DROP COLUMN purpose")
    apply_schema(client)
    kept = client.query("SELECT count(), countIf(purpose = 'care') FROM uac.alerts")
    assert kept.result_rows == [(rows, rows)]
    assert query(client, "SELECT count() FROM alerts", A).rows == [[rows_of_tenant(client, A)]]


def rows_of_tenant(client: Client, tenant: str) -> int:
    result = client.query(
        "SELECT count() FROM uac.alerts WHERE tenant_id = {t:String}", parameters={"t": tenant}
    )
    return int(result.result_rows[0][0])


def test_tenant_is_the_first_sort_key_everywhere(client: Client) -> None:
    result = client.query("SELECT name, sorting_key FROM system.tables WHERE database = 'uac'")
    assert sorted(name for name, _ in result.result_rows) == sorted(COLUMNS)
    assert all(key.startswith("tenant_id,") for _, key in result.result_rows)


@pytest.mark.parametrize(
    "sql", ["SELECT count() FROM allergies", "SELECT 1"], ids=["a relation", "no relation"]
)
def test_given_no_sink_ever_started_when_queried_then_told_the_sink_creates_the_tables(
    sql: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UAC_")}
    completed = subprocess.run(
        [sys.executable, "-m", "streams.cli", "query", sql, "--tenant", "clinic-a"],
        env=env | {"UAC_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 3
    assert "ClickHouse has no `uac` database yet: the sink creates it" in completed.stderr
    assert "Traceback" not in completed.stderr


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


# ------------------------------------------------------------------------------------------------
# Purpose-bound reads
# ------------------------------------------------------------------------------------------------

P = "clinic-purpose"
RESEARCH = "research"
PAST, FUTURE = datetime(2024, 1, 2, tzinfo=UTC), datetime(2999, 1, 1, tzinfo=UTC)


def _claim(kind: str, name: str, subject: str, **envelope: Any) -> Event:
    payloads: dict[str, dict[str, Any]] = {
        "AllergyRecorded": {"allergy_id": name},
        "MedicationPrescribed": {"prescription_id": name},
        "TravelRecorded": {"trip_id": name},
        "PreferenceStated": {"key": name},
    }
    return make_event(kind, name, tenant=P, subject=subject, payload=payloads[kind], **envelope)


def _consent(subject: str, *, special_category: bool, tenant: str = P, **envelope: Any) -> Event:
    payload = {"purpose": RESEARCH, "granted": True, "special_category": special_category}
    return make_event(
        "ConsentChanged",
        f"consent-{subject}",
        tenant=tenant,
        subject=subject,
        payload=payload,
        **envelope,
    )


PURPOSE_HISTORIES = {
    "consenting": [
        _consent("consenting", special_category=True),
        _claim("AllergyRecorded", "c-allergy", "consenting", purpose=RESEARCH),
        _claim("MedicationPrescribed", "c-rx", "consenting", purpose=RESEARCH),
        _claim(
            "PreferenceStated",
            "c-special",
            "consenting",
            purpose=RESEARCH,
            sensitivity="special_category",
        ),
        _claim("TravelRecorded", "c-trip", "consenting", purpose=RESEARCH),
    ],
    "silent": [
        _claim("AllergyRecorded", "s-allergy", "silent", purpose=RESEARCH),
        _claim("AllergyRecorded", "s-care-allergy", "silent"),
        _claim("PreferenceStated", "s-plain", "silent", purpose=RESEARCH),
        _claim(
            "PreferenceStated",
            "s-special",
            "silent",
            purpose=RESEARCH,
            sensitivity="special_category",
        ),
        _claim("TravelRecorded", "s-trip", "silent", purpose=RESEARCH),
        _claim("TravelRecorded", "s-expired-trip", "silent", valid_until=PAST),
        _claim("TravelRecorded", "s-open-trip", "silent", valid_until=FUTURE),
        _claim("MedicationPrescribed", "s-expired-rx", "silent", valid_until=PAST),
        _claim("AllergyRecorded", "s-pending-allergy", "silent", valid_from=FUTURE),
        _claim("MedicationPrescribed", "s-pending-rx", "silent", valid_from=FUTURE),
    ],
    "lapsed": [
        _consent("lapsed", special_category=True, valid_until=PAST),
        _claim("AllergyRecorded", "l-allergy", "lapsed", purpose=RESEARCH),
    ],
    "partial": [
        _consent("partial", special_category=False),
        _claim("AllergyRecorded", "p-allergy", "partial", purpose=RESEARCH),
    ],
}


def _purpose_alert(subject: str, offset: int, purpose: str) -> Row:
    alert_id = uuid5(NAMESPACE_URL, f"alert/{P}/{subject}/{purpose}")
    alert = Alert.model_validate(
        {
            "purpose": purpose,
            "lifecycle_id": uuid5(alert_id, "raised"),
            "alert_id": alert_id,
            "tenant_id": P,
            "subject_id": subject,
            "rule_id": "drug-allergy",
            "rule_version": 1,
            "status": "raised",
            "severity": "critical",
            "title": subject,
            "detail": "",
            "cause": (subject,),
            "evidence": (),
            "trigger_event_id": "e",
            "occurred_at": T0,
        }
    )
    return alert_row(alert, Coordinates("uac.alerts", 0, offset), NOW)


def _store_histories(
    client: Client, histories: dict[str, list[Event]], first_offset: int, batch: str
) -> None:
    """Each subject's events as accepted and its state as its current checkpoint."""
    events = [event for history in histories.values() for event in history]
    event_rows, _ = _accepted(events, first_offset=first_offset)
    write_batch(client, "events", EVENT_COLUMNS, event_rows, f"{batch}-events")
    checkpoints = [
        _checkpoint(replay(history), first_offset + number)
        for number, history in enumerate(histories.values())
    ]
    write_batch(client, "state_checkpoints", CHECKPOINT_COLUMNS, checkpoints, f"{batch}-states")


@pytest.fixture(scope="module")
def purposes(client: Client) -> str:
    """Tenant P: a subject who consented to special-category research use, one who did not,
    and one whose consent leaves special categories out."""
    _store_histories(client, PURPOSE_HISTORIES, 1000, "purpose")
    events = [event for history in PURPOSE_HISTORIES.values() for event in history]
    _, decisions = _accepted(events, first_offset=1000)
    write_batch(client, "gate_decisions", DECISION_COLUMNS, decisions, "purpose-decisions")
    alerts = [
        _purpose_alert(subject, 1000 + 2 * n + k, purpose)
        for n, subject in enumerate(PURPOSE_HISTORIES)
        for k, purpose in enumerate(("care", RESEARCH))
    ]
    write_batch(client, "alerts", ALERT_COLUMNS, alerts, "purpose-alerts")
    return P


def test_a_with_table_named_as_a_stored_table_cannot_forge_a_consent_in_force(
    client: Client, purposes: str
) -> None:
    """`lapsed` consented to research, but the consent has lapsed: its research alert is not
    shown. A WITH table named `uac.events` holding that consent's event with no end stood in
    for the stored events where the relations look for the consents in force."""
    (event_id,) = query(
        client, "SELECT event_id FROM consents WHERE subject_id = 'lapsed'", P, RESEARCH
    ).rows[0]
    stand_in = (
        f"SELECT '{P}' AS tenant_id, 'lapsed' AS subject_id, 'ConsentChanged' AS type, "
        f"toUUID('{event_id}') AS event_id, NULL AS valid_from, NULL AS valid_until"
    )
    forged = f"WITH `uac.events` AS ({stand_in}) SELECT subject_id FROM alerts"  # noqa: S608
    assert "lapsed" not in _names(client, "SELECT subject_id FROM alerts", RESEARCH)
    with pytest.raises(QueryRefused, match="WITH table needs a plain name"):
        query(client, forged, P, RESEARCH)


NAMED_LAMBDAS = [
    pytest.param(
        "WITH (a, b) -> true AS equals SELECT DISTINCT tenant_id FROM events",
        id="given a lambda named equals then it is refused (it lifted the tenant filter)",
    ),
    pytest.param(
        "SELECT DISTINCT tenant_id, arrayMap(((x, y) -> 1) AS equals, [1], [1]) FROM alerts",
        id="given a lambda named equals inside a call then it is refused too",
    ),
    pytest.param(
        "WITH (a, b) -> true AS f, f AS equals SELECT DISTINCT tenant_id FROM events",
        id="given a lambda named through another name then it is refused",
    ),
    pytest.param(
        "WITH lambda(tuple(a, b, c, d, e), true) AS JSONExtractBool "
        "SELECT DISTINCT subject_id FROM alerts",
        id="given a lambda named JSONExtractBool then it is refused (it forged consents)",
    ),
]


@pytest.mark.parametrize("sql", NAMED_LAMBDAS)
def test_a_named_lambda_is_refused(client: Client, purposes: str, sql: str) -> None:
    """The engine calls a named lambda in place of the function of its name, in the relations'
    definitions too: `(a, b) -> true AS equals` read every tenant's events."""
    with pytest.raises(QueryRefused, match="a lambda may not be given a name"):
        query(client, sql, P, RESEARCH)


def test_an_unnamed_lambda_and_a_constant_named_as_a_function_are_allowed(
    client: Client, purposes: str
) -> None:
    sql = (
        "WITH 1 AS equals SELECT DISTINCT tenant_id, arrayMap(x -> x + equals, [1]) AS m "
        "FROM events"
    )
    assert query(client, sql, P, RESEARCH).rows == [[P, [2]]]


def _names(client: Client, sql: str, purpose: str | None, **options: Any) -> list[Any]:
    return sorted(row[0] for row in query(client, sql, P, purpose, **options).rows)


EVENT_NAMES = """SELECT arrayStringConcat(arrayMap(
    field -> JSONExtractString(payload, field), ['allergy_id', 'prescription_id', 'trip_id', 'key']))
FROM events WHERE type != 'ConsentChanged'"""
"""The claim name of each event a read sees (consent changes, recorded for care, left out)."""

HEALTH_DECISIONS = """SELECT DISTINCT coalesce(subject_id, '(not named)') FROM gate_decisions
WHERE event_type IN ('AllergyRecorded', 'MedicationPrescribed')"""
"""Whom the decisions about allergy and prescription records name."""

PURPOSE_CASES = [
    pytest.param(
        HEALTH_DECISIONS,
        RESEARCH,
        {},
        ["(not named)", "consenting"],
        id="given research then decisions about health records name only the consenting subject",
    ),
    pytest.param(
        HEALTH_DECISIONS,
        "care",
        {},
        ["consenting", "lapsed", "partial", "silent"],
        id="given care (exempt) then decisions about health records name every subject",
    ),
    pytest.param(
        "SELECT DISTINCT subject_id FROM gate_decisions WHERE event_type = 'TravelRecorded'",
        RESEARCH,
        {},
        ["consenting", "silent"],
        id="given research then decisions about other records name their subjects",
    ),
    pytest.param(
        EVENT_NAMES,
        RESEARCH,
        {},
        ["c-allergy", "c-rx", "c-special", "c-trip", "s-plain", "s-trip"],
        id="given research then events recorded for research, special ones only with consent",
    ),
    pytest.param(
        EVENT_NAMES,
        None,
        {},
        [
            "s-care-allergy",
            "s-expired-rx",
            "s-expired-trip",
            "s-open-trip",
            "s-pending-allergy",
            "s-pending-rx",
        ],
        id="given no purpose then the default care, exempt, and history keeps every claim",
    ),
    pytest.param(
        EVENT_NAMES,
        RESEARCH,
        {"exempt_purposes": frozenset({RESEARCH})},
        [
            "c-allergy",
            "c-rx",
            "c-special",
            "c-trip",
            "l-allergy",
            "p-allergy",
            "s-allergy",
            "s-plain",
            "s-special",
            "s-trip",
        ],
        id="given research exempt for the tenant then every research claim",
    ),
    pytest.param(
        EVENT_NAMES,
        "care",
        {"exempt_purposes": frozenset()},
        ["s-expired-trip", "s-open-trip"],
        id="given care without exemption and no care consent then no health claim",
    ),
    pytest.param(
        "SELECT allergy_id FROM allergies",
        RESEARCH,
        {},
        ["c-allergy"],
        id="given research then only the allergies of the subject whose consent is in force",
    ),
    pytest.param(
        "SELECT allergy_id FROM allergies",
        "care",
        {},
        ["s-care-allergy"],
        id="given care then allergies recorded for care and in force (not from next year)",
    ),
    pytest.param(
        "SELECT trip_id FROM trips",
        "care",
        {},
        ["s-open-trip"],
        id="given care then trips whose validity has ended are left out of the current view",
    ),
    pytest.param(
        "SELECT trip_id FROM trips",
        RESEARCH,
        {},
        ["c-trip", "s-trip"],
        id="given research then trips recorded for research (not special) of both subjects",
    ),
    pytest.param(
        "SELECT prescription_id FROM medications",
        "care",
        {},
        [],
        id="given care then prescriptions whose validity has ended or not begun are left out",
    ),
    pytest.param(
        "SELECT prescription_id FROM medications",
        RESEARCH,
        {},
        ["c-rx"],
        id="given research then the consenting subject's prescription",
    ),
    pytest.param(
        "SELECT subject_id FROM alerts",
        RESEARCH,
        {},
        ["consenting"],
        id="given research then research alerts only of the subject whose consent is in force",
    ),
    pytest.param(
        "SELECT subject_id FROM open_alerts",
        "care",
        {},
        ["consenting", "lapsed", "partial", "silent"],
        id="given care then every subject's care alert, no research alert (exempt purpose)",
    ),
]


@pytest.mark.parametrize(("sql", "purpose", "options", "expected"), PURPOSE_CASES)
def test_relations_are_bound_to_the_purpose_of_the_read(
    client: Client,
    purposes: str,
    sql: str,
    purpose: str | None,
    options: dict[str, Any],
    expected: list[str],
) -> None:
    assert _names(client, sql, purpose, **options) == expected


def test_decisions_about_health_records_are_counted_whole_whatever_the_purpose(
    client: Client, purposes: str
) -> None:
    counts = (
        "SELECT event_type, count() FROM gate_decisions GROUP BY event_type ORDER BY event_type"
    )
    assert query(client, counts, P, RESEARCH).rows == query(client, counts, P, "care").rows


def test_a_decision_whose_subject_is_withheld_keeps_nothing_that_would_name_it(
    client: Client, purposes: str
) -> None:
    """Without the event id, the log position, the decision id (a uuid5 of the position) and
    times to the millisecond, a withheld row cannot be joined to a neighbouring decision of the
    same subject (same partition, the next offset, the same instant)."""
    sql = (
        "SELECT subject_id IS NULL, countIf(event_id IS NULL), "
        "countIf(source_partition IS NULL), countIf(source_offset IS NULL), "
        "countIf(decision_id IS NULL), "
        "countIf(decided_at = toStartOfHour(decided_at) AND ingested_at = toStartOfHour(ingested_at)), "
        "count() FROM gate_decisions WHERE event_type = 'AllergyRecorded' GROUP BY 1 ORDER BY 1"
    )
    named, withheld = query(client, sql, P, RESEARCH).rows
    assert named[1:5] == [0, 0, 0, 0]
    assert withheld[1:6] == [withheld[6]] * 5
    (whole,) = query(client, sql, P, "care").rows
    assert whole[:5] == [False, 0, 0, 0, 0]
    assert whole[6] == named[6] + withheld[6]


def test_the_current_views_say_which_purpose_and_validity_they_hold(
    client: Client, purposes: str
) -> None:
    result = query(client, "SELECT trip_id, purpose, valid_until FROM trips", P, "care")
    assert result.rows == [["s-open-trip", "care", "2999-01-01T00:00:00.000Z"]]


@pytest.mark.parametrize(
    "sql",
    [
        pytest.param("SELECT * FROM state_checkpoints WHERE 1 = 0", id="given state_checkpoints"),
        pytest.param("SELECT * FROM current_state WHERE 1 = 0", id="given current_state"),
    ],
)
def test_checkpoints_do_not_expose_the_whole_document(client: Client, sql: str) -> None:
    columns = query(client, sql, A).columns
    assert "state_json" not in columns
    assert "state_hash" in columns


def test_the_health_event_types_are_those_the_gate_treats_as_special() -> None:
    assert set(query_relations.HEALTH_EVENT_TYPES) == {
        "AllergyRecorded",
        "AllergyStatusChanged",
        "MedicationPrescribed",
        "MedicationStopped",
        "AlertAcknowledged",
    }


# ------------------------------------------------------------------------------------------------
# Current preferences and facts
# ------------------------------------------------------------------------------------------------

C = "clinic-claims"


def _held(kind: str, name: str, subject: str, key: str, value: Any, **envelope: Any) -> Event:
    payload = {"key": key, "value": value}
    return make_event(kind, name, tenant=C, subject=subject, payload=payload, **envelope)


CLAIM_HISTORIES = {
    "consenting": [
        _consent("consenting", special_category=True, tenant=C),
        _held(
            "FactAsserted",
            "c-religion",
            "consenting",
            "religion",
            "quaker",
            purpose=RESEARCH,
            sensitivity="special_category",
        ),
        _held(
            "PreferenceStated",
            "c-newsletter",
            "consenting",
            "newsletter",
            "weekly",
            purpose=RESEARCH,
        ),
    ],
    "silent": [
        _held("PreferenceStated", "s-vegetarian", "silent", "diet", "vegetarian"),
        _held("PreferenceStated", "s-vegan", "silent", "diet", "vegan", at=timedelta(days=30)),
        _held("PreferenceStated", "s-aisle", "silent", "seat", "aisle"),
        _held("PreferenceStated", "s-window", "silent", "seat", "window", at=timedelta(days=1)),
        _held(
            "PreferenceStated", "s-esperanto", "silent", "language", "esperanto", purpose=RESEARCH
        ),
        _held("PreferenceStated", "s-dutch", "silent", "language", "dutch", at=timedelta(days=30)),
        _held(
            "PreferenceStated", "s-newsletter", "silent", "newsletter", "monthly", purpose=RESEARCH
        ),
        _held(
            "FactAsserted",
            "s-religion",
            "silent",
            "religion",
            "quaker",
            purpose=RESEARCH,
            sensitivity="special_category",
        ),
        _held("FactAsserted", "s-weight", "silent", "weight_kg", 72.5),
        _held("FactAsserted", "s-smoker", "silent", "smoker", False),
        _held("FactAsserted", "s-address", "silent", "address", "old street", valid_until=PAST),
        _held("FactAsserted", "s-employer", "silent", "employer", "acme", valid_until=FUTURE),
        _held("FactAsserted", "s-pension", "silent", "pension_fund", "abp", valid_from=FUTURE),
        _held("FactAsserted", "s-insurer", "silent", "insurer", "acme"),
        _held(
            "FactAsserted", "s-new-insurer", "silent", "insurer", "initech", at=timedelta(days=40)
        ),
        make_event(
            "ClaimRetracted",
            "s-retraction",
            tenant=C,
            subject="silent",
            at=timedelta(days=41),
            payload={"claim_id": event_id("s-new-insurer")},
        ),
    ],
}


@pytest.fixture(scope="module")
def held_claims(client: Client) -> str:
    """Tenant C: a subject who consented to special-category research use and one who did not,
    with preferences and facts restated, disputed, told for research, special, expired."""
    _store_histories(client, CLAIM_HISTORIES, 4000, "held-claims")
    return C


def _held_rows(client: Client, sql: str, purpose: str = "care") -> list[list[Any]]:
    return query(client, sql, C, purpose).rows


def test_a_reversed_preference_shows_only_the_value_the_fold_holds_with_its_event(
    client: Client, held_claims: str
) -> None:
    sql = (
        "SELECT value, value_json, event_id, recorded_at, needs_confirmation FROM preferences "
        "WHERE subject_id = 'silent' AND key = 'diet'"
    )
    assert _held_rows(client, sql) == [
        ["vegan", '"vegan"', event_id("s-vegan"), "2024-01-31T09:00:00.000Z", None]
    ]


def test_a_reversal_that_needs_confirmation_shows_the_held_value_and_the_conflict(
    client: Client, held_claims: str
) -> None:
    document = state_document(replay(CLAIM_HISTORIES["silent"]))
    conflict = document["preferences"]["care"]["seat"]["needs_confirmation"]
    assert conflict is not None
    sql = (
        "SELECT value, value_json, event_id, needs_confirmation FROM preferences "
        "WHERE subject_id = 'silent' AND key = 'seat'"
    )
    assert _held_rows(client, sql) == [["aisle", '"aisle"', event_id("s-aisle"), conflict]]


def test_a_value_told_for_another_purpose_does_not_show_through_a_later_claim(
    client: Client, held_claims: str
) -> None:
    result = query(client, "SELECT * FROM preferences WHERE key = 'language'", C, "care")
    assert [row[result.columns.index("value")] for row in result.rows] == ["dutch"]
    assert "esperanto" not in _text(result)
    assert "history" not in result.columns
    research = query(client, "SELECT value FROM preferences WHERE key = 'language'", C, RESEARCH)
    assert research.rows == [["esperanto"]]


def test_a_retracted_claim_gives_way_to_the_value_the_fold_holds_again(
    client: Client, held_claims: str
) -> None:
    sql = "SELECT value, event_id, needs_confirmation FROM facts WHERE key = 'insurer'"
    assert _held_rows(client, sql) == [["acme", event_id("s-insurer"), None]]


def test_facts_hold_numbers_and_booleans_as_text_and_as_json(
    client: Client, held_claims: str
) -> None:
    sql = (
        "SELECT key, value, value_json, origin, confidence FROM facts "
        "WHERE key IN ('weight_kg', 'smoker') ORDER BY key"
    )
    assert _held_rows(client, sql) == [
        ["smoker", "false", "false", "explicit_statement", 1.0],
        ["weight_kg", "72.5", "72.5", "explicit_statement", 1.0],
    ]


# ------------------------------------------------------------------------------------------------
# Current consents
# ------------------------------------------------------------------------------------------------

D, D_OTHER = "clinic-consents", "clinic-consents-other"
D_EDGE, D_ERASED = "clinic-consents-edge", "clinic-consents-erased"


def _consent_of(
    subject: str, name: str, purpose: str, granted: bool, tenant: str = D, **envelope: Any
) -> Event:
    payload = {"purpose": purpose, "granted": granted, "special_category": granted}
    return make_event(
        "ConsentChanged", name, tenant=tenant, subject=subject, payload=payload, **envelope
    )


CONSENT_HISTORIES = {
    "granted": [
        _consent_of("granted", "g-research", RESEARCH, True, source_ref="form-17"),
        _consent_of("granted", "g-marketing", "marketing", False),
    ],
    "withdrawn": [
        _consent_of("withdrawn", "w-research", RESEARCH, True),
        _consent_of("withdrawn", "w-research-off", RESEARCH, False, at=timedelta(days=3)),
    ],
    "lapsed": [_consent_of("lapsed", "l-research", RESEARCH, True, valid_until=PAST)],
    "marketing-only": [_consent_of("marketing-only", "m-marketing", "marketing", True)],
}


OTHER_CONSENT_HISTORIES = {
    "granted": [
        _consent_of("granted", "g-research", RESEARCH, False, D_OTHER, source_ref="form-other")
    ],
    "lapsed": [_consent_of("lapsed", "l-research", RESEARCH, True, D_OTHER)],
}
"""Tenant D_OTHER: subjects of the same ids as D's, consent events of the same ids, told
otherwise."""


@pytest.fixture(scope="module")
def consents(client: Client) -> str:
    """Tenant D: consents to research granted, withdrawn, lapsed, and one for marketing only;
    tenant D_OTHER: the same subject and event ids with other consents."""
    _store_histories(client, CONSENT_HISTORIES, 5000, "consents")
    _store_histories(client, OTHER_CONSENT_HISTORIES, 5100, "consents-other")
    return D


def test_a_read_sees_each_subjects_consent_for_its_own_purpose_only(
    client: Client, consents: str
) -> None:
    sql = (
        "SELECT subject_id, purpose, granted, special_category, event_id, in_force, valid_until, "
        "source_ref FROM consents ORDER BY subject_id"
    )
    assert query(client, sql, D, RESEARCH).rows == [
        ["granted", RESEARCH, True, True, event_id("g-research"), True, None, "form-17"],
        ["lapsed", RESEARCH, True, True, event_id("l-research"), False, plain(PAST), None],
        ["withdrawn", RESEARCH, False, False, event_id("w-research-off"), True, None, None],
    ]
    marketing = query(client, "SELECT subject_id, granted FROM consents ORDER BY 1", D, "marketing")
    assert marketing.rows == [["granted", False], ["marketing-only", True]]


@pytest.mark.parametrize(
    "exempt_purpose",
    [
        pytest.param("care", id="given a care read, exempt, then no research or marketing consent"),
        pytest.param("audit", id="given an audit read, exempt, then no consent of another purpose"),
    ],
)
def test_a_consent_exempt_purpose_sees_no_consents_of_other_purposes(
    client: Client, consents: str, exempt_purpose: str
) -> None:
    exempt = frozenset({exempt_purpose})
    assert query(client, "SELECT * FROM consents", D, exempt_purpose, exempt).rows == []


CONSENTS_OF_TENANTS = [
    pytest.param(
        D,
        [
            ["granted", True, True, "form-17"],
            ["lapsed", True, False, None],
            ["withdrawn", False, True, None],
        ],
        id="given tenant D then its consents only, with the provenance of its own events",
    ),
    pytest.param(
        D_OTHER,
        [["granted", False, True, "form-other"], ["lapsed", True, True, None]],
        id="given another tenant with the same subject and event ids then its own consents only",
    ),
    pytest.param(A, [], id="given a tenant that recorded no consent then no row"),
]


@pytest.mark.parametrize(("tenant", "expected"), CONSENTS_OF_TENANTS)
def test_consents_are_the_tenants_own(
    client: Client, consents: str, tenant: str, expected: list[list[Any]]
) -> None:
    sql = "SELECT subject_id, granted, in_force, source_ref FROM consents ORDER BY subject_id"
    assert query(client, sql, tenant, RESEARCH).rows == expected


def test_consent_flags_are_booleans(client: Client, consents: str) -> None:
    sql = "SELECT granted, special_category, in_force FROM consents WHERE subject_id = 'granted'"
    assert json.dumps(query(client, sql, D, RESEARCH).rows) == "[[true, true, true]]"


def test_subjects_whose_consents_share_an_event_id_each_get_their_own_consent_and_legal_basis(
    client: Client,
) -> None:
    """The gate refuses a repeated event id within a subject only: two subjects may hold one.
    twin-b's consent has lapsed; twin-a's, of the same event id, has not."""
    allergy = make_event(
        "AllergyRecorded", "twin-b-allergy", tenant=D_EDGE, subject="twin-b", purpose=RESEARCH
    )
    histories = {
        "twin-a": [_consent_of("twin-a", "twin", RESEARCH, True, D_EDGE, source_ref="form-a")],
        "twin-b": [
            _consent_of(
                "twin-b", "twin", RESEARCH, True, D_EDGE, valid_until=PAST, source_ref="form-b"
            ),
            allergy,
        ],
    }
    _store_histories(client, histories, 5200, "consent-twins")
    sql = (
        "SELECT subject_id, in_force, valid_until, source_ref FROM consents "
        "WHERE subject_id LIKE 'twin-%' ORDER BY subject_id"
    )
    allergies = "SELECT count() FROM allergies WHERE subject_id = 'twin-b'"

    assert query(client, sql, D_EDGE, RESEARCH).rows == [
        ["twin-a", True, None, "form-a"],
        ["twin-b", False, plain(PAST), "form-b"],
    ]
    assert query(client, allergies, D_EDGE, RESEARCH).rows == [[0]]


def test_in_force_agrees_with_the_legal_basis_while_the_consent_event_is_not_yet_stored(
    client: Client,
) -> None:
    """The sink stores checkpoints and events in separate batches: a checkpoint may arrive
    before the consent event it holds."""
    consent = _consent_of("pending", "pending-research", RESEARCH, True, D_EDGE)
    allergy = make_event(
        "AllergyRecorded", "pending-allergy", tenant=D_EDGE, subject="pending", purpose=RESEARCH
    )
    checkpoint = _checkpoint(replay([consent, allergy]), 5300)
    write_batch(client, "state_checkpoints", CHECKPOINT_COLUMNS, [checkpoint], "pending-state")
    held = (
        "SELECT granted, in_force, valid_until, origin FROM consents WHERE subject_id = 'pending'"
    )
    allergies = "SELECT count() FROM allergies WHERE subject_id = 'pending'"

    assert query(client, held, D_EDGE, RESEARCH).rows == [[True, False, None, None]]
    assert query(client, allergies, D_EDGE, RESEARCH).rows == [[0]]

    event_rows, _ = _accepted([consent], first_offset=5301)
    write_batch(client, "events", EVENT_COLUMNS, event_rows, "pending-consent")

    assert query(client, held, D_EDGE, RESEARCH).rows == [[True, True, None, "explicit_statement"]]
    assert query(client, allergies, D_EDGE, RESEARCH).rows == [[1]]


def test_an_erased_subject_has_no_consents(client: Client) -> None:
    histories = {
        subject: [_consent_of(subject, f"{subject}-research", RESEARCH, True, D_ERASED)]
        for subject in ("erased", "kept")
    }
    _store_histories(client, histories, 5400, "consents-erased")
    sql = "SELECT subject_id FROM consents ORDER BY subject_id"
    assert query(client, sql, D_ERASED, RESEARCH).rows == [["erased"], ["kept"]]

    carry_out_erasure(client, _erasure(D_ERASED, "erased"), lambda: NOW)

    assert query(client, sql, D_ERASED, RESEARCH).rows == [["kept"]]


def test_consents_have_the_documented_columns(client: Client) -> None:
    assert query(client, "SELECT * FROM consents WHERE 1 = 0", A).columns == (
        "tenant_id",
        "subject_id",
        "state_version",
        "purpose",
        "granted",
        "special_category",
        "event_id",
        "recorded_at",
        "valid_from",
        "valid_until",
        "in_force",
        "origin",
        "source_ref",
    )


PREFERENCE_NAMES = "SELECT concat(subject_id, '/', key) FROM preferences"
FACT_NAMES = "SELECT concat(subject_id, '/', key) FROM facts"

HELD_CLAIM_CASES = [
    pytest.param(
        PREFERENCE_NAMES,
        "care",
        {},
        ["silent/diet", "silent/language", "silent/seat"],
        id="given care then the preferences whose held claim was recorded for care",
    ),
    pytest.param(
        PREFERENCE_NAMES,
        RESEARCH,
        {},
        ["consenting/newsletter", "silent/language", "silent/newsletter"],
        id="given research then research preferences, one whose key care restated later too",
    ),
    pytest.param(
        FACT_NAMES,
        "care",
        {},
        ["silent/employer", "silent/insurer", "silent/smoker", "silent/weight_kg"],
        id="given care then facts in force (not expired, not from the future)",
    ),
    pytest.param(
        FACT_NAMES,
        RESEARCH,
        {},
        ["consenting/religion"],
        id="given research then a special-category fact only of the consenting subject",
    ),
    pytest.param(
        FACT_NAMES,
        RESEARCH,
        {"exempt_purposes": frozenset({RESEARCH})},
        ["consenting/religion", "silent/religion"],
        id="given research exempt for the tenant then every special-category research fact",
    ),
]


@pytest.mark.parametrize(("sql", "purpose", "options", "expected"), HELD_CLAIM_CASES)
def test_current_preferences_and_facts_are_bound_to_the_purpose_of_the_read(
    client: Client,
    held_claims: str,
    sql: str,
    purpose: str,
    options: dict[str, Any],
    expected: list[str],
) -> None:
    rows = query(client, sql, C, purpose, **options).rows
    assert sorted(row[0] for row in rows) == expected


@pytest.mark.parametrize(
    "sql",
    [
        pytest.param("SELECT * FROM preferences WHERE 1 = 0", id="given preferences"),
        pytest.param("SELECT * FROM facts WHERE 1 = 0", id="given facts"),
    ],
)
def test_preferences_and_facts_have_the_documented_columns(client: Client, sql: str) -> None:
    assert query(client, sql, A).columns == (
        "tenant_id",
        "subject_id",
        "state_version",
        "key",
        "value",
        "value_json",
        "origin",
        "confidence",
        "source_ref",
        "event_id",
        "recorded_at",
        "needs_confirmation",
        "purpose",
        "valid_until",
    )


def test_a_fact_says_which_purpose_and_validity_it_holds(client: Client, held_claims: str) -> None:
    sql = "SELECT purpose, valid_until FROM facts WHERE key = 'employer'"
    assert _held_rows(client, sql) == [["care", "2999-01-01T00:00:00.000Z"]]


# ------------------------------------------------------------------------------------------------
# Audit of reads
# ------------------------------------------------------------------------------------------------


def _audit_rows(client: Client, actor: str) -> list[dict[str, Any]]:
    result = client.query(
        "SELECT * FROM uac.audit_reads WHERE actor = {actor:String} ORDER BY read_at",
        parameters={"actor": actor},
    )
    return [dict(zip(result.column_names, row, strict=True)) for row in result.result_rows]


def test_every_query_served_writes_one_audit_row_without_its_literals(client: Client) -> None:
    sql = "SELECT count() FROM events WHERE subject_id = 'patient-1'"
    query(client, sql, A, "care", actor="auditor-1")
    query(client, "SELECT 1", A, actor="auditor-1")
    rows = _audit_rows(client, "auditor-1")
    assert [(r["tenant_id"], r["purpose"], r["action"]) for r in rows] == [
        (A, "care", "query"),
        (A, "care", "query"),
    ]
    assert rows[0]["detail"] == "sha256:" + hashlib.sha256(sql.encode()).hexdigest()
    assert rows[0]["subject_ref"] is None
    assert "patient-1" not in json.dumps(rows, default=str)


def test_a_refused_query_is_not_served_and_not_audited_as_served(client: Client) -> None:
    with pytest.raises(QueryRefused):
        query(client, "SELECT * FROM system.tables", A, actor="auditor-2")
    assert _audit_rows(client, "auditor-2") == []


def test_audit_reads_relation_shows_the_tenants_audit_trail(client: Client) -> None:
    query(client, "SELECT 1", B, "billing", actor="auditor-3")
    result = query(client, "SELECT action, purpose FROM audit_reads WHERE actor = 'auditor-3'", B)
    assert result.rows == [["query", "billing"]]


# ------------------------------------------------------------------------------------------------
# Explaining an alert
# ------------------------------------------------------------------------------------------------

E = "clinic-explain"
E_ALLERGY = make_event("AllergyRecorded", "e-allergy", tenant=E, source_ref="fhir:Allergy/9")
E_RX = make_event("MedicationPrescribed", "e-rx", tenant=E, at=timedelta(days=1))
E_STOP = make_event("MedicationStopped", "e-stop", tenant=E, at=timedelta(days=2))
E_ALERT = uuid5(NAMESPACE_URL, "alert/explain")
E_OTHER_SUBJECT = E_ALLERGY.model_copy(
    update={"subject_id": "another-patient", "source_ref": "fhir:Allergy/of-another-patient"}
)
"""A producer reused the allergy's event id for another subject: the gate deduplicates within a
subject, so both are stored."""


def _lifecycle(
    status: str, trigger: Event, offset: int, reason: str | None = None, purpose: str = "care"
) -> Row:
    alert = Alert.model_validate(
        {
            "purpose": purpose,
            "lifecycle_id": uuid5(E_ALERT, status),
            "alert_id": E_ALERT,
            "tenant_id": E,
            "subject_id": "patient-1",
            "rule_id": "drug-allergy-conflict",
            "rule_version": 2,
            "status": status,
            "severity": "critical",
            "title": "Amoxicillin vs penicillin allergy",
            "detail": "",
            "cause": ("allergy-1", "rx-1"),
            "evidence": (
                Evidence(
                    event_id=E_ALLERGY.event_id,
                    claim_id="allergy-1",
                    role="allergy",
                    description="penicillin allergy",
                ),
                Evidence(
                    event_id=E_RX.event_id,
                    claim_id="rx-1",
                    role="medication",
                    description="amoxicillin",
                ),
            ),
            "trigger_event_id": trigger.event_id,
            "occurred_at": trigger.occurred_at,
            "reason": reason,
        }
    )
    return alert_row(alert, Coordinates("uac.alerts", 1, offset), NOW)


@pytest.fixture(scope="module")
def explained(client: Client) -> str:
    """A care alert's lifecycle, and a research record under its id (a stream written before
    alert ids named their purpose), which a care read must not list."""
    event_rows, _ = _accepted([E_ALLERGY, E_RX, E_STOP, E_OTHER_SUBJECT], first_offset=2000)
    write_batch(client, "events", EVENT_COLUMNS, event_rows, "explain-events")
    lifecycle = [
        _lifecycle("raised", E_RX, 31),
        _lifecycle("resolved", E_STOP, 32, "stopped"),
        _lifecycle("overridden", E_RX, 33, "research override", purpose="research"),
    ]
    write_batch(client, "alerts", ALERT_COLUMNS, lifecycle, "explain-alerts")
    return str(E_ALERT)


def test_explain_gives_the_lifecycle_rule_cause_and_lineage(client: Client, explained: str) -> None:
    found = alert_lineage.explain(client, explained, E, actor="explainer")
    assert found["purpose"] == "care"
    assert found["rule"] == {"id": "drug-allergy-conflict", "version": 2}
    assert found["cause"] == ["allergy-1", "rx-1"]
    assert [(r["status"], r["trigger_event_id"], r["reason"]) for r in found["lifecycle"]] == [
        ("raised", E_RX.event_id, None),
        ("resolved", E_STOP.event_id, "stopped"),
    ]
    assert found["lifecycle"][0]["occurred_at"] == plain(E_RX.occurred_at)
    events = {event["event_id"]: event for event in found["events"]}
    assert list(events) == [E_ALLERGY.event_id, E_RX.event_id, E_STOP.event_id]
    assert events[E_RX.event_id]["roles"] == ["medication", "trigger"]
    assert events[E_ALLERGY.event_id] | {"roles": []} == {
        "event_id": E_ALLERGY.event_id,
        "type": "AllergyRecorded",
        "origin": "explicit_statement",
        "source_ref": "fhir:Allergy/9",
        "occurred_at": plain(E_ALLERGY.occurred_at),
        "events_topic": {"topic": "uac.events", "partition": 0, "offset": 2000},
        "accepted_topic": {"topic": "uac.events.accepted", "partition": 0, "offset": 2000},
        "roles": [],
    }
    assert found["missing_event_ids"] == []


def test_explain_lists_only_the_alerted_subjects_events_when_an_event_id_is_reused(
    client: Client, explained: str
) -> None:
    found = alert_lineage.explain(client, explained, E, actor="explainer")
    assert [event["event_id"] for event in found["events"]] == [
        E_ALLERGY.event_id,
        E_RX.event_id,
        E_STOP.event_id,
    ]
    assert "fhir:Allergy/of-another-patient" not in {e["source_ref"] for e in found["events"]}


def test_explain_is_audited_with_the_subject_by_reference(client: Client, explained: str) -> None:
    alert_lineage.explain(client, explained, E, purpose="care", actor="explainer-2")
    (row,) = _audit_rows(client, "explainer-2")
    assert (row["action"], row["purpose"], row["detail"]) == (
        "explain",
        "care",
        f"alert:{explained}",
    )
    assert row["subject_ref"] == subject_ref(E, "patient-1")


def test_explain_refuses_an_exempt_purpose_other_than_that_of_the_alerts_claims(
    client: Client, explained: str
) -> None:
    """Audit is consent-exempt here, but the alert's claims were recorded for care: audit may
    not use them, and the refusal is worded as for an alert never stored."""
    with pytest.raises(AlertNotFound, match="'audit'"):
        alert_lineage.explain(
            client,
            explained,
            E,
            purpose="audit",
            exempt_purposes=frozenset({"audit", "care"}),
            actor="explainer-4",
        )
    assert _audit_rows(client, "explainer-4") == []


def test_explain_answers_a_purpose_that_may_not_read_the_alert_as_for_an_alert_never_stored(
    client: Client, explained: str
) -> None:
    """An alert id is computed from the subject and its claims: a refusal worded apart from
    "not found" would tell a reader without the purpose whether that subject has the conflict."""
    never_stored = str(uuid5(NAMESPACE_URL, "never-raised"))
    messages = []
    for alert_id in (explained, never_stored):
        with pytest.raises(AlertNotFound, match="marketing") as refused:
            alert_lineage.explain(client, alert_id, E, purpose="marketing", actor="explainer-3")
        messages.append(str(refused.value).replace(alert_id, "ALERT"))
    assert messages[0] == messages[1]
    assert _audit_rows(client, "explainer-3") == []


UNKNOWN_ALERTS = [
    pytest.param(str(uuid5(NAMESPACE_URL, "nobody")), E, id="given an unknown id then not found"),
    pytest.param(str(E_ALERT), A, id="given another tenant's alert then not found"),
    pytest.param("not-a-uuid", E, id="given an id that is not a UUID then not found"),
]


@pytest.mark.parametrize(("alert_id", "tenant"), UNKNOWN_ALERTS)
def test_explain_refuses_an_unknown_alert(
    client: Client, explained: str, alert_id: str, tenant: str
) -> None:
    with pytest.raises(AlertNotFound, match="alert"):
        alert_lineage.explain(client, alert_id, tenant)


# ------------------------------------------------------------------------------------------------
# Erasure in ClickHouse
# ------------------------------------------------------------------------------------------------

X, Y = "clinic-erase", "clinic-erase-other"


def _erasure(tenant: str, subject: str) -> ErasureRecorded:
    return ErasureRecorded(
        erasure_id=f"erasure-{tenant}-{subject}",
        tenant_id=tenant,
        subject_ref=subject_ref(tenant, subject),
        requested_at=T0,
        recorded_at=NOW,
        requested_by="uac-cli",
        key_destroyed=True,
    )


def _stored(client: Client, tenant: str, subject: str) -> dict[str, int]:
    counts = {}
    for table in SUBJECT_TABLES:
        result = client.query(
            f"SELECT count() FROM uac.{table} WHERE tenant_id = {{t:String}} "  # noqa: S608
            "AND subject_id = {s:String} SETTINGS apply_deleted_mask = 0",
            parameters={"t": tenant, "s": subject},
        )
        counts[table] = int(result.result_rows[0][0])
    return counts


def _write_subject(client: Client, tenant: str, subject: str, tag: str) -> None:
    events = [
        make_event("PreferenceStated", f"{tag}-pref", tenant=tenant, subject=subject),
        make_event("AllergyRecorded", f"{tag}-allergy", tenant=tenant, subject=subject),
    ]
    event_rows, decisions = _accepted(events, first_offset=3000)
    write_batch(client, "events", EVENT_COLUMNS, event_rows, f"{tag}-events")
    write_batch(client, "gate_decisions", DECISION_COLUMNS, decisions, f"{tag}-decisions")
    alert = _alert(A, tag, "raised", 3000)
    alert_values = dict(zip(ALERT_COLUMNS, alert, strict=True))
    alert_values |= {"tenant_id": tenant, "subject_id": subject}
    write_batch(client, "alerts", ALERT_COLUMNS, [tuple(alert_values.values())], f"{tag}-alerts")
    checkpoint = _checkpoint(replay(events), 3000)
    write_batch(client, "state_checkpoints", CHECKPOINT_COLUMNS, [checkpoint], f"{tag}-states")


@pytest.fixture(scope="module")
def erased(client: Client) -> dict[str, Any]:
    """Subject `patient-1` of tenant X erased; the same id in tenant Y and patient-2 of X kept."""
    _write_subject(client, X, "patient-1", "x1")
    _write_subject(client, X, "patient-2", "x2")
    _write_subject(client, Y, "patient-1", "y1")
    before = _stored(client, X, "patient-1")
    outcome = carry_out_erasure(client, _erasure(X, "patient-1"), lambda: NOW)
    return {"before": before, "outcome": outcome}


def test_an_erasure_removes_every_stored_row_of_the_subject(
    client: Client, erased: dict[str, Any]
) -> None:
    assert erased["before"] == {
        "events": 2,
        "gate_decisions": 2,
        "alerts": 1,
        "state_checkpoints": 1,
    }
    assert erased["outcome"].removed == erased["before"]
    assert erased["outcome"].receipt_written
    assert _stored(client, X, "patient-1") == dict.fromkeys(SUBJECT_TABLES, 0)


def test_an_erasure_leaves_other_subjects_and_tenants_alone(
    client: Client, erased: dict[str, Any]
) -> None:
    assert _stored(client, X, "patient-2") == erased["before"]
    assert _stored(client, Y, "patient-1") == erased["before"]


def test_an_erasure_writes_one_receipt_visible_to_its_tenant_only(
    client: Client, erased: dict[str, Any]
) -> None:
    sql = "SELECT subject_ref, removed_rows, verified, key_destroyed, requested_by FROM erasures"
    assert query(client, sql, X).rows == [
        [subject_ref(X, "patient-1"), erased["before"], True, True, "uac-cli"]
    ]
    assert query(client, sql, Y).rows == []


def test_an_erasure_seen_again_rechecks_and_keeps_its_first_receipt(
    client: Client, erased: dict[str, Any]
) -> None:
    again = carry_out_erasure(client, _erasure(X, "patient-1"), lambda: NOW + timedelta(days=1))
    assert not again.receipt_written
    assert again.removed == dict.fromkeys(SUBJECT_TABLES, 0)
    result = query(client, "SELECT removed_rows, completed_at FROM erasures", X)
    assert result.rows == [[erased["before"], plain(NOW)]]


def test_rows_that_come_back_are_removed_by_the_recheck(
    client: Client, erased: dict[str, Any]
) -> None:
    _write_subject(client, X, "patient-1", "x1-late")
    again = carry_out_erasure(client, _erasure(X, "patient-1"), lambda: NOW)
    assert again.removed["events"] == 2
    assert _stored(client, X, "patient-1") == dict.fromkeys(SUBJECT_TABLES, 0)
    assert query(client, "SELECT count() FROM erasures", X).rows == [[1]]


def test_a_lightweight_delete_only_masks_rows(client: Client) -> None:
    """Why erasure uses a mutation: `DELETE FROM` hides rows that `apply_deleted_mask = 0`
    still finds on disk (chDB 4.4 / ClickHouse 26.9)."""
    _write_subject(client, "clinic-masked", "patient-1", "masked")
    client.command("DELETE FROM uac.events WHERE tenant_id = 'clinic-masked'")
    assert query(client, "SELECT count() FROM events", "clinic-masked").rows == [[0]]
    assert _stored(client, "clinic-masked", "patient-1")["events"] == 2


# ------------------------------------------------------------------------------------------------
# Row policies for a ClickHouse server (parsed only: chDB has no access management)
# ------------------------------------------------------------------------------------------------

ROW_POLICIES = SCHEMA_DIR / "server" / "row_policies.sql"


def test_the_row_policies_parse(client: Client) -> None:
    statements = ddl_statements(ROW_POLICIES.read_text(encoding="utf-8"))
    for statement in statements:
        assert client.query(f"EXPLAIN AST {statement}").result_rows


def test_every_table_has_a_tenant_row_policy() -> None:
    text = ROW_POLICIES.read_text(encoding="utf-8")
    for table in COLUMNS:
        assert (
            f"ON uac.{table}\n    FOR SELECT USING tenant_id = getSetting('SQL_uac_tenant')" in text
        )


def test_the_row_policies_are_not_applied_to_the_embedded_engine() -> None:
    assert ROW_POLICIES not in schema_files()


@pytest.mark.parametrize(
    ("record", "expected_token"),
    [
        ({"pid": os.getpid(), "host": "127.0.0.1", "port": 1, "read_token": "t0k"}, "t0k"),
        ({"pid": os.getpid(), "host": "127.0.0.1", "port": 1}, ""),
        (["not", "a", "record"], None),
        ({"pid": "not-a-pid", "host": "127.0.0.1", "port": 1}, None),
    ],
)
def test_given_a_sink_record_then_its_address_and_read_token_or_none(
    tmp_path: Path, record: object, expected_token: str | None
) -> None:
    """A record of an older sink (no token) still names the running sink, so no second sink
    starts on its data path; an unreadable record names none."""
    sink_record_path(tmp_path).write_text(json.dumps(record), encoding="utf-8")
    address = running_sink(tmp_path)
    assert (None if address is None else address.read_token) == expected_token


def test_given_a_token_then_only_that_bearer_header_matches() -> None:
    assert bearer_matches("Bearer s3cret", "s3cret")
    assert not bearer_matches("Bearer s3cre", "s3cret")
    assert not bearer_matches("s3cret", "s3cret")
    assert not bearer_matches(None, "s3cret")


H = "clinic-homes"


@pytest.fixture(scope="module")
def homes(client: Client) -> str:
    """Tenant H: two subjects with a trip recorded for care; one's home country was told for
    research only, the other's for care."""
    histories = {
        subject: [
            make_event("FactAsserted", f"{subject}-home", tenant=H, subject=subject, purpose=told),
            make_event(
                "TravelRecorded", f"{subject}-trip", tenant=H, subject=subject, at=timedelta(days=1)
            ),
        ]
        for subject, told in (("research-home", RESEARCH), ("care-home", "care"))
    }
    _store_histories(client, histories, 3000, "home")
    return H


def test_a_home_country_told_for_another_purpose_does_not_reach_the_trips_of_a_read(
    client: Client, homes: str
) -> None:
    sql = "SELECT subject_id, home_country, international FROM trips ORDER BY subject_id"
    result = query(client, sql, homes, "care")
    assert result.rows == [["care-home", "NL", True], ["research-home", None, None]]


def _course(name: str, days: int, **window: datetime) -> Event:
    return make_event(
        "MedicationPrescribed",
        name,
        at=timedelta(days=days),
        tenant="clinic-standing",
        subject="standing",
        payload={"prescription_id": name},
        **window,
    )


def test_prescriptions_are_those_in_force_at_the_read_whatever_their_standing_at_the_checkpoint(
    client: Client,
) -> None:
    """The checkpoint files each course by how it stood at the subject's last event; the view
    shows the ones in force when the analyst reads: one scheduled then and begun since, not one
    that ran out since or had already run out."""
    history = [
        _course("long-gone", 0, valid_until=T0 + timedelta(hours=1)),
        _course("ran-out-since", 1, valid_until=T0 + timedelta(days=10)),
        _course("ongoing", 2),
        _course("begun-since", 2, valid_from=T0 + timedelta(days=30)),
    ]
    standings = state_document(replay(history))["medications"]
    assert {key: [m["prescription_id"] for m in ms] for key, ms in standings.items()} == {
        "active": ["ongoing", "ran-out-since"],
        "scheduled": ["begun-since"],
        "expired": ["long-gone"],
        "stopped": [],
    }
    _store_histories(client, {"standing": history}, 5600, "standings")
    result = query(
        client, "SELECT prescription_id, active FROM medications ORDER BY 1", "clinic-standing"
    )
    assert result.rows == [["begun-since", True], ["ongoing", True]]
