"""Reading input files as text: UTF-8, a leading byte-order mark dropped (editors on Windows
write one), and in line-per-record files a line that is not UTF-8 reported on its own, so one
bad line never hides the others."""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from pathlib import Path

from schemas.json_lines import NotUtf8


def not_utf8(error: UnicodeDecodeError, where: str = "") -> str:
    """What to report for bytes that are not UTF-8, and where they went wrong."""
    return f"not UTF-8 text: {error.reason} at byte {error.start}{where}"


def _without_bom(data: bytes) -> bytes:
    return data[len(codecs.BOM_UTF8) :] if data.startswith(codecs.BOM_UTF8) else data


def utf8_lines(path: Path) -> Iterator[str | NotUtf8]:
    with path.open("rb") as raw:
        for number, line in enumerate(raw):
            try:
                yield (_without_bom(line) if number == 0 else line).decode("utf-8")
            except UnicodeDecodeError as error:
                yield NotUtf8(not_utf8(error, " of the line"))


def utf8_text(path: Path) -> str:
    """The whole file as text; raises UnicodeDecodeError when it is not UTF-8."""
    return _without_bom(path.read_bytes()).decode("utf-8")
