"""The tenant-scoped, purpose-bound analyst query layer over UaC's ClickHouse history.

Analysts write ordinary ClickHouse SQL against the unqualified relation names below. The layer
prepends a `WITH` list that defines every relation as a read of the storage tables filtered by
the tenant and the read's purpose, bound server-side as query parameters (`{tenant:String}`,
`{purpose:String}`, `{read_at:DateTime64(3, 'UTC')}`; never formatted into the SQL text), then
runs the analyst's statement (an analyst `WITH` list is merged after ours). Every query needs a
tenant; the storage database is never reachable by name.

Every read has a purpose; a read without one gets the default `care` (never "everything"):

- claims (`events`, and the current views `trips`, `allergies`, `medications`) are exposed only
  when the purpose recorded with them equals the read's purpose;
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
result is returned. `explain` (the lineage of one alert) runs fixed queries and is audited too.

Relations and their columns (every time is DateTime64(3, 'UTC')):

`events` (one row per accepted event, deduplicated with FINAL; purpose-bound)
    tenant_id, subject_id, event_id (UUID), type, actor, occurred_at, recorded_at, origin,
    source_ref, confidence, sensitivity, purpose, scope, valid_from, valid_until, supersedes,
    payload (canonical JSON of the typed payload), decision_id, decided_at, source_topic,
    source_partition, source_offset (the original record on the events topic),
    accepted_partition, accepted_offset (the record on the accepted topic), ingested_at.
`gate_decisions` (every decision of the write gate, accepted and rejected; no claim values)
    tenant_id, decision_id, outcome (accepted | rejected), reasons (Array of reason codes),
    detail, event_id, subject_id, actor, event_type, message_sha256, source_topic,
    source_partition, source_offset, decided_at, ingested_at.
`alerts` (one row per alert lifecycle record; special category)
    tenant_id, alert_id, lifecycle_id, subject_id, rule_id, rule_version, status (raised |
    resolved | acknowledged | overridden), severity (info | warning | critical), title, detail,
    cause (Array of claim ids), evidence (JSON array), drug_allergy (JSON object or NULL),
    duplicate_therapy (JSON object or NULL), trigger_event_id, occurred_at, reason,
    source_topic, source_partition, source_offset, ingested_at.
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
    purpose, valid_until.
`erasures` (erasure receipts; no personal data)
    erasure_id, tenant_id, subject_ref (sha256 of 'tenant:subject'), requested_at,
    recorded_at, completed_at, requested_by, key_destroyed, removed_rows (Map table -> rows
    physically removed), verified.
`audit_reads` (every audited read of personal data)
    audit_id, tenant_id, subject_ref (NULL for reads across subjects), actor, purpose, action
    (query | explain | state | export | ...), detail, read_at, ingested_at.

In `trips`, `allergies` and `medications` a claim's purpose, sensitivity and validity are those
of the event that recorded it (`recorded`, `prescribed`).

Isolation is enforced in three layers, each enough on its own for the common cases:
1. a lexical check (comments and literals skipped): one SELECT/WITH statement, no name
   qualified by `uac`, `system` or `information_schema`, no functions that read other data
   (`file`, `merge`, `remote`, `dictGet`, ...), no `SETTINGS` or `INTO OUTFILE`;
2. ClickHouse's own parser (`EXPLAIN AST`, which executes nothing) for the same rules;
3. ClickHouse's analyzer (`EXPLAIN QUERY TREE` of the full query): every table it resolves must
   be one of the wrapped storage tables, every table function one that generates data.
The query then runs with `readonly=2` (no writes, no DDL). On a ClickHouse server,
`deploy/clickhouse/server/row_policies.sql` adds row policies as a fourth layer.

chDB allows one process per data path. While the pipeline runs, the sink process owns the path
and serves `POST /query` and `POST /explain`; `open_query_client` picks a server, the running
sink, or the chDB path directly, so the same call works whether the pipeline is running or
stopped.
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
import http.client
import json
import os
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from enum import Enum
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Protocol, Self
from uuid import UUID

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError

from projections.document import plain
from projections.gate import HEALTH_PAYLOADS, GatePolicy
from schemas.erasures import ReadAudited, subject_ref
from schemas.events import EventType
from streams.clickhouse import DATABASE, connect, write_batch
from streams.rows import AUDIT_COLUMNS, AUDIT_READS, audit_row
from streams.settings import Settings
from streams.tenants import load_gate_policy

TENANT_PARAMETER: Final = "tenant"
PURPOSE_PARAMETER: Final = "purpose"
READ_AT_PARAMETER: Final = "read_at"
DEFAULT_PURPOSE: Final = "care"
"""The purpose of a read that names none (documented: never "every purpose")."""
DEFAULT_EXEMPT_PURPOSES: Final = frozenset({"care"})
"""Consent-exempt purposes when the caller names none (the tenants file's default)."""
UNIDENTIFIED_ACTOR: Final = "unidentified"
SINK_RECORD: Final = "sink.json"
QUERY_SETTINGS: Final[dict[str, Any]] = {"readonly": 2}
HEALTH_EVENT_TYPES: Final = tuple(EventType(payload.__name__).value for payload in HEALTH_PAYLOADS)
"""Event types that are special-category data whatever their sensitivity label (as the gate)."""

_TABLE_RELATIONS: Final = (
    "events",
    "gate_decisions",
    "alerts",
    "state_checkpoints",
    "erasures",
    "audit_reads",
)

_OF_TENANT = "tenant_id = {tenant:String}"
_CHECKPOINT_COLUMNS = (
    "tenant_id, subject_id, version, state_hash, last_event_id, as_of, erased, source_topic, "
    "source_partition, source_offset, ingested_at"
)
_LATEST_DOCUMENTS = f"""SELECT * FROM {DATABASE}.state_checkpoints FINAL WHERE {_OF_TENANT}
    ORDER BY subject_id, version DESC LIMIT 1 BY subject_id"""  # noqa: S608
"""The current checkpoint of each subject with its document (internal: never a relation)."""
_CONSENT = "JSONExtractBool(state_json, 'state', 'consents', {purpose:String}, '%s')"
_CONSENTING_SUBJECTS = f"""SELECT subject_id FROM ({_LATEST_DOCUMENTS})
    WHERE {_CONSENT % "granted"} AND {_CONSENT % "special_category"}"""  # noqa: S608
"""Subjects whose current state records consent to special-category use for the purpose."""
_BY_CONSENT = f"subject_id IN ({_CONSENTING_SUBJECTS})"
_EXEMPT = "true"
_HEALTH_TYPES = ", ".join(f"'{name}'" for name in HEALTH_EVENT_TYPES)
_SPECIAL_EVENT = f"(sensitivity = 'special_category' OR type IN ({_HEALTH_TYPES}))"


def _claim_ref(claim: str, ref: str, field: str) -> str:
    return f"JSONExtractString({claim}, '{ref}', '{field}')"


def _claim_valid_until(claim: str, ref: str) -> str:
    return f"parseDateTime64BestEffortOrNull({_claim_ref(claim, ref, 'valid_until')}, 3, 'UTC')"


def _claim_readable(claim: str, ref: str, allowed: str, *, always_special: bool) -> str:
    """A current-view claim is shown when recorded for the read's purpose, allowed if special,
    and still valid at the time of the read."""
    special = (
        "true"
        if always_special
        else f"{_claim_ref(claim, ref, 'sensitivity')} = 'special_category'"
    )
    return (
        f"{_claim_ref(claim, ref, 'purpose')} = {{purpose:String}}"
        f" AND (NOT ({special}) OR {allowed})"
        f" AND coalesce({_claim_valid_until(claim, ref)} > {{read_at:DateTime64(3, 'UTC')}}, true)"
    )


def _claim_columns(claim: str, ref: str) -> str:
    return (
        f"{_claim_ref(claim, ref, 'purpose')} AS purpose, "
        f"{_claim_valid_until(claim, ref)} AS valid_until"
    )


def _trips(allowed: str) -> str:
    return f"""SELECT
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
        JSONExtractString(trip, 'recorded', 'occurred_at'), 3, 'UTC') AS recorded_at,
    {_claim_columns("trip", "recorded")}
FROM ({_LATEST_DOCUMENTS}) ARRAY JOIN JSONExtractArrayRaw(state_json, 'state', 'trips') AS trip
WHERE {_claim_readable("trip", "recorded", allowed, always_special=False)}"""  # noqa: S608


def _allergies(allowed: str) -> str:
    return f"""SELECT
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
        JSONExtractString(allergy, 'last_change', 'occurred_at'), 3, 'UTC') AS last_changed_at,
    {_claim_columns("allergy", "recorded")}
FROM ({_LATEST_DOCUMENTS})
ARRAY JOIN JSONExtractArrayRaw(state_json, 'state', 'allergies') AS allergy
WHERE {_claim_readable("allergy", "recorded", allowed, always_special=True)}"""  # noqa: S608


def _medications(allowed: str) -> str:
    return f"""SELECT
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
    nullIf(JSONExtractString(medication, 'stop_reason'), '') AS stop_reason,
    {_claim_columns("medication", "prescribed")}
FROM (
    SELECT tenant_id, subject_id, version AS state_version,
        tupleElement(entry, 1) AS medication, tupleElement(entry, 2) AS active
    FROM ({_LATEST_DOCUMENTS}) ARRAY JOIN arrayConcat(
        arrayMap(m -> (m, true), JSONExtractArrayRaw(state_json, 'state', 'medications', 'active')),
        arrayMap(m -> (m, false), JSONExtractArrayRaw(state_json, 'state', 'medications', 'stopped'))
    ) AS entry
)
WHERE {_claim_readable("medication", "prescribed", allowed, always_special=True)}"""  # noqa: S608


def _of_tenant(table: str, columns: str = "*") -> str:
    """The tenant's rows of a storage table (the base of every relation)."""
    return f"SELECT {columns} FROM {DATABASE}.{table} FINAL WHERE {_OF_TENANT}"  # noqa: S608


def _relations(allowed: str) -> dict[str, str]:
    """Relation name -> definition, given the condition that lets a subject's special-category
    data be read for the read's purpose; later definitions may use earlier ones."""
    purpose_bound = f"AND purpose = {{purpose:String}} AND (NOT {_SPECIAL_EVENT} OR {allowed})"
    return {
        "events": f"{_of_tenant('events')} {purpose_bound}",
        "gate_decisions": _of_tenant("gate_decisions"),
        "alerts": f"{_of_tenant('alerts')} AND {allowed}",
        "state_checkpoints": _of_tenant("state_checkpoints", _CHECKPOINT_COLUMNS),
        "open_alerts": """SELECT * FROM (
    SELECT * FROM alerts ORDER BY alert_id, source_offset DESC LIMIT 1 BY alert_id
) WHERE status IN ('raised', 'acknowledged', 'overridden')""",
        "current_state": (
            "SELECT * FROM state_checkpoints ORDER BY subject_id, version DESC LIMIT 1 BY subject_id"
        ),
        "trips": _trips(allowed),
        "allergies": _allergies(allowed),
        "medications": _medications(allowed),
        "erasures": _of_tenant("erasures"),
        "audit_reads": _of_tenant("audit_reads"),
    }


_EXEMPT_RELATIONS: Final = _relations(_EXEMPT)
_CONSENT_RELATIONS: Final = _relations(_BY_CONSENT)
RELATIONS: Final = tuple(_EXEMPT_RELATIONS)
"""The relation names analysts query."""


def relations(*, purpose_exempt: bool) -> dict[str, str]:
    """The relation definitions for a read whose purpose is (or is not) consent-exempt."""
    return dict(_EXEMPT_RELATIONS if purpose_exempt else _CONSENT_RELATIONS)


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


class UnknownTenant(QueryRefused):
    """A read for a tenant the tenants file does not name."""


def exempt_purposes_of(tenant: str | None, exempt: Mapping[str, frozenset[str]]) -> frozenset[str]:
    """A tenant's consent-exempt purposes from the tenants-file mapping; UnknownTenant for a
    tenant it does not name (a missing or blank tenant is left to TenantRequired)."""
    if tenant is None or not tenant.strip():
        return frozenset()
    if tenant not in exempt:
        raise UnknownTenant(f"unknown tenant {tenant!r}: it is not in the tenants file")
    return exempt[tenant]


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


def with_relations(sql: str, *, purpose_exempt: bool) -> str:
    """The analyst's statement with the relation definitions prepended (WITH lists merged)."""
    found = check_sql(sql)
    definitions = ",\n".join(
        f"{name} AS ({body})" for name, body in relations(purpose_exempt=purpose_exempt).items()
    )
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


@dataclass(frozen=True)
class Read:
    """Who reads which tenant's data, for what purpose, when (what every read is bound to)."""

    tenant: str
    purpose: str
    purpose_exempt: bool
    actor: str
    at: datetime

    @property
    def parameters(self) -> dict[str, Any]:
        """The query parameters the relations are bound to."""
        return {
            TENANT_PARAMETER: self.tenant,
            PURPOSE_PARAMETER: self.purpose,
            READ_AT_PARAMETER: self.at,
        }

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


def _explain(client: Client, kind: str, sql: str, read: Read) -> list[str]:
    """EXPLAIN lines. Parameters are bound only when the SQL has a `{name:Type}` placeholder:
    without one, clickhouse-connect would %-format the SQL on the client (breaking `LIKE '%x'`).
    """
    parameters = read.parameters if _SERVER_PLACEHOLDER.search(sql) else None
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
) -> Read:
    """A read of `tenant`'s data now (TenantRequired without a tenant)."""
    bound = read_purpose(purpose)
    return Read(
        tenant=require_tenant(tenant),
        purpose=bound,
        purpose_exempt=bound in exempt_purposes,
        actor=actor or default_actor(),
        at=datetime.now(UTC),
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
) -> QueryResult:
    """Run an analyst's SQL over `tenant`'s relations, bound to `purpose` (default `care`;
    `exempt_purposes` are the tenant's consent-exempt purposes), and audit the read as `actor`
    (default: the operating-system user). Raises TenantRequired, QueryRefused or QueryFailed;
    never reads another tenant's rows, nor claims recorded for another purpose."""
    read = new_read(tenant, purpose, exempt_purposes, actor)
    full = with_relations(sql, purpose_exempt=read.purpose_exempt)
    try:
        check_parsed(_explain(client, "AST", statement_text(sql), read))
        check_resolved(_explain(client, "QUERY TREE", full, read))
        result = client.query(full, parameters=read.parameters, settings=dict(QUERY_SETTINGS))
        columns = tuple(result.column_names) or _column_names(client, full, read)
    except ClickHouseError as error:
        raise QueryFailed(_engine_message(error)) from error
    rows = [[json_value(value) for value in row] for row in result.result_rows]
    _audit(client, read.audited("query", sql_digest(sql)))
    return QueryResult(columns, rows)


