"""The tenant-scoped analyst query layer over UaC's ClickHouse history.

Analysts write ordinary ClickHouse SQL against the unqualified relation names below. The layer
prepends a `WITH` list that defines every relation as a read of the storage tables filtered by
the tenant, bound server-side as the query parameter `{tenant:String}` (never formatted into the
SQL text), then runs the analyst's statement (an analyst `WITH` list is merged after ours).
Every query needs a tenant; the storage database is never reachable by name.

Relations and their columns (every time is DateTime64(3, 'UTC')):

`events` (one row per accepted event, deduplicated with FINAL)
    tenant_id, subject_id, event_id (UUID), type, actor, occurred_at, recorded_at, origin,
    source_ref, confidence, sensitivity, purpose, scope, valid_from, valid_until, supersedes,
    payload (canonical JSON of the typed payload), decision_id, decided_at, source_topic,
    source_partition, source_offset (the original record on the events topic),
    accepted_partition, accepted_offset (the record on the accepted topic), ingested_at.
`gate_decisions` (every decision of the write gate, accepted and rejected)
    tenant_id, decision_id, outcome (accepted | rejected), reasons (Array of reason codes),
    detail, event_id, subject_id, actor, event_type, message_sha256, source_topic,
    source_partition, source_offset, decided_at, ingested_at.
`alerts` (one row per alert lifecycle record)
    tenant_id, alert_id, lifecycle_id, subject_id, rule_id, rule_version, status (raised |
    resolved | acknowledged | overridden), severity (info | warning | critical), title, detail,
    cause (Array of claim ids), evidence (JSON array), drug_allergy (JSON object or NULL),
    trigger_event_id, occurred_at, reason, source_topic, source_partition, source_offset,
    ingested_at.
`open_alerts`
    The columns of `alerts`: the latest lifecycle record of each alert (latest = highest offset
    on the alerts topic, i.e. the order the worker emitted them, which event times do not give
    for late events), kept when its status is raised, acknowledged or overridden.
`state_checkpoints` (every checkpoint version the sink has seen)
    tenant_id, subject_id, version, state_hash, last_event_id, as_of, erased, state_json (the
    canonical state document with its events), source_topic, source_partition, source_offset,
    ingested_at.
`current_state`
    The columns of `state_checkpoints`: the highest version per subject.
`trips` (from `current_state.state_json`, so they always agree with the fold's derivation)
    tenant_id, subject_id, state_version, trip_id, origin_country, destination_country,
    departure_date (Date32), return_date (Nullable(Date32)), home_country (Nullable),
    international (Nullable(Bool): NULL while the home country is unknown), event_id,
    recorded_at.
`allergies` (from `current_state.state_json`)
    tenant_id, subject_id, state_version, allergy_id, substance, allergy_type, categories
    (Array(String)), criticality, verification_status, clinical_status, negated, active,
    reactions (JSON), codes (JSON), recorded_event_id, recorded_at, last_change_event_id,
    last_changed_at.
`medications` (from `current_state.state_json`, active and stopped)
    tenant_id, subject_id, state_version, prescription_id, drug, dose, route, active, codes
    (JSON), prescribed_event_id, prescribed_at, stopped_event_id, stopped_at, stop_reason.

Isolation is enforced in three layers, each enough on its own for the common cases:
1. a lexical check (comments and literals skipped): one SELECT/WITH statement, no name
   qualified by `uac`, `system` or `information_schema`, no functions that read other data
   (`file`, `merge`, `remote`, `dictGet`, ...), no `SETTINGS` or `INTO OUTFILE`;
2. ClickHouse's own parser (`EXPLAIN AST`, which executes nothing) for the same rules;
3. ClickHouse's analyzer (`EXPLAIN QUERY TREE` of the full query): every table it resolves must
   be one of the wrapped storage tables, every table function one that generates data.
The query then runs with `readonly=2` (no writes, no DDL).

chDB allows one process per data path. While the pipeline runs, the sink process owns the path
and serves `POST /query`; `open_query_client` picks a server, the running sink, or the chDB
path directly, so the same call works whether the pipeline is running or stopped.
"""

from __future__ import annotations

import http.client
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from enum import Enum
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Protocol, Self
from uuid import UUID

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError

from projections.document import plain
from streams.clickhouse import DATABASE, connect
from streams.settings import Settings

