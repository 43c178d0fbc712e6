"""The tenant-scoped, purpose-bound analyst query layer over UaC's ClickHouse history.

Analysts write ordinary ClickHouse SQL against the unqualified relation names below. The layer
prepends a `WITH` list that defines every relation as a read of the storage tables filtered by
the tenant and the read's purpose, bound server-side as query parameters (`{tenant:String}`,
`{purpose:String}`, `{read_at:DateTime64(3, 'UTC')}`; never formatted into the SQL text), then
runs the analyst's statement (an analyst `WITH` list is merged after ours). Every query needs a
tenant; the storage database is never reachable by name.

Every read has a purpose; a read without one gets the default `care` (never "everything"):

- claims (`events`, and the current views `trips`, `allergies`, `medications`, `preferences`,
  `facts`) are exposed only when the purpose recorded with them equals the read's purpose, and
  alerts only when the purpose of the claims behind them (`purpose`: a rule combines claims of
  one purpose) does;
  `consents` only the consents given for the read's purpose, a consent-exempt one included;
- special-category claims (events labelled `special_category`, and the health event types
  AllergyRecorded, AllergyStatusChanged, MedicationPrescribed, MedicationStopped whatever their
  label) and alerts (they are health findings) also need a legal basis: the purpose is one of
  the tenant's consent-exempt purposes (`deploy/config/tenants.json`), or the subject's current
  checkpoint records consent for it (`state.consents[purpose]` granted, special_category true);
- the current views leave out claims whose `valid_until` has passed at the time of the read;
- the checkpoint relations carry no `state_json`: the whole document holds claims of every
  purpose, so it is not readable through this layer.

Every query served is audited: one `uac.audit_reads` row (tenant, actor, purpose, action
`query`, the sha256 of the SQL as `detail`; never its literals or results), written before the
result is returned; a query the engine began but could not finish gets one with action
`query_failed` (its error may quote a value it read). Queries run one at a time per client, with
the limits of QUERY_SETTINGS. `explain` (the lineage of one alert) runs fixed queries and is audited too.

Relations and their columns (every time is DateTime64(3, 'UTC')):

`events` (one row per accepted event, deduplicated with FINAL; purpose-bound)
    tenant_id, subject_id, event_id (UUID), type, actor, occurred_at, recorded_at, origin,
    source_ref, confidence, sensitivity, purpose, scope, valid_from, valid_until, supersedes,
    payload (canonical JSON of the typed payload), decision_id, decided_at, source_topic,
    source_partition, source_offset (the original record on the events topic),
    accepted_partition, accepted_offset (the record on the accepted topic), ingested_at.
`gate_decisions` (every decision of the write gate, accepted and rejected; no claim values;
    subject_id NULL on a decision about a health event without a legal basis for the subject)
    tenant_id, decision_id, outcome (accepted | rejected), reasons (Array of reason codes),
    detail, event_id, subject_id, actor, event_type, message_sha256, source_topic,
    source_partition, source_offset, decided_at, ingested_at.
`alerts` (one row per alert lifecycle record; special category)
    tenant_id, alert_id, lifecycle_id, subject_id, rule_id, rule_version, status (raised |
    resolved | acknowledged | overridden), severity (info | warning | critical), title, detail,
    cause (Array of claim ids), evidence (JSON array), drug_allergy (JSON object or NULL),
    duplicate_therapy (JSON object or NULL), trigger_event_id, occurred_at, reason, purpose
    (that of the claims behind the alert; `care` for records written before alerts carried
    one), source_topic, source_partition, source_offset, ingested_at.
`open_alerts`
    The columns of `alerts`: the latest lifecycle record of each alert (latest = highest offset
    on the alerts topic, i.e. the order the worker emitted them, which event times do not give
    for late events), kept when its status is raised, acknowledged or overridden.
`state_checkpoints` (every checkpoint version the sink has seen)
    tenant_id, subject_id, version, state_hash, last_event_id, as_of, erased, source_topic,
    source_partition, source_offset, ingested_at.
`current_state`
    The columns of `state_checkpoints`: the highest version per subject.
`trips` (from the current checkpoint, so they always agree with the fold's derivation)
    tenant_id, subject_id, state_version, trip_id, origin_country, destination_country,
    departure_date (Date32), return_date (Nullable(Date32)), home_country (Nullable),
    international (Nullable(Bool): NULL while the home country is unknown), event_id,
    recorded_at, purpose, valid_until.
`allergies` (from the current checkpoint)
    tenant_id, subject_id, state_version, allergy_id, substance, allergy_type, categories
    (Array(String)), criticality, verification_status, clinical_status, negated, active,
    reactions (JSON), codes (JSON), recorded_event_id, recorded_at, last_change_event_id,
    last_changed_at, purpose, valid_until.
`medications` (from the current checkpoint, active and stopped)
    tenant_id, subject_id, state_version, prescription_id, drug, dose, route, active, codes
    (JSON), prescribed_event_id, prescribed_at, stopped_event_id, stopped_at, stop_reason,
    entered_in_error (Bool: a stop said it was recorded in error, so it never held),
    voided_event_id (that stop's event), purpose, valid_until.
`preferences`, `facts` (from the current checkpoint: one row per key, the value the fold holds)
    tenant_id, subject_id, state_version, key, value (the value as text), value_json (the value
    as JSON: tells the string "true" from the boolean true), origin, confidence, source_ref,
    event_id, recorded_at, needs_confirmation (the id of the key's open conflict, or NULL),
    purpose, valid_until. The key's history is not exposed: it holds claims of other purposes.
`consents` (from the current checkpoint: the subject's consent for the read's purpose only)
    tenant_id, subject_id, state_version, purpose, granted (Bool), special_category (Bool),
    event_id, recorded_at, valid_from, valid_until, in_force (Bool: the legal basis's test, its
    event is in `events` and its window holds the time of the read), origin, source_ref.
`erasures` (erasure receipts; no personal data)
    erasure_id, tenant_id, subject_ref (sha256 of 'tenant:subject'), requested_at,
    recorded_at, completed_at, requested_by, key_destroyed, removed_rows (Map table -> rows
    physically removed), verified.
`audit_reads` (every audited read of personal data)
    audit_id, tenant_id, subject_ref (NULL for reads across subjects), actor, purpose, action
    (query | explain | state | export | ...), detail, read_at, ingested_at.

In `trips`, `allergies` and `medications` a claim's purpose, sensitivity and validity are those
of the event that recorded it (`recorded`, `prescribed`); in `preferences` and `facts` those of
the claim the fold holds (`current`).

Isolation is enforced in three layers (`streams.sql_guard`), each enough on its own for the
common cases:
1. a lexical check (comments and literals skipped, as ClickHouse lexes): one SELECT/WITH, no name
   qualified by `uac`, `system` or `information_schema`, no functions that read other data
   (`file`, `merge`, `remote`, `dictGet`, ...), no function that is not on the analysts'
   allowlist (`streams/analyst_functions.txt`, aggregate combinators included), no `APPLY`
   column transformer, no `SETTINGS` or `INTO OUTFILE`;
2. ClickHouse's own parser (`EXPLAIN AST`, which executes nothing) for the same rules (every
   function call it finds is on the allowlist), and, before anything is evaluated: table
   functions only those that generate data, no bare name of a stored table outside the
   relations (the engine's catalog), no name qualified by a database;
3. ClickHouse's analyzer (`EXPLAIN QUERY TREE` of the full query, folded scalar subqueries kept
   in the tree): every table it resolves must be one of the wrapped storage tables, every table
   function one that generates data. It evaluates scalar subqueries while resolving, hence 2.
The query then runs with `readonly=2` (no writes, no DDL). On a ClickHouse server,
`deploy/clickhouse/server/row_policies.sql` adds row policies as a fourth layer.

The relation definitions are in `streams.query_relations`; `streams.alert_lineage` explains an
alert; `streams.query_clients` runs a query on a server, through the running sink or on the
chDB path, whichever is there.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import math
import re
import threading
import uuid
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from enum import Enum
from typing import Any, Final
from uuid import UUID

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError

from projections.document import plain
from schemas.erasures import ReadAudited, subject_ref
from streams.clickhouse import DATABASE, write_batch
from streams.query_relations import (
    ERASED_PARAMETER,
    PURPOSE_PARAMETER,
    READ_AT_PARAMETER,
    RELATIONS,
    TENANT_PARAMETER,
)
from streams.rows import AUDIT_COLUMNS, AUDIT_READS, audit_row
from streams.sql_guard import (
    ANALYST_PARAMETERS,
    CATALOG_SQL,
    EXPLAIN_SETTINGS,
    Catalog,
    QueryRefused,
    check_analyst_parameters,
    check_parsed,
    check_resolved,
    statement_text,
    with_relations,
)

DEFAULT_PURPOSE: Final = "care"
"""The purpose of a read that names none (documented: never "every purpose")."""
DEFAULT_EXEMPT_PURPOSES: Final = frozenset({"care"})
"""Consent-exempt purposes when the caller names none (the tenants file's default)."""
UNIDENTIFIED_ACTOR: Final = "unidentified"
QUERY_SETTINGS: Final[dict[str, Any]] = {
    "readonly": 2,
    "max_execution_time": 60,
    "max_memory_usage": 2 * 1024**3,
    "max_result_rows": 1_000_000,
    "max_result_bytes": 256 * 1024**2,
}
"""Every statement a read sends, `EXPLAIN QUERY TREE` too (the analyzer evaluates scalar
subqueries while it explains; `EXPLAIN AST` executes nothing and gets none: a client may send
settings as a SETTINGS clause, which the parser check refuses): no writes or DDL, and limits so
one query cannot hold the engine (the sink's own, on the chDB path) for long, take its memory or
return more than a client holds."""


class TenantRequired(ValueError):
    """A query was asked for without a tenant: every query path is tenant-scoped."""


class UnknownTenant(QueryRefused):
    """A read for a tenant the tenants file does not name."""


def exempt_purposes_of(tenant: str | None, exempt: Mapping[str, frozenset[str]]) -> frozenset[str]:
    """A tenant's consent-exempt purposes from the tenants-file mapping; UnknownTenant for a
    tenant it does not name (a missing or blank tenant is left to TenantRequired)."""
    if tenant is None or not tenant.strip():
        return frozenset()
    if tenant not in exempt:
        raise unknown_tenant(tenant)
    return exempt[tenant]


def unknown_tenant(tenant: str) -> UnknownTenant:
    """The refusal of a read for a tenant the tenants file does not name."""
    return UnknownTenant(f"unknown tenant {tenant!r}: it is not in the tenants file")


class QueryFailed(RuntimeError):
    """The engine could not run an accepted query (a syntax or type error, an unknown column)."""


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


_SERVER_PLACEHOLDER = re.compile(r"\{\w+:[^}]+\}")


@dataclass(frozen=True)
class Read:
    """Who reads which tenant's data, for what purpose, when (what every read is bound to)."""

    tenant: str
    purpose: str
    purpose_exempt: bool
    actor: str
    at: datetime
    erased: frozenset[str] = frozenset()
    """`subject_ref`s of subjects whose erasure is under way: no relation shows their rows."""

    @property
    def parameters(self) -> dict[str, Any]:
        """The query parameters the relations are bound to."""
        return {**self.analyst_parameters, ERASED_PARAMETER: sorted(self.erased)}

    @property
    def analyst_parameters(self) -> dict[str, Any]:
        """The ones an analyst's SQL may name (ANALYST_PARAMETERS): the analyst's statement is
        parsed with these alone bound, so the engine refuses any other it names (`erased`
        holds other tenants' subject refs)."""
        bound = {
            TENANT_PARAMETER: self.tenant,
            PURPOSE_PARAMETER: self.purpose,
            READ_AT_PARAMETER: self.at,
        }
        return {name: bound[name] for name in ANALYST_PARAMETERS}

    def audited(self, action: str, detail: str, subject: str | None = None) -> ReadAudited:
        """The audit record of this read (`subject`: the one subject read, if any)."""
        return ReadAudited(
            audit_id=uuid.uuid4(),
            tenant_id=self.tenant,
            subject_ref=None if subject is None else subject_ref(self.tenant, subject),
            actor=self.actor,
            purpose=self.purpose,
            action=action,
            detail=detail,
            read_at=self.at,
        )


def _explain(
    client: Client,
    kind: str,
    sql: str,
    bound: Mapping[str, Any],
    settings: Mapping[str, Any] | None = None,
) -> list[str]:
    """EXPLAIN lines. Parameters (`bound`) are bound only when the SQL has a `{name:Type}`
    placeholder: without one, clickhouse-connect would %-format the SQL on the client (breaking
    `LIKE '%x'`)."""
    parameters = dict(bound) if _SERVER_PLACEHOLDER.search(sql) else None
    explained = _TRAILING_LIMIT_ZERO.sub("LIMIT (0)", sql)
    result = client.query(
        f"EXPLAIN {kind} {explained}",
        parameters=parameters,
        settings=dict(settings or {}),
    )
    return [str(row[0]) for row in result.result_rows]


_TRAILING_LIMIT_ZERO: Final = re.compile(r"\bLIMIT\s+0$", re.IGNORECASE)
"""A statement that ends in `LIMIT 0` (the natural way to ask for a relation's columns) is
taken by clickhouse-connect for a columns-only probe, which fails on EXPLAIN's rows; `LIMIT
(0)` parses and resolves to the same tree and is not taken for one. The statement's text ends
at its last token (`statement_text`), so a trailing comment or semicolon cannot hide it."""


def catalog(client: Client) -> Catalog:
    """The databases and the tables a bare name reaches, as the engine holds them now."""
    return Catalog.of(
        [(str(kind), str(name)) for kind, name in client.query(CATALOG_SQL).result_rows]
    )


def require_tenant(tenant: str | None) -> str:
    if tenant is None or not tenant.strip():
        raise TenantRequired("every query needs a tenant: pass the tenant whose data to read")
    return tenant


def read_purpose(purpose: str | None) -> str:
    """The purpose a read is bound to: the one asked for, or the default `care`."""
    return DEFAULT_PURPOSE if purpose is None or not purpose.strip() else purpose


def default_actor() -> str:
    """Who reads when no actor is named: the operating-system user."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return UNIDENTIFIED_ACTOR


def new_read(
    tenant: str | None,
    purpose: str | None,
    exempt_purposes: frozenset[str],
    actor: str | None,
    erased: frozenset[str] = frozenset(),
) -> Read:
    """A read of `tenant`'s data now (TenantRequired without a tenant), blind to the subjects
    whose erasure is under way (`erased`: their `subject_ref`s)."""
    bound = read_purpose(purpose)
    return Read(
        tenant=require_tenant(tenant),
        purpose=bound,
        purpose_exempt=bound in exempt_purposes,
        actor=actor or default_actor(),
        at=datetime.now(UTC),
        erased=erased,
    )


def sql_digest(sql: str) -> str:
    """What an audit row says about a query: the hash of its text, never its literals."""
    return "sha256:" + hashlib.sha256(sql.encode("utf-8")).hexdigest()


def record_read(client: Client, audit: ReadAudited) -> None:
    """Write one `audit_reads` row directly (the sink ingests the audit topic the same way)."""
    row = audit_row(audit, datetime.now(UTC))
    write_batch(client, AUDIT_READS, AUDIT_COLUMNS, [row], f"uac-audit/{audit.audit_id}")


def query(
    client: Client,
    sql: str,
    tenant: str | None,
    purpose: str | None = None,
    exempt_purposes: frozenset[str] = DEFAULT_EXEMPT_PURPOSES,
    *,
    actor: str | None = None,
    erased: frozenset[str] = frozenset(),
) -> QueryResult:
    """Run an analyst's SQL over `tenant`'s relations, bound to `purpose` (default `care`;
    `exempt_purposes` are the tenant's consent-exempt purposes), and audit the read as `actor`
    (default: the operating-system user). Raises TenantRequired, QueryRefused or QueryFailed;
    never reads another tenant's rows, nor claims recorded for another purpose, nor rows of a
    subject whose erasure is under way (`erased`: their `subject_ref`s)."""
    read = new_read(tenant, purpose, exempt_purposes, actor, erased)
    full = with_relations(sql, purpose_exempt=read.purpose_exempt)
    check_analyst_parameters(sql)
    evaluated = False
    with one_at_a_time(client):
        try:
            check_parsed(_parsed(client, sql, read), catalog(client))
            evaluated = True
            explain_settings = {**QUERY_SETTINGS, **EXPLAIN_SETTINGS}
            check_resolved(_explain(client, "QUERY TREE", full, read.parameters, explain_settings))
            result = client.query(full, parameters=read.parameters, settings=dict(QUERY_SETTINGS))
            columns = tuple(result.column_names) or _column_names(client, full, read)
        except ClickHouseError as error:
            drain(client)
            if evaluated:
                audit_read(client, read.audited(FAILED_QUERY, sql_digest(sql)))
            raise QueryFailed(engine_message(error)) from error
        rows = [[json_value(value) for value in row] for row in result.result_rows]
        audit_read(client, read.audited("query", sql_digest(sql)))
    return QueryResult(columns, rows)


def _parsed(client: Client, sql: str, read: Read) -> list[str]:
    """The `EXPLAIN AST` lines of the analyst's SQL. When it cannot be parsed, the error is
    the one of parsing the SQL alone (`formatQuery`, which runs nothing), so that it points at
    a position of the SQL as written, not of the statement sent around it."""
    try:
        return _explain(client, "AST", statement_text(sql), read.analyst_parameters)
    except ClickHouseError:
        drain(client)
        client.query("SELECT formatQuery({uac_sql:String})", parameters={"uac_sql": sql})
        raise


FAILED_QUERY: Final = "query_failed"
"""The audit action of a query the engine began to evaluate but could not finish: its error may
quote values it read (`Cannot parse string '...'`), so it is a read too."""

_CLIENT_LOCKS: Final = weakref.WeakKeyDictionary[Client, threading.Lock]()
_CLIENT_LOCKS_GUARD: Final = threading.Lock()


def one_at_a_time(client: Client) -> threading.Lock:
    """One read at a time on a client, an analyst's query or an alert's explanation (the
    running sink serves every tenant's reads on one): what a failed read leaves on the client
    is drained before the next one runs."""
    with _CLIENT_LOCKS_GUARD:
        return _CLIENT_LOCKS.setdefault(client, threading.Lock())


def drain(client: Client) -> None:
    """After an engine error: chDB (4.4) keeps the unread rest of a result that failed part way
    (a limit, a `throwIf` on a later row) and hands it to the next query on the same client, which
    then fails quoting it; a throwaway query takes it, so the next read (maybe another tenant's)
    starts clean."""
    with contextlib.suppress(ClickHouseError):
        client.query("SELECT 1")


def audit_read(client: Client, audit: ReadAudited) -> None:
    """Record the read before its result is handed out; no audit row, no result."""
    try:
        record_read(client, audit)
    except ClickHouseError as error:
        raise QueryFailed(f"the read could not be audited: {engine_message(error)}") from error


def engine_message(error: ClickHouseError) -> str:
    """The engine's error without the echo of the whole (relation-prefixed) query; for a
    ClickHouse no sink has prepared yet, what to do about it."""
    text = str(error)
    if f"Database {DATABASE} does not exist" in text:
        return (
            f"ClickHouse has no `{DATABASE}` database yet: the sink creates it when it first "
            "starts (`uac sink`, or `uac demo`)"
        )
    taken = _CTE_TAKEN.search(text)
    if taken is not None and taken.group(1) in RELATIONS:
        return (
            f"`{taken.group(1)}` is the name of one of your relations (docs/analyst.md): a WITH "
            "table cannot take it; give yours another name"
        )
    echo = _QUERY_ECHO.search(text)
    if echo is None:
        return text.strip()
    code = _ERROR_CODE.search(text)
    kept = text[: echo.start()].rstrip(" :.")
    return f"{kept}. ({code.group(1)})" if code else kept


_QUERY_ECHO: Final = re.compile(r":? In (?:scope|query) ")
"""Where the engine starts quoting the query it ran: the relation definitions and storage
tables around the analyst's SQL, which the message must not print."""
_ERROR_CODE: Final = re.compile(r"\(([A-Z_]+)\)\s*$")
_CTE_TAKEN: Final = re.compile(r"CTE with name (\S+) already exists")
"""The engine's answer to an analyst's WITH table named like a relation (defined before it)."""


def _column_names(client: Client, full: str, read: Read) -> tuple[str, ...]:
    """The result columns of a query, asked separately: chDB reports no columns for an empty
    result (no data block), and an analyst still needs to see the shape."""
    described = client.query(
        f"DESCRIBE ({full})", parameters=read.parameters, settings=dict(QUERY_SETTINGS)
    )
    return tuple(str(row[0]) for row in described.result_rows)


def json_value(value: Any) -> Any:
    """A query value in its JSON-ready form (the same spelling the state documents use); a
    float that is not a number or is infinite is null, as in ClickHouse's own JSON formats
    (strict JSON has no NaN or Infinity)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
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
