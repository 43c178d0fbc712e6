"""JSON text for the command line's machine-readable output: one document per line.

`json.dumps(..., ensure_ascii=False)` keeps U+0085, U+2028 and U+2029 as they are: valid JSON,
but line breaks to `str.splitlines()`, many log shippers and editors, so one record would be
read as several. They are written as `\\u` escapes; every other character stays as it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

_LINE_BREAKS_JSON_ALLOWS: Final = str.maketrans(
    {"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def json_line(
    document: Any, default: Callable[[Any], Any] | None = None, *, sort_keys: bool = True
) -> str:
    """One JSON document on one line, keys sorted (unless told), non-ASCII text readable."""
    text = json.dumps(document, ensure_ascii=False, sort_keys=sort_keys, default=default)
    return text.translate(_LINE_BREAKS_JSON_ALLOWS)
