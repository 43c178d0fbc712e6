"""The consoles' text is data: never read as console markup, control characters shown escaped.

A drug "Amoxicillin [as trihydrate]" keeps its bracketed words, a value "[/b]" does not stop
the command, and an escape sequence in an imported name (`\x1b]0;...`) cannot recolour, move the
cursor or retitle the terminal of whoever reads the alerts: it is printed as `\x1b`."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Final, Literal

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text

_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0 controls but tab and line feed, DEL, and the C1 controls."""


def visible(text: str) -> str:
    """`text` with each control character written as its `\\xNN` escape."""
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)


def styled(label: str, style: str, rest: str = "") -> Text:
    """`label` in `style`, then `rest` exactly as it is (control characters escaped in both: a
    label may be data too, a subject's key heading its section)."""
    return Text.assemble((visible(label), style), visible(rest))


class DataConsole(Console):
    """A console for text that holds data: markup and emoji codes off, control characters escaped in every
    string it renders (printed, in a table cell, in a rule's title), and in the text of every
    segment it writes, so a `Text` built from data without `visible` is written escaped too."""

    def __init__(self, *, stderr: bool = False) -> None:
        super().__init__(stderr=stderr, soft_wrap=True, markup=False, emoji=False)

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterator[Segment]:
        for segment in super().render(renderable, options):
            if segment.control or not _CONTROL.search(segment.text):
                yield segment
            else:
                yield Segment(visible(segment.text), segment.style)

    def render_str(
        self,
        text: str,
        *,
        style: str | Style = "",
        justify: Literal["default", "left", "center", "right", "full"] | None = None,
        overflow: Literal["fold", "crop", "ellipsis", "ignore"] | None = None,
        emoji: bool | None = None,
        markup: bool | None = None,
        highlight: bool | None = None,
        highlighter: Callable[[str | Text], Text] | None = None,
    ) -> Text:
        return super().render_str(
            visible(text),
            style=style,
            justify=justify,
            overflow=overflow,
            emoji=emoji,
            markup=markup,
            highlight=highlight,
            highlighter=highlighter,
        )


def when(moment: str | None) -> str:
    """A document time (`2024-03-04T09:15:00.000Z`) as a person reads it (`2024-03-04 09:15:00`);
    `-` for none."""
    if moment is None:
        return "-"
    return moment.replace("T", " ").removesuffix("Z").removesuffix(".000")


def titled_table(title: str, *columns: str) -> Table:
    """A table of the people views (`uac state`, `uac explain`): its title on the left, as wide
    as its content, long values folded inside their column."""
    table = Table(title=title, title_justify="left", expand=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    return table
