"""`uac replay --file`: results per subject, printed for people (rich) or tools (JSON lines).

The JSON shape is a public contract: one object per subject per line with the keys
`tenant_id`, `subject_id`, `state`, `state_hash`, `alerts` (each alert with its `alert_id`),
and `rejected` (gate rejections of that subject's events).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console

from projections.document import plain, state_document, state_hash
from projections.queries import active_allergies, active_medications
from projections.state import UserState
from rules.batch import SubjectResult
from schemas.events import DEFAULT_PURPOSE
from streams.alert_output import alert_view
from streams.console_text import styled
from streams.event_files import LineError
from streams.json_out import json_line


def subject_json(result: SubjectResult) -> dict[str, Any]:
    state = result.state
    return {
        "tenant_id": state.tenant_id,
        "subject_id": state.subject_id,
        "state": state_document(state),
        "state_hash": state_hash(state),
        "alerts": [plain(alert) for alert in result.alerts],
        "rejected": [
            {
                "origin": submitted.origin,
                "event_id": submitted.event.id,
                "reasons": [reason.value for reason in rejection.reasons],
                "detail": rejection.detail,
            }
            for submitted, rejection in result.rejections
        ],
    }


def print_json(results: Mapping[str, SubjectResult], console: Console) -> None:
    for result in results.values():
        console.out(json_line(subject_json(result)), highlight=False)


def print_human(results: Mapping[str, SubjectResult], console: Console) -> None:
    for key, result in results.items():
        document = state_document(result.state)
        console.rule(styled(key, "bold", f"  version {document['version']}"))
        console.print(f"state_hash {state_hash(result.state)}")
        console.print(_summary(result.state, document))
        if result.alerts:
            console.print(alert_view(result.alerts, console.width))
        for submitted, rejection in result.rejections:
            record = submitted.event.source_ref
            where = f"{submitted.origin} ({record})" if record else submitted.origin
            console.print(styled("rejected", "yellow", f" {where}: {rejection.detail}"))


def _summary(state: UserState, document: Mapping[str, Any]) -> str:
    """The subject at its own time: allergies and medications in force at `as_of` (a course past
    its `valid_until` is not listed, though no stop was recorded)."""
    allergies = [_for(view.substance, view.record.purpose) for view in active_allergies(state)]
    medications = [_for(view.drug, view.prescribed.purpose) for view in active_medications(state)]
    trips = document["trips"]
    international = sum(1 for trip in trips if trip["international"])
    preferences = {
        _for(key, purpose): value["value"]
        for purpose, claims in sorted(document["preferences"].items())
        for key, value in claims.items()
    }
    lines = [
        f"active allergies: {', '.join(allergies) or '-'}",
        f"active medications: {', '.join(medications) or '-'}",
        f"trips: {len(trips)} ({international} international)",
        f"preferences: {preferences or '-'}",
        f"claims needing confirmation: {len(document['conflicts'])}",
    ]
    return "\n".join(lines)


def _for(name: str, purpose: str) -> str:
    """A claim's name, with its purpose when it is not the default (`penicillin (for research)`):
    the records of one id or key kept for two purposes are two."""
    return name if purpose == DEFAULT_PURPOSE else f"{name} (for {purpose})"


def print_line_errors(errors: list[LineError], console: Console) -> None:
    for error in errors:
        console.print(
            styled("error", "red", f" {error.origin}: {error.reason}: {error.message}"),
            highlight=False,
        )
