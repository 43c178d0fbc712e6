"""JSON text for the command line's machine-readable output: one document per line.

`json.dumps(..., ensure_ascii=False)` keeps DEL, the C1 controls (U+0080 to U+009F, U+0085 among
them), U+2028 and U+2029 as they are: valid JSON, but line breaks to `str.splitlines()`, many log
shippers and editors (so one record would be read as several), and terminal controls to a
terminal. They are written as `\\u` escapes; every other character stays as it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

_CONTROLS_JSON_ALLOWS: Final = str.maketrans(
    {
        character: f"\\u{ord(character):04x}"
        for character in (*map(chr, range(0x7F, 0xA0)), "\u2028", "\u2029")
    }
)


def json_line(
    document: Any, default: Callable[[Any], Any] | None = None, *, sort_keys: bool = True
) -> str:
    """One JSON document on one line, keys sorted (unless told), non-ASCII text readable."""
    text = json.dumps(document, ensure_ascii=False, sort_keys=sort_keys, default=default)
    return text.translate(_CONTROLS_JSON_ALLOWS)


def json_document(document: Any) -> str:
    """One JSON document over several indented lines, escaped like `json_line`."""
    return json.dumps(document, ensure_ascii=False, indent=2).translate(_CONTROLS_JSON_ALLOWS)
