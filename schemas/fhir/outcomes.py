"""OperationOutcome: what the source system says went wrong, not a record about a patient.

A bulk export writes one (`OperationOutcome.ndjson`, the export's `error` files) for each
resource or search it could not export, and a server answers a failed request with one. Read as
"an unsupported resource type", that would pass as a complete import of an incomplete export.
So an outcome with an `error` or `fatal` issue is an import error (`source_reported_error`)
that quotes the issue, and the command's exit code says something is missing; one with only
warnings or information is a skip that quotes them.
"""

from __future__ import annotations

from typing import Any, Final

from schemas.fhir.json_access import Json, Problem, Unmappable, Unsupported

OPERATION_OUTCOME: Final = "OperationOutcome"
FAILURES: Final = frozenset({"fatal", "error"})
QUOTED: Final = 200
"""Characters quoted of an issue's text; the rest is cut with an ellipsis."""


def reported(outcome: Json) -> Unmappable | Unsupported:
    """The import error (an error or fatal issue) or the skip an outcome stands for."""
    issues = [issue for issue in _list(outcome.get("issue")) if isinstance(issue, dict)]
    failures = [issue for issue in issues if _severity(issue) in FAILURES]
    quoted = "; ".join(_issue_text(issue) for issue in (failures or issues)) or "no issue"
    if failures:
        return Unmappable(
            Problem.SOURCE_REPORTED_ERROR,
            f"the source reports that it failed (the export or answer lacks what it could not "
            f"give): {quoted}",
        )
    return Unsupported(f"OperationOutcome without an error, the source notes: {quoted}")


def _issue_text(issue: Json) -> str:
    details = issue.get("details")
    words = [
        _text(issue.get("diagnostics")),
        _text(details.get("text")) if isinstance(details, dict) else None,
    ]
    said = next((word for word in words if word), None) or "no text"
    if len(said) > QUOTED:
        said = said[: QUOTED - 1] + "…"
    return f"{_severity(issue) or 'issue'} {_text(issue.get('code')) or ''}: {said}".replace(
        " :", ":"
    )


def _severity(issue: Json) -> str | None:
    return _text(issue.get("severity"))


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
