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
  readers go through the sink's HTTP `/query` endpoint (see `streams.analytics`).
- `insert_deduplication_token` is honoured on the embedded engine when the table sets
  `non_replicated_deduplication_window` (the DDL does).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import clickhouse_connect
from clickhouse_connect.driver.client import Client

from streams.settings import Settings

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "deploy" / "clickhouse"
DATABASE = "uac"


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

    Datetimes come back tz-aware (UTC), matching how they are inserted.
    """
    if settings.clickhouse_url:
        return clickhouse_connect.get_client(dsn=settings.clickhouse_url, tz_mode="aware")
    settings.chdb_path.mkdir(parents=True, exist_ok=True)
    return clickhouse_connect.get_client(
        interface="chdb", path=str(settings.chdb_path), tz_mode="aware"
    )


def schema_files(directory: Path = SCHEMA_DIR) -> list[Path]:
    """The DDL files, in the order they apply (`001_...sql`, `002_...sql`, ...)."""
    return sorted(directory.glob("*.sql"))


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
