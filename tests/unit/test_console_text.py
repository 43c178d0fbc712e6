"""The consoles write data escaped, whatever renders it: a string, a `Text`, JSON, a heading.

JSON writes C0 controls as `\\u001b` itself, but not DEL and the C1 controls (`\\x9b` is a CSI)."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest
from rich.text import Text

from streams.console_text import DataConsole

NAME = "p\x1b]0;pwned\x07\x1b[31m \x9b2J\x7f"


@pytest.mark.parametrize(
    "write",
    [
        pytest.param(lambda console: console.print(NAME), id="given a string"),
        pytest.param(lambda console: console.print(Text(NAME, style="bold")), id="given a Text"),
        pytest.param(lambda console: console.print_json(data={"subject": NAME}), id="given JSON"),
        pytest.param(lambda console: console.rule(Text(NAME)), id="given a heading"),
    ],
)
def test_given_control_characters_in_data_then_the_console_writes_them_escaped(
    write: Callable[[DataConsole], None],
) -> None:
    console = DataConsole()
    console.file = io.StringIO()
    write(console)
    printed = console.file.getvalue()
    assert not any(character in printed for character in "\x1b\x07\x9b\x7f")
    assert "\\x9b2J\\x7f" in printed


def test_given_an_id_that_looks_like_an_emoji_code_then_it_is_written_as_it_is() -> None:
    console = DataConsole()
    console.file = io.StringIO()
    console.print("no state for clinic-a:x:thumbs_up: nor clinic-b:a:b")
    assert console.file.getvalue() == "no state for clinic-a:x:thumbs_up: nor clinic-b:a:b\n"
