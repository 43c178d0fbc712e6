"""ClickHouse access: one client type for the embedded engine (chDB) and for a server.

`connect` returns a clickhouse-connect client: the in-process chDB engine under
`settings.chdb_path` by default, or a server when `settings.clickhouse_url` is set. Both speak
the same SQL dialect and take the same calls, so the sink and the analytics layer have one code
path.

chDB facts this module relies on (measured with chDB 4.4 / engine 26.9, clickhouse-connect 1.12):

- One engine path per process. Any number of clients may be open on that path at once (each has
  its own connection handle and lock, and they can be used from different threads), but
  opening a different path while a client is open raises `ProgrammingError`. Once every client
  is closed, another path can be opened in the same process.
- Only one process may own a data path, so while the sink runs it is the only opener; other
  readers go through the sink's HTTP `/query` endpoint (see `streams.query_clients`).
- `insert_deduplication_token` is honoured on the embedded engine when the table sets
  `non_replicated_deduplication_window` (the DDL does).
- `ALTER TABLE ... DELETE` with `mutations_sync = 2` returns once every part that held a
  matching row was rewritten without it; the superseded parts are then outdated and removed from
  disk by the engine's background cleanup (after `old_parts_lifetime`). A lightweight
  `DELETE FROM` would only mask the rows: `apply_deleted_mask = 0` still finds them, and that is
  how `carry_out_erasure` verifies a deletion.

Erasure (`carry_out_erasure`) names the subject only by its `subject_ref` (sha256 of
`tenant:subject`), as the erasure ledger does: the mutation matches rows by that hash, so
the subject's id never appears in the statement, the mutation log or the receipt.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Protocol

import clickhouse_connect
from clickhouse_connect.driver import options as client_options
from clickhouse_connect.driver.client import Client

from schemas.erasures import ErasureRecorded
from streams.checkout import in_checkout, missing
from streams.private_files import narrowed_directory, private_directory
from streams.rows import ERASURES, RECEIPT_COLUMNS, SUBJECT_TABLES, receipt_row
from streams.settings import Settings

SCHEMA_DIR = in_checkout("deploy/clickhouse")
DATABASE = "uac"
SUBJECT_MATCH: Final = (
    "tenant_id = {tenant:String} "
    "AND lower(hex(SHA256(concat(tenant_id, ':', subject_id)))) = {subject_ref:String}"
)
"""The rows of one subject, named by its `subject_ref`."""
WAIT_FOR_MUTATION: Final[dict[str, Any]] = {"mutations_sync": 2}
MASKED_ROWS_TOO: Final[dict[str, Any]] = {"apply_deleted_mask": 0}


class Inserter(Protocol):
    """The one call the sink makes: a column-wise insert (a `Client` satisfies it)."""

    def insert(
        self,
        table: str,
        data: Sequence[Sequence[Any]],
        *,
        column_names: Sequence[str],
        column_oriented: bool,
        settings: dict[str, Any],
    ) -> object: ...


def connect(settings: Settings) -> Client:
    """A client for the configured ClickHouse: a server URL if set, else chDB at `chdb_path`.

    Datetimes come back tz-aware (UTC), matching how they are inserted. The chDB data path is
    the owner's only (0700, also when an older version made it open to others): its files hold
    the history in the clear, and the engine writes them readable by anyone who can reach them.
    """
    if settings.clickhouse_url:
        return clickhouse_connect.get_client(dsn=settings.clickhouse_url, tz_mode="aware")
    narrowed_directory(private_directory(settings.chdb_path))
    return clickhouse_connect.get_client(
        interface="chdb", path=str(settings.chdb_path), tz_mode="aware"
    )


def load_insert_dependencies() -> None:
    """Import now what clickhouse-connect imports on a client's first insert: pandas (which chDB
    installs), to tell whether the data is a DataFrame. A sink's first insert into chDB took
    0.12-0.16 s with it and 0.005 s after it (about 0.13 s of CPU moved to start-up, where it
    neither delays the first rows nor takes the core from the worker beside it)."""
    client_options.pd  # noqa: B018 (the attribute is resolved on first access)


def schema_files(directory: Path = SCHEMA_DIR) -> list[Path]:
    """The DDL files, in the order they apply (`001_...sql`, `002_...sql`, ...);
    CheckoutFileMissing when there are none (never an empty schema)."""
    found = sorted(directory.glob("*.sql"))
    if not found:
        raise missing(directory, "the ClickHouse DDL (*.sql)")
    return found


def ddl_statements(text: str) -> list[str]:
    """The statements of one DDL file: `--` comment lines dropped, split on semicolons."""
    code = "\n".join(line for line in text.splitlines() if not line.strip().startswith("--"))
    return [statement.strip() for statement in code.split(";") if statement.strip()]


def apply_schema(client: Client, directory: Path = SCHEMA_DIR) -> int:
    """Run every DDL statement (each is `IF NOT EXISTS`, so this is idempotent). Returns the count."""
    applied = 0
    for path in schema_files(directory):
        for statement in ddl_statements(path.read_text(encoding="utf-8")):
            client.command(statement)
            applied += 1
    return applied


def table_name(table: str) -> str:
    """The qualified name of one of UaC's tables."""
    return f"{DATABASE}.{table}"