TENANT_PARAMETER: Final = "tenant"
SINK_RECORD: Final = "sink.json"
QUERY_SETTINGS: Final[dict[str, Any]] = {"readonly": 2}

_TABLE_RELATIONS: Final = ("events", "gate_decisions", "alerts", "state_checkpoints")

_EVENTS = "SELECT * FROM uac.events FINAL WHERE tenant_id = {tenant:String}"
_GATE_DECISIONS = "SELECT * FROM uac.gate_decisions FINAL WHERE tenant_id = {tenant:String}"
_ALERTS = "SELECT * FROM uac.alerts FINAL WHERE tenant_id = {tenant:String}"
_STATE_CHECKPOINTS = "SELECT * FROM uac.state_checkpoints FINAL WHERE tenant_id = {tenant:String}"

_OPEN_ALERTS = """SELECT * FROM (
    SELECT * FROM alerts ORDER BY alert_id, source_offset DESC LIMIT 1 BY alert_id
) WHERE status IN ('raised', 'acknowledged', 'overridden')"""

_CURRENT_STATE = (
    "SELECT * FROM state_checkpoints ORDER BY subject_id, version DESC LIMIT 1 BY subject_id"
)

_TRIPS = """SELECT
    tenant_id, subject_id, version AS state_version,
    JSONExtractString(trip, 'trip_id') AS trip_id,
    JSONExtractString(trip, 'origin_country') AS origin_country,
    JSONExtractString(trip, 'destination_country') AS destination_country,
    toDate32(JSONExtractString(trip, 'departure_date')) AS departure_date,
    toDate32OrNull(JSONExtractString(trip, 'return_date')) AS return_date,
    nullIf(JSONExtractString(trip, 'home_country'), '') AS home_country,
    JSONExtract(trip, 'international', 'Nullable(Bool)') AS international,
    JSONExtractString(trip, 'recorded', 'event_id') AS event_id,
    parseDateTime64BestEffortOrNull(
        JSONExtractString(trip, 'recorded', 'occurred_at'), 3, 'UTC') AS recorded_at
FROM current_state ARRAY JOIN JSONExtractArrayRaw(state_json, 'trips') AS trip"""

_ALLERGIES = """SELECT
    tenant_id, subject_id, version AS state_version,
    JSONExtractString(allergy, 'allergy_id') AS allergy_id,
    JSONExtractString(allergy, 'substance') AS substance,
    nullIf(JSONExtractString(allergy, 'allergy_type'), '') AS allergy_type,
    JSONExtract(allergy, 'categories', 'Array(String)') AS categories,
    nullIf(JSONExtractString(allergy, 'criticality'), '') AS criticality,
    JSONExtractString(allergy, 'verification_status') AS verification_status,
    nullIf(JSONExtractString(allergy, 'clinical_status'), '') AS clinical_status,
    JSONExtract(allergy, 'negated', 'Bool') AS negated,
    JSONExtract(allergy, 'active', 'Bool') AS active,
    JSONExtractRaw(allergy, 'reactions') AS reactions,
    JSONExtractRaw(allergy, 'codes') AS codes,
    JSONExtractString(allergy, 'recorded', 'event_id') AS recorded_event_id,
    parseDateTime64BestEffortOrNull(
        JSONExtractString(allergy, 'recorded', 'occurred_at'), 3, 'UTC') AS recorded_at,
    JSONExtractString(allergy, 'last_change', 'event_id') AS last_change_event_id,
    parseDateTime64BestEffortOrNull(
        JSONExtractString(allergy, 'last_change', 'occurred_at'), 3, 'UTC') AS last_changed_at
FROM current_state ARRAY JOIN JSONExtractArrayRaw(state_json, 'allergies') AS allergy"""

