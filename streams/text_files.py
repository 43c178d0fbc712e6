"""Reading input files as text: UTF-8, or UTF-16 (what Windows PowerShell writes for `>`) or
UTF-32, told by their byte-order mark or, without one, by the zero bytes of the first
characters of JSON, which are ASCII (RFC 4627, section 3); gzip-compressed or not (bulk
exports often are); a UTF-8 byte-order mark dropped wherever a line starts with one (editors
on Windows write one, and exports joined with `cat` carry one per part); and in
line-per-record files a line that is not UTF-8 reported on its own, so one bad line never
hides the others."""

from __future__ import annotations

import codecs
import gzip
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from io import BufferedReader
from itertools import chain
from pathlib import Path
from typing import Final

from schemas.json_lines import NotUtf8

_GZIP_MAGIC: Final = b"\x1f\x8b"
_UTF16_BOMS: Final = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
DAMAGED_GZIP: Final = (gzip.BadGzipFile, EOFError, zlib.error)
"""What reading damaged or cut-off gzip data raises."""


def file_labels(paths: Sequence[Path]) -> list[str]:
    """How each file is named in messages: by its name, or by the path given when another file
    of the same call has that name (two exports from two servers, both `Patient.000.ndjson`)."""
    names = Counter(path.name for path in paths)
    return [path.name if names[path.name] == 1 else str(path) for path in paths]


def not_utf8(error: UnicodeDecodeError, where: str = "") -> str:
    """What to report for bytes that are not UTF-8, and where they went wrong."""
    return f"not UTF-8 text: {error.reason} at byte {error.start}{where}"


def _wide_encoding(head: bytes) -> str | None:
    """The UTF-16 or UTF-32 encoding the first bytes of a JSON text are in (None: UTF-8)."""
    if head.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return "utf-32"
    if head.startswith(_UTF16_BOMS):
        return "utf-16"
    if len(head) < 4 or 0 not in head[:4]:
        return None
    if head[:3] == bytes(3):
        return "utf-32-be"
    if head[1:4] == bytes(3):
        return "utf-32-le"
    if head[0] == 0 and head[2] == 0:
        return "utf-16-be"
    if head[1] == 0 and head[3] == 0:
        return "utf-16-le"
    return None


def _without_bom(data: bytes) -> bytes:
    return data[len(codecs.BOM_UTF8) :] if data.startswith(codecs.BOM_UTF8) else data


def _opened(path: Path) -> gzip.GzipFile | BufferedReader:
    """The file's bytes, decompressed if it is gzip data."""
    with path.open("rb") as probe:
        compressed = probe.read(len(_GZIP_MAGIC)) == _GZIP_MAGIC
    if compressed:
        return gzip.GzipFile(path, "rb")
    return path.open("rb")


def text_lines(path: Path) -> Iterator[str | NotUtf8]:
    """The file's lines; damaged gzip data or UTF-16 ends them with a line saying so."""
    with _opened(path) as raw:
        try:
            first = raw.readline()
            wide = _wide_encoding(first[:4])
            if wide is not None:
                yield from (first + raw.read()).decode(wide).splitlines(keepends=True)
                return
            for line in chain((first,), raw):
                try:
                    yield _without_bom(line).decode("utf-8")
                except UnicodeDecodeError as error:
                    yield NotUtf8(not_utf8(error, " of the line"))
        except DAMAGED_GZIP as error:
            yield NotUtf8(f"the gzip data is damaged: {error}")
        except UnicodeDecodeError as error:
            yield NotUtf8(f"not {error.encoding} text: {error.reason} at byte {error.start}")


def file_text(path: Path) -> str:
    """The whole file as text; raises UnicodeDecodeError when it is neither UTF-8 nor UTF-16
    or UTF-32 (`_wide_encoding`), one of DAMAGED_GZIP when its gzip data is damaged."""
    with _opened(path) as raw:
        data = raw.read()
    wide = _wide_encoding(data[:4])
    if wide is not None:
        return data.decode(wide)
    return _without_bom(data).decode("utf-8")
