"""Styled console text whose data is never read as console markup."""

from __future__ import annotations

from rich.text import Text


def styled(label: str, style: str, rest: str = "") -> Text:
    """`label` in `style`, then `rest` exactly as it is (a drug "Amoxicillin [as trihydrate]",
    a field `medication[x]` or a value "[/b]" stays as written)."""
    return Text.assemble((label, style), rest)