_MEDICATIONS = """SELECT
    tenant_id, subject_id, state_version,
    JSONExtractString(medication, 'prescription_id') AS prescription_id,
    JSONExtractString(medication, 'drug') AS drug,
    nullIf(JSONExtractString(medication, 'dose'), '') AS dose,
    nullIf(JSONExtractString(medication, 'route'), '') AS route,
    active,
    JSONExtractRaw(medication, 'codes') AS codes,
    JSONExtractString(medication, 'prescribed', 'event_id') AS prescribed_event_id,
    parseDateTime64BestEffortOrNull(
        JSONExtractString(medication, 'prescribed', 'occurred_at'), 3, 'UTC') AS prescribed_at,
    nullIf(JSONExtractString(medication, 'stopped', 'event_id'), '') AS stopped_event_id,
    parseDateTime64BestEffortOrNull(
        JSONExtractString(medication, 'stopped', 'occurred_at'), 3, 'UTC') AS stopped_at,
    nullIf(JSONExtractString(medication, 'stop_reason'), '') AS stop_reason
FROM (
    SELECT tenant_id, subject_id, version AS state_version,
        tupleElement(entry, 1) AS medication, tupleElement(entry, 2) AS active
    FROM current_state ARRAY JOIN arrayConcat(
        arrayMap(m -> (m, true), JSONExtractArrayRaw(state_json, 'medications', 'active')),
        arrayMap(m -> (m, false), JSONExtractArrayRaw(state_json, 'medications', 'stopped'))
    ) AS entry
)"""

RELATIONS: Final[dict[str, str]] = {
    "events": _EVENTS,
    "gate_decisions": _GATE_DECISIONS,
    "alerts": _ALERTS,
    "state_checkpoints": _STATE_CHECKPOINTS,
    "open_alerts": _OPEN_ALERTS,
    "current_state": _CURRENT_STATE,
    "trips": _TRIPS,
    "allergies": _ALLERGIES,
    "medications": _MEDICATIONS,
}
"""Relation name -> its definition; later definitions may use earlier ones."""

STORAGE_TABLES: Final = frozenset(f"{DATABASE}.{table}" for table in _TABLE_RELATIONS)
READABLE_TABLES: Final = STORAGE_TABLES | {"system.one"}
"""What a full query may read: the wrapped tables and the one-row dummy of `SELECT 1`."""
QUERY_OWN_TABLES: Final = "_temporary_and_external_tables._tmp_"
"""Prefix of the temporary tables the engine creates for the query itself (WITH RECURSIVE)."""
GENERATOR_TABLE_FUNCTIONS: Final = frozenset(
    {"numbers", "numbers_mt", "zeros", "zeros_mt", "generateSeries", "generate_series", "values"}
)
FORBIDDEN_DATABASES: Final = frozenset({DATABASE, "system", "information_schema"})
FORBIDDEN_FUNCTIONS: Final = frozenset(
    {
        "file",
        "url",
        "urlcluster",
        "remote",
        "remotesecure",
        "cluster",
        "clusterallreplicas",
        "merge",
        "loop",
        "input",
        "executable",
        "dictionary",
        "joinget",
        "joingetornull",
        "catboostevaluate",
        "s3",
        "s3cluster",
        "gcs",
        "azureblobstorage",
        "hdfs",
        "mysql",
        "postgresql",
        "sqlite",
        "mongodb",
        "redis",
        "jdbc",
        "odbc",
        "iceberg",
        "deltalake",
        "hudi",
    }
)
"""Functions that read data from outside the wrapped relations (compared case-insensitively);
every function whose name starts with `dict` (dictGet and friends) is refused too."""


class TenantRequired(ValueError):
    """A query was asked for without a tenant: every query path is tenant-scoped."""


class QueryRefused(ValueError):
    """The SQL is not a single read-only statement over the tenant's relations."""


class QueryFailed(RuntimeError):
    """The engine could not run an accepted query (a syntax or type error, an unknown column)."""


class SinkUnavailable(RuntimeError):
    """`sink.json` names a running sink that does not answer."""


@dataclass(frozen=True)
class QueryResult:
    """Column names and rows; values are JSON-ready (times as `...Z` text, UUIDs as text) so a
    result looks the same whether it came from the engine directly or through the sink."""

    columns: tuple[str, ...]
    rows: list[list[Any]]

    def to_json(self) -> dict[str, Any]:
        return {"columns": list(self.columns), "rows": self.rows}

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> QueryResult:
        return cls(tuple(document["columns"]), [list(row) for row in document["rows"]])


# ------------------------------------------------------------------------------------------------
# Lexical checks
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    start: int

    @property
    def name(self) -> str:
        """An identifier's name without quotes, lower-cased (empty for other tokens)."""
        if self.kind == "word":
            return self.text.lower()
        if self.kind == "quoted":
            return self.text[1:-1].lower()
        return ""


