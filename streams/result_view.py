"""How an analyst query's result is shown in a terminal.

A result whose columns fit the console is a table. A wider one (`SELECT * FROM events` has 25
columns) would be squeezed into empty slivers, so it is shown one block per row instead, a
`column  value` line per column, as clickhouse-client's `Vertical` format does. Either way a
last line says how many rows came back, so an empty result is not an empty-looking table.
Values are shown as ClickHouse writes them: NULL for a missing value, JSON for arrays and maps.
"""

from __future__ import annotations

import json
from typing import Any, Final

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from streams.analytics import QueryResult

READABLE_COLUMN: Final = 16
"""Characters a column needs to stay readable in a table (fewer if none of its values is longer);
longer values wrap within it."""

TABLE_FRAME: Final = 3
"""Characters each column of a table adds (padding and a border), besides the first border."""


def shown(value: Any) -> str:
    """A value as text: NULL for None, JSON for arrays and maps, text as it is."""
    if value is None:
        return "NULL"
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def fits(result: QueryResult, width: int) -> bool:
    """Whether every column gets a readable width in a table `width` characters wide."""
    needed = 1
    for index, column in enumerate(result.columns):
        longest = max([len(column), *(len(shown(row[index])) for row in result.rows)])
        needed += min(longest, READABLE_COLUMN) + TABLE_FRAME
    return needed <= width


def result_view(result: QueryResult, width: int, title: str | None = None) -> RenderableType:
    """The result as a table if it fits `width`, else as one block per row; then its row count."""
    count = Text(f"{len(result.rows)} row{'' if len(result.rows) == 1 else 's'}", style="dim")
    if fits(result, width):
        return Group(_table(result, title), count)
    heading = [Text(title, style="italic")] if title else []
    return Group(*heading, *_rows(result), count)


def _table(result: QueryResult, title: str | None) -> Table:
    table = Table(title=title)
    for column in result.columns:
        table.add_column(column)
    for row in result.rows:
        table.add_row(*(shown(value) for value in row))
    return table


def _rows(result: QueryResult) -> list[RenderableType]:
    blocks: list[RenderableType] = []
    for number, row in enumerate(result.rows, start=1):
        block = Table.grid(padding=(0, 2))
        block.add_column(style="bold", no_wrap=True)
        block.add_column(overflow="fold")
        for column, value in zip(result.columns, row, strict=True):
            block.add_row(column, shown(value))
        blocks.extend([Text(f"Row {number}:", style="bold cyan"), block])
    return blocks