def write_batch(
    client: Inserter,
    table: str,
    column_names: Sequence[str],
    rows: Sequence[Sequence[Any]],
    token: str,
) -> int:
    """Insert `rows` into `uac.<table>` column-wise in one insert; returns the row count.

    `token` becomes the insert's `insert_deduplication_token`: sending the same rows again with
    the same token (a retry after a failure whose outcome was unknown) is dropped by the engine.
    """
    if not rows:
        return 0
    columns = [list(column) for column in zip(*rows, strict=True)]
    client.insert(
        table_name(table),
        columns,
        column_names=list(column_names),
        column_oriented=True,
        settings={"insert_deduplication_token": token},
    )
    return len(rows)


class ErasureIncomplete(RuntimeError):
    """Rows of an erased subject are still stored after the deletion (the sink retries)."""


@dataclass(frozen=True)
class ErasureOutcome:
    """What carrying out one ledger entry did."""

    removed: dict[str, int]
    """Rows physically removed from each table this time (zero everywhere on a re-check)."""
    receipt_written: bool
    """False when the entry already had its receipt (the first one is kept)."""
    seconds: float


def _subject_parameters(tenant: str, subject_ref: str) -> dict[str, str]:
    return {"tenant": tenant, "subject_ref": subject_ref}


def stored_subject_rows(
    client: Client, tables: Iterable[str], tenant: str, subject_ref: str
) -> dict[str, int]:
    """Rows of the subject stored in each table, masked (lightweight-deleted) rows included."""
    counts: dict[str, int] = {}
    for table in tables:
        sql = f"SELECT count() FROM {table_name(table)} WHERE {SUBJECT_MATCH}"  # noqa: S608
        result = client.query(
            sql,
            parameters=_subject_parameters(tenant, subject_ref),
            settings=dict(MASKED_ROWS_TOO),
        )
        counts[table] = int(result.result_rows[0][0])
    return counts


def delete_subject_rows(client: Client, table: str, tenant: str, subject_ref: str) -> None:
    """Rewrite every part of `table` that holds the subject's rows without them (a mutation,
    waited for), so no copy stays in an active part, masked or not."""
    client.command(
        f"ALTER TABLE {table_name(table)} DELETE WHERE {SUBJECT_MATCH}",
        parameters=_subject_parameters(tenant, subject_ref),
        settings=dict(WAIT_FOR_MUTATION),
    )


def has_receipt(client: Client, tenant: str, erasure_id: str) -> bool:
    sql = (
        f"SELECT count() FROM {table_name(ERASURES)} "  # noqa: S608 (values are bound parameters)
        "WHERE tenant_id = {tenant:String} AND erasure_id = {id:String}"
    )
    result = client.query(sql, parameters={"tenant": tenant, "id": erasure_id})
    return int(result.result_rows[0][0]) > 0


def carry_out_erasure(
    client: Client, entry: ErasureRecorded, clock: Callable[[], datetime]
) -> ErasureOutcome:
    """Delete the subject of a ledger entry from every table, verify that no row is left and
    write the entry's receipt (once: an entry seen again is re-checked, its receipt kept).
    Raises ErasureIncomplete if rows remain; every step is idempotent, so a retry is safe."""
    started = time.monotonic()
    tenant, ref = entry.tenant_id, entry.subject_ref
    first = not has_receipt(client, tenant, entry.erasure_id)
    removed = stored_subject_rows(client, SUBJECT_TABLES, tenant, ref)
    for table, count in removed.items():
        if count:
            delete_subject_rows(client, table, tenant, ref)
    left = {table: n for table, n in stored_subject_rows(client, removed, tenant, ref).items() if n}
    if left:
        raise ErasureIncomplete(f"erasure {entry.erasure_id}: rows remain after deletion: {left}")
    if first:
        receipt = receipt_row(entry, removed, clock(), verified=True)
        write_batch(client, ERASURES, RECEIPT_COLUMNS, [receipt], f"uac-erasure/{entry.erasure_id}")
    return ErasureOutcome(removed, first, time.monotonic() - started)