_SPACE = re.compile(r"\s+")
_LINE_COMMENT = re.compile(r"(--|#)[^\n]*")
_STRING = re.compile(r"'(?:[^'\\]|\\.|'')*'", re.DOTALL)
_HEREDOC = re.compile(r"\$([A-Za-z0-9_]*)\$.*?\$\1\$", re.DOTALL)
_QUOTED = re.compile(r'"(?:[^"\\]|\\.|"")*"|`(?:[^`\\]|\\.|``)*`', re.DOTALL)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"[0-9][A-Za-z0-9_.]*")
_UNTERMINATED = frozenset("'\"`$")


def _block_comment_end(sql: str, start: int) -> int:
    """End of a (possibly nested) `/* ... */` comment starting at `start`."""
    depth, position = 0, start
    while position < len(sql):
        pair = sql[position : position + 2]
        if pair == "/*":
            depth, position = depth + 1, position + 2
        elif pair == "*/":
            depth, position = depth - 1, position + 2
            if depth == 0:
                return position
        else:
            position += 1
    raise QueryRefused("the SQL has an unterminated /* comment */")


def tokens(sql: str) -> Iterator[Token]:
    """Code tokens of `sql` (ClickHouse lexing: comments skipped, literals as single tokens)."""
    position = 0
    while position < len(sql):
        if sql.startswith("/*", position):
            position = _block_comment_end(sql, position)
            continue
        skipped = _SPACE.match(sql, position) or _LINE_COMMENT.match(sql, position)
        if skipped:
            position = skipped.end()
            continue
        token = _token_at(sql, position)
        yield token
        position += len(token.text)


def _token_at(sql: str, position: int) -> Token:
    for kind, pattern in (
        ("string", _STRING),
        ("string", _HEREDOC),
        ("quoted", _QUOTED),
        ("word", _WORD),
        ("number", _NUMBER),
    ):
        found = pattern.match(sql, position)
        if found:
            return Token(kind, found.group(), position)
    if sql[position] in _UNTERMINATED:
        raise QueryRefused(f"the SQL has an unterminated literal at character {position}")
    return Token("punct", sql[position], position)


def _is_forbidden_function(name: str) -> bool:
    return name in FORBIDDEN_FUNCTIONS or name.startswith("dict")


def _statement(sql: str) -> list[Token]:
    """The code tokens of the one statement in `sql` (trailing semicolons dropped)."""
    found = list(tokens(sql))
    while found and found[-1].text == ";":
        found.pop()
    if not found:
        raise QueryRefused("the SQL is empty")
    if any(token.text == ";" for token in found):
        raise QueryRefused("only one statement is allowed (found `;` between statements)")
    if found[0].name not in {"select", "with"}:
        raise QueryRefused(
            f"only a read-only SELECT (or WITH ... SELECT) is allowed, not {found[0].text!r}"
        )
    return found


def check_sql(sql: str) -> list[Token]:
    """Refuse SQL that is not one read-only statement over the relations (lexical rules)."""
    found = _statement(sql)
    for token, following in zip(found, [*found[1:], None], strict=True):
        after = following.text if following else ""
        if token.name in FORBIDDEN_DATABASES and after == ".":
            raise QueryRefused(
                f"the SQL names the database {token.name!r} directly; query the relations "
                f"({', '.join(RELATIONS)}) by their bare names"
            )
        if token.kind in {"word", "quoted"} and after == "(" and _is_forbidden_function(token.name):
            raise QueryRefused(f"the function {token.name!r} reads data outside your relations")
        if token.name == "settings" and token.kind == "word":
            raise QueryRefused("a SETTINGS clause is not allowed in analyst queries")
        if token.name == "into" and following is not None and following.name == "outfile":
            raise QueryRefused("INTO OUTFILE is not allowed in analyst queries")
    return found


# ------------------------------------------------------------------------------------------------
# Building and checking the full query
# ------------------------------------------------------------------------------------------------


def _text(sql: str, first: Token, last: Token) -> str:
    """The source text from `first` to `last` (leading and trailing comments dropped)."""
    return sql[first.start : last.start + len(last.text)]


def statement_text(sql: str) -> str:
    """The analyst's statement, checked, without surrounding comments and semicolons."""
    found = check_sql(sql)
    return _text(sql, found[0], found[-1])