def _audit(client: Client, audit: ReadAudited) -> None:
    """Record the read before its result is handed out; no audit row, no result."""
    try:
        record_read(client, audit)
    except ClickHouseError as error:
        raise QueryFailed(f"the read could not be audited: {_engine_message(error)}") from error


def _engine_message(error: ClickHouseError) -> str:
    """The engine's error without the echo of the whole (relation-prefixed) query; for a
    ClickHouse no sink has prepared yet, what to do about it."""
    if "(UNKNOWN_DATABASE)" in str(error):
        return (
            f"ClickHouse has no `{DATABASE}` database yet: the sink creates it when it first "
            "starts (`uac sink`, or `uac demo`)"
        )
    return str(error).split(" In scope ", 1)[0].strip()


def _column_names(client: Client, full: str, read: Read) -> tuple[str, ...]:
    """The result columns of a query, asked separately: chDB reports no columns for an empty
    result (no data block), and an analyst still needs to see the shape."""
    described = client.query(
        f"DESCRIBE ({full})", parameters=read.parameters, settings=dict(QUERY_SETTINGS)
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
# Explaining an alert: its lifecycle and lineage, from fixed queries
# ------------------------------------------------------------------------------------------------


class AlertNotFound(LookupError):
    """No alert with this id is stored for the tenant."""


_ALERT_LIFECYCLE: Final = """SELECT lifecycle_id, subject_id, rule_id, rule_version, status,
    severity, occurred_at, trigger_event_id, reason, cause, evidence
FROM uac.alerts FINAL
WHERE tenant_id = {tenant:String} AND alert_id = {alert_id:UUID}
ORDER BY source_partition, source_offset"""

_LINEAGE_EVENTS: Final = """SELECT toString(event_id), type, origin, source_ref, occurred_at,
    source_topic, source_partition, source_offset, accepted_partition, accepted_offset
FROM uac.events FINAL
WHERE tenant_id = {tenant:String} AND toString(event_id) IN {event_ids:Array(String)}
ORDER BY occurred_at, event_id"""

ACCEPTED_SUFFIX: Final = ".accepted"
"""The accepted topic is the events topic's name plus this suffix (`streams.topics.Topics`)."""


def explain(
    client: Client,
    alert_id: str,
    tenant: str | None,
    *,
    purpose: str | None = None,
    exempt_purposes: frozenset[str] = DEFAULT_EXEMPT_PURPOSES,
    actor: str | None = None,
) -> dict[str, Any]:
    """Why an alert fired: every lifecycle record, its rule, the cause claims, and the lineage
    of every evidence and trigger event (type, origin, source_ref, time, and where it sits on
    the events topic and the accepted topic). Audited as an `explain` read of the subject.
    The alert must be readable for the purpose exactly as in the `alerts` relation (consent-
    exempt purpose, or the subject's consent). Raises TenantRequired, AlertNotFound if the
    tenant has no such alert, or QueryRefused if the purpose may not read it."""
    read = new_read(tenant, purpose, exempt_purposes, actor)
    alert = _alert_uuid(alert_id)
    try:
        lifecycle = _lifecycle(client, alert, read.tenant)
        readable = bool(lifecycle) and _alert_readable(client, alert, read)
        roles = _event_roles(lifecycle)
        events = _lineage(client, sorted(roles), read.tenant) if readable else []
    except ClickHouseError as error:
        raise QueryFailed(_engine_message(error)) from error
    if not lifecycle:
        raise AlertNotFound(f"no alert {alert} is stored for tenant {read.tenant!r}")
    if not readable:
        raise QueryRefused(
            f"alert {alert} may not be read for purpose {read.purpose!r}: alerts are special "
            "category, readable only for the tenant's consent-exempt purposes or with the "
            "subject's consent for the purpose"
        )
    _audit(client, read.audited("explain", f"alert:{alert}", lifecycle[0]["subject_id"]))
    return _explanation(str(alert), read.tenant, lifecycle, roles, events)


def _alert_readable(client: Client, alert: UUID, read: Read) -> bool:
    """Whether the purpose-bound `alerts` relation shows this alert to the read."""
    sql = with_relations(
        "SELECT count() FROM alerts WHERE alert_id = {alert_id:UUID}",
        purpose_exempt=read.purpose_exempt,
    )
    parameters = {**read.parameters, "alert_id": str(alert)}
    result = client.query(sql, parameters=parameters, settings=dict(QUERY_SETTINGS))
    return int(result.result_rows[0][0]) > 0


def _alert_uuid(alert_id: str) -> UUID:
    try:
        return UUID(alert_id)
    except ValueError:
        raise AlertNotFound(f"{alert_id!r} is not an alert id (a UUID)") from None


def _lifecycle(client: Client, alert_id: UUID, tenant: str) -> list[dict[str, Any]]:
    result = client.query(
        _ALERT_LIFECYCLE, parameters={TENANT_PARAMETER: tenant, "alert_id": str(alert_id)}
    )
    names = (
        "lifecycle_id",
        "subject_id",
        "rule_id",
        "rule_version",
        "status",
        "severity",
        "occurred_at",
        "trigger_event_id",
        "reason",
        "cause",
        "evidence",
    )
    records = [dict(zip(names, row, strict=True)) for row in result.result_rows]
    for record in records:
        record["evidence"] = json.loads(record["evidence"])
    return records


def _event_roles(lifecycle: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Event id -> its roles in the alert (evidence roles, and `trigger`)."""
    roles: dict[str, list[str]] = {}
    for record in lifecycle:
        for item in record["evidence"]:
            _add_role(roles, str(item["event_id"]), str(item["role"]))
        _add_role(roles, str(record["trigger_event_id"]), "trigger")
    return roles


def _add_role(roles: dict[str, list[str]], event_id: str, role: str) -> None:
    known = roles.setdefault(event_id, [])
    if role not in known:
        known.append(role)


def _lineage(client: Client, event_ids: list[str], tenant: str) -> list[dict[str, Any]]:
    result = client.query(
        _LINEAGE_EVENTS, parameters={TENANT_PARAMETER: tenant, "event_ids": event_ids}
    )
    return [_lineage_event(row) for row in result.result_rows]


def _lineage_event(row: Sequence[Any]) -> dict[str, Any]:
    event_id, kind, origin, source_ref, occurred_at, topic, partition, offset = row[:8]
    accepted_partition, accepted_offset = row[8:]
    return {
        "event_id": event_id,
        "type": kind,
        "origin": origin,
        "source_ref": source_ref,
        "occurred_at": json_value(occurred_at),
        "events_topic": {"topic": topic, "partition": partition, "offset": offset},
        "accepted_topic": {
            "topic": topic + ACCEPTED_SUFFIX,
            "partition": accepted_partition,
            "offset": accepted_offset,
        },
    }


def _explanation(
    alert_id: str,
    tenant: str,
    lifecycle: Sequence[Mapping[str, Any]],
    roles: Mapping[str, list[str]],
    events: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    first = lifecycle[0]
    found = {event["event_id"] for event in events}
    return {
        "alert_id": alert_id,
        "tenant_id": tenant,
        "subject_id": first["subject_id"],
        "rule": {"id": first["rule_id"], "version": first["rule_version"]},
        "cause": list(first["cause"]),
        "lifecycle": [
            {
                name: json_value(record[name])
                for name in (
                    "lifecycle_id",
                    "status",
                    "severity",
                    "occurred_at",
                    "trigger_event_id",
                    "reason",
                )
            }
            for record in lifecycle
        ],
        "evidence": _unique(item for record in lifecycle for item in record["evidence"]),
        "events": [{**event, "roles": roles[event["event_id"]]} for event in events],
        "missing_event_ids": sorted(set(roles) - found),
    }


def _unique(items: Iterator[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen


# ------------------------------------------------------------------------------------------------
# Where queries run: a server, a running sink (HTTP), or the chDB path
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SinkAddress:
    """A running sink, as recorded in `{home}/sink.json` (readable by its owner only)."""

    pid: int
    host: str
    port: int
    read_token: str = field(repr=False)


UNAUTHORIZED_READ: Final = (
    "the sink answers reads only with the read token of its sink.json (the UAC_HOME it runs in)"
)


def bearer_matches(header: str | None, token: str) -> bool:
    """Whether an Authorization header carries `token` (compared in constant time)."""
    expected = f"Bearer {token}".encode()
    return header is not None and hmac.compare_digest(header.encode(), expected)


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
        token = str(record.get("read_token", ""))
        address = SinkAddress(int(record["pid"]), str(record["host"]), int(record["port"]), token)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return address if _pid_alive(address.pid) else None


def tenant_exempt_purposes(settings: Settings) -> dict[str, frozenset[str]]:
    """Each tenant's consent-exempt purposes, from the tenants file the gate enforces."""
    return exempt_purposes_in(load_gate_policy(settings.tenants_file))


def exempt_purposes_in(policy: GatePolicy) -> dict[str, frozenset[str]]:
    """Each tenant's consent-exempt purposes under a gate policy."""
    return {name: tenant.consent_exempt_purposes for name, tenant in policy.tenants.items()}


_REMOTE_ERRORS: Final[dict[str, type[Exception]]] = {
    "unauthorized": QueryRefused,
    "tenant_required": TenantRequired,
    "query_refused": QueryRefused,
    "query_failed": QueryFailed,
    "alert_not_found": AlertNotFound,
}


def _post(address: SinkAddress, path: str, body: dict[str, Any], timeout: float) -> Any:
    """POST a JSON body to the sink and return its JSON answer (errors re-raised as ours)."""
    connection = http.client.HTTPConnection(address.host, address.port, timeout=timeout)
    try:
        payload = json.dumps(body).encode("utf-8")
        headers = {
            "Content-Type": "application/json",
            "Authorization": f"Bearer {address.read_token}",
        }
        connection.request("POST", path, payload, headers)
        response = connection.getresponse()
        document = json.loads(response.read())
    except (OSError, http.client.HTTPException, ValueError) as error:
        raise SinkUnavailable(f"the sink on port {address.port} did not answer: {error}") from error
    finally:
        connection.close()
    if response.status != 200:
        error_type = _REMOTE_ERRORS.get(str(document.get("error")), QueryFailed)
        raise error_type(str(document.get("message", f"HTTP {response.status}")))
    return document


def post_query(
    address: SinkAddress,
    sql: str,
    tenant: str,
    purpose: str | None = None,
    *,
    actor: str | None = None,
    timeout: float = 60.0,
) -> QueryResult:
    """POST the query to a sink's `/query` and return its result."""
    body = {"sql": sql, "tenant": tenant, "purpose": purpose, "actor": actor or default_actor()}
    return QueryResult.from_json(_post(address, "/query", body, timeout))


def post_explain(
    address: SinkAddress,
    alert_id: str,
    tenant: str,
    purpose: str | None = None,
    *,
    actor: str | None = None,
    timeout: float = 60.0,
) -> dict[str, Any]:
    """POST an alert id to a sink's `/explain` and return the explanation."""
    body = {
        "alert_id": alert_id,
        "tenant": tenant,
        "purpose": purpose,
        "actor": actor or default_actor(),
    }
    explanation: dict[str, Any] = _post(address, "/explain", body, timeout)
    return explanation


def query_via_sink(
    home: Path,
    sql: str,
    tenant: str | None,
    purpose: str | None = None,
    *,
    actor: str | None = None,
) -> QueryResult:
    """Run the query in the sink that owns the chDB path (it must be running)."""
    tenant = require_tenant(tenant)
    address = running_sink(home)
    if address is None:
        raise SinkUnavailable(f"no running sink is recorded in {sink_record_path(home)}")
    return post_query(address, sql, tenant, purpose, actor=actor)


class QueryClient(Protocol):
    def query(
        self, sql: str, tenant: str | None, purpose: str | None = None, *, actor: str | None = None
    ) -> QueryResult: ...

    def explain(
        self,
        alert_id: str,
        tenant: str | None,
        purpose: str | None = None,
        *,
        actor: str | None = None,
    ) -> dict[str, Any]: ...

    def close(self) -> None: ...


class _ClosedOnExit:
    """`with client:` closes the client."""

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


class DirectQueries(_ClosedOnExit):
    """Queries on a ClickHouse client this object owns (a server, or the chDB path).

    `exempt_purposes` maps each tenant to its consent-exempt purposes (a read for a tenant
    missing from it is refused as UnknownTenant); without the mapping every tenant gets
    `DEFAULT_EXEMPT_PURPOSES`."""

    def __init__(
        self, client: Client, exempt_purposes: Mapping[str, frozenset[str]] | None = None
    ) -> None:
        self._client = client
        self._exempt = exempt_purposes

    def exempt_purposes(self, tenant: str | None) -> frozenset[str]:
        if self._exempt is None:
            return DEFAULT_EXEMPT_PURPOSES
        return exempt_purposes_of(tenant, self._exempt)

    def query(
        self, sql: str, tenant: str | None, purpose: str | None = None, *, actor: str | None = None
    ) -> QueryResult:
        exempt = self.exempt_purposes(tenant)
        return query(self._client, sql, tenant, purpose, exempt, actor=actor)

    def explain(
        self,
        alert_id: str,
        tenant: str | None,
        purpose: str | None = None,
        *,
        actor: str | None = None,
    ) -> dict[str, Any]:
        exempt = self.exempt_purposes(tenant)
        return explain(
            self._client, alert_id, tenant, purpose=purpose, exempt_purposes=exempt, actor=actor
        )

    def close(self) -> None:
        self._client.close()


class SinkQueries(_ClosedOnExit):
    """Queries sent to the running sink that owns the chDB path."""

    def __init__(self, address: SinkAddress) -> None:
        self.address = address

    def query(
        self, sql: str, tenant: str | None, purpose: str | None = None, *, actor: str | None = None
    ) -> QueryResult:
        return post_query(self.address, sql, require_tenant(tenant), purpose, actor=actor)

    def explain(
        self,
        alert_id: str,
        tenant: str | None,
        purpose: str | None = None,
        *,
        actor: str | None = None,
    ) -> dict[str, Any]:
        return post_explain(self.address, alert_id, require_tenant(tenant), purpose, actor=actor)


def open_query_client(settings: Settings) -> DirectQueries | SinkQueries:
    """A server URL -> direct; a running sink -> through its HTTP endpoint; else open the chDB
    path directly (only possible while no other process owns it)."""
    if settings.clickhouse_url:
        return DirectQueries(connect(settings), tenant_exempt_purposes(settings))
    address = running_sink(settings.home)
    if address is not None:
        return SinkQueries(address)
    return DirectQueries(connect(settings), tenant_exempt_purposes(settings))
