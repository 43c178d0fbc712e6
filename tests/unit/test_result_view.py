"""An analyst's query result in a terminal: readable whatever its width, with its row count."""

from __future__ import annotations

import io

import pytest

from streams.analytics import QueryResult
from streams.console_text import DataConsole
from streams.result_view import result_view

EVENT_COLUMNS = tuple(f"column_{number:02d}" for number in range(25))


def printed(result: QueryResult, width: int = 80) -> list[str]:
    console = DataConsole()
    console.file, console.width = io.StringIO(), width
    console.print(result_view(result, width))
    text = console.file.getvalue()
    assert isinstance(text, str)
    return [line.rstrip() for line in text.splitlines()]


def test_given_more_columns_than_the_terminal_holds_then_every_value_is_shown_by_name() -> None:
    row = [f"value-{number}" for number in range(25)]
    lines = printed(QueryResult(EVENT_COLUMNS, [row, row]))
    assert [line for line in lines if line.startswith("Row ")] == ["Row 1:", "Row 2:"]
    for number, column in enumerate(EVENT_COLUMNS):
        named = [line.split() for line in lines if line.startswith(column)]
        assert named == [[column, f"value-{number}"]] * 2
    assert lines[-1] == "2 rows"


def test_given_a_narrow_result_then_a_table_with_its_row_count() -> None:
    lines = printed(QueryResult(("subject_id", "trips"), [["p-1001", 3]]))
    assert any("subject_id" in line and "trips" in line for line in lines)
    assert any("p-1001" in line and "3" in line for line in lines)
    assert lines[-1] == "1 row"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(None, "NULL", id="given a missing value then NULL, not None"),
        pytest.param(["a", "b"], '["a", "b"]', id="given an array then JSON"),
        pytest.param({"k": "青霉素"}, '{"k": "青霉素"}', id="given a map then JSON, text as it is"),
    ],
)
def test_values_are_shown_as_clickhouse_writes_them(value: object, expected: str) -> None:
    lines = printed(QueryResult(("value",), [[value]]))
    assert any(expected in line for line in lines)


def test_given_no_rows_then_it_says_so() -> None:
    assert printed(QueryResult(EVENT_COLUMNS, []))[-1] == "0 rows"
    assert printed(QueryResult(("subject_id",), []))[-1] == "0 rows"