def with_relations(sql: str) -> str:
    """The analyst's statement with the relation definitions prepended (WITH lists merged)."""
    found = check_sql(sql)
    definitions = ",\n".join(f"{name} AS ({body})" for name, body in RELATIONS.items())
    if found[0].name != "with":
        return f"WITH {definitions}\n{_text(sql, found[0], found[-1])}"
    recursive = len(found) > 1 and found[1].name == "recursive"
    rest = found[2] if recursive else found[1]
    keyword = "WITH RECURSIVE" if recursive else "WITH"
    return f"{keyword} {definitions},\n{_text(sql, rest, found[-1])}"


_AST_TABLE = re.compile(r"^\s*TableIdentifier (\S+)")
_AST_IDENTIFIER = re.compile(r"^\s*Identifier (\S+)")
_AST_FUNCTION = re.compile(r"^\s*Function (\S+)")
_TREE_TABLE = re.compile(r"\btable_name: ([^,\s]+)")
_TREE_TABLE_FUNCTION = re.compile(r"\btable_function_name: ([^,\s]+)")


_SERVER_PLACEHOLDER = re.compile(r"\{\w+:[^}]+\}")


def _explain(client: Client, kind: str, sql: str, tenant: str) -> list[str]:
    """EXPLAIN lines. Parameters are bound only when the SQL has a `{name:Type}` placeholder:
    without one, clickhouse-connect would %-format the SQL on the client (breaking `LIKE '%x'`).
    """
    parameters = {TENANT_PARAMETER: tenant} if _SERVER_PLACEHOLDER.search(sql) else None
    result = client.query(f"EXPLAIN {kind} {sql}", parameters=parameters)
    return [str(row[0]) for row in result.result_rows]


def check_parsed(lines: Sequence[str]) -> None:
    """Refuse by ClickHouse's parse of the analyst's SQL (`EXPLAIN AST` lines)."""
    if not lines or not lines[0].startswith("SelectWithUnionQuery"):
        raise QueryRefused("only a read-only SELECT (or WITH ... SELECT) is allowed")
    for line in lines:
        table = _AST_TABLE.match(line)
        if table and "." in table.group(1):
            raise QueryRefused(f"the SQL names the table {table.group(1)!r} by its database")
        identifier = _AST_IDENTIFIER.match(line)
        qualifier, dot, _ = identifier.group(1).partition(".") if identifier else ("", "", "")
        if identifier and dot and qualifier.lower() in FORBIDDEN_DATABASES:
            raise QueryRefused(f"the SQL names {identifier.group(1)!r} by its database")
        function = _AST_FUNCTION.match(line)
        if function and _is_forbidden_function(function.group(1).lower()):
            raise QueryRefused(
                f"the function {function.group(1)!r} reads data outside your relations"
            )


def check_resolved(lines: Sequence[str]) -> None:
    """Refuse by the analyzer's resolution of the full query (`EXPLAIN QUERY TREE` lines)."""
    for line in lines:
        for table in _TREE_TABLE.findall(line):
            if table not in READABLE_TABLES and not table.startswith(QUERY_OWN_TABLES):
                raise QueryRefused(f"the SQL reads {table!r}, which is not one of your relations")
        for function in _TREE_TABLE_FUNCTION.findall(line):
            if function not in GENERATOR_TABLE_FUNCTIONS:
                raise QueryRefused(f"the table function {function!r} is not allowed")


def require_tenant(tenant: str | None) -> str:
    if tenant is None or not tenant.strip():
        raise TenantRequired("every query needs a tenant: pass the tenant whose data to read")
    return tenant


def query(client: Client, sql: str, tenant: str | None) -> QueryResult:
    """Run an analyst's SQL over `tenant`'s relations. Raises TenantRequired, QueryRefused or
    QueryFailed; never reads another tenant's rows."""
    tenant = require_tenant(tenant)
    full = with_relations(sql)
    try:
        check_parsed(_explain(client, "AST", statement_text(sql), tenant))
        check_resolved(_explain(client, "QUERY TREE", full, tenant))
        result = client.query(
            full, parameters={TENANT_PARAMETER: tenant}, settings=dict(QUERY_SETTINGS)
        )
        columns = tuple(result.column_names) or _column_names(client, full, tenant)
    except ClickHouseError as error:
        raise QueryFailed(_engine_message(error)) from error
    rows = [[json_value(value) for value in row] for row in result.result_rows]
    return QueryResult(columns, rows)


def _engine_message(error: ClickHouseError) -> str:
    """The engine's error without the echo of the whole (relation-prefixed) query."""
    return str(error).split(" In scope ", 1)[0].strip()


def _column_names(client: Client, full: str, tenant: str) -> tuple[str, ...]:
    """The result columns of a query, asked separately: chDB reports no columns for an empty
    result (no data block), and an analyst still needs to see the shape."""
    described = client.query(
        f"DESCRIBE ({full})",
        parameters={TENANT_PARAMETER: tenant},
        settings=dict(QUERY_SETTINGS),
    )
    return tuple(str(row[0]) for row in described.result_rows)


def json_value(value: Any) -> Any:
    """A query value in its JSON-ready form (the same spelling the state documents use)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime | date | UUID | Enum):
        return plain(value)
    if isinstance(value, Mapping):
        return {str(key): json_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(item) for item in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, Decimal):
        return str(value)
    return str(value)


# ------------------------------------------------------------------------------------------------
# Where queries run: a server, a running sink (HTTP), or the chDB path
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SinkAddress:
    """A running sink, as recorded in `{home}/sink.json`."""

    pid: int
    host: str
    port: int


def sink_record_path(home: Path) -> Path:
    return home / SINK_RECORD


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running_sink(home: Path) -> SinkAddress | None:
    """The sink recorded under `home` if its process is alive, else None (a stale record)."""
    try:
        record = json.loads(sink_record_path(home).read_text(encoding="utf-8"))
        address = SinkAddress(int(record["pid"]), str(record["host"]), int(record["port"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return address if _pid_alive(address.pid) else None


_REMOTE_ERRORS: Final[dict[str, type[Exception]]] = {
    "tenant_required": TenantRequired,
    "query_refused": QueryRefused,
    "query_failed": QueryFailed,
}


def post_query(address: SinkAddress, sql: str, tenant: str, timeout: float = 60.0) -> QueryResult:
    """POST the query to a sink's `/query` and return its result (errors re-raised as ours)."""
    body = json.dumps({"sql": sql, "tenant": tenant}).encode("utf-8")
    connection = http.client.HTTPConnection(address.host, address.port, timeout=timeout)
    try:
        connection.request("POST", "/query", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        document = json.loads(response.read())
    except (OSError, http.client.HTTPException, ValueError) as error:
        raise SinkUnavailable(f"the sink on port {address.port} did not answer: {error}") from error
    finally:
        connection.close()
    if response.status != 200:
        error_type = _REMOTE_ERRORS.get(str(document.get("error")), QueryFailed)
        raise error_type(str(document.get("message", f"HTTP {response.status}")))
    return QueryResult.from_json(document)


def query_via_sink(home: Path, sql: str, tenant: str | None) -> QueryResult:
    """Run the query in the sink that owns the chDB path (it must be running)."""
    tenant = require_tenant(tenant)
    address = running_sink(home)
    if address is None:
        raise SinkUnavailable(f"no running sink is recorded in {sink_record_path(home)}")
    return post_query(address, sql, tenant)


class QueryClient(Protocol):
    def query(self, sql: str, tenant: str | None) -> QueryResult: ...

    def close(self) -> None: ...


class DirectQueries:
    """Queries on a ClickHouse client this object owns (a server, or the chDB path)."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def query(self, sql: str, tenant: str | None) -> QueryResult:
        return query(self._client, sql, tenant)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class SinkQueries:
    """Queries sent to the running sink that owns the chDB path."""

    def __init__(self, address: SinkAddress) -> None:
        self.address = address

    def query(self, sql: str, tenant: str | None) -> QueryResult:
        return post_query(self.address, sql, require_tenant(tenant))

    def close(self) -> None:
        return None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def open_query_client(settings: Settings) -> DirectQueries | SinkQueries:
    """A server URL -> direct; a running sink -> through its HTTP endpoint; else open the chDB
    path directly (only possible while no other process owns it)."""
    if settings.clickhouse_url:
        return DirectQueries(connect(settings))
    address = running_sink(settings.home)
    if address is not None:
        return SinkQueries(address)
    return DirectQueries(connect(settings))
