"""How `uac explain` shows an alert's chain to a person: the alert, its rule and cause, its
lifecycle, the evidence, and each event it names with its roles and where it sits in the log
(events topic and accepted topic, partition and offset). `--json` prints the chain itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from streams.alert_output import STATUS_WIDTH
from streams.console_text import styled, titled_table, when


def explanation_view(chain: Mapping[str, Any]) -> RenderableType:
    """An alert's explanation, as `uac explain` prints it without `--json`."""
    rule = chain["rule"]
    parts: list[RenderableType] = [
        Rule(styled(f"alert {chain['alert_id']}", "bold")),
        Text(f"subject {chain['tenant_id']}:{chain['subject_id']}; purpose {chain['purpose']}"),
        Text(f"rule {rule['id']} v{rule['version']}; cause: {', '.join(map(str, chain['cause']))}"),
        _lifecycle(chain["lifecycle"]),
    ]
    if chain["evidence"]:
        parts.append(_evidence(chain["evidence"]))
    parts.append(_events(chain["events"]))
    if chain["missing_event_ids"]:
        missing = ", ".join(map(str, chain["missing_event_ids"]))
        parts.append(Text(f"events the alert names that the history does not hold: {missing}"))
    return Group(*parts)


def _cell(value: Any) -> str:
    """A value of the chain as text (ids may come back from the engine as UUIDs); `-` for none."""
    return "-" if value is None or value == "" else str(value)


def _lifecycle(records: list[Mapping[str, Any]]) -> RenderableType:
    """A line per lifecycle record (status, severity, when, and its reason), then the event
    that triggered it."""
    lines: list[RenderableType] = [Text("Lifecycle", style="italic")]
    for record in records:
        reason = f"  reason: {record['reason']}" if record["reason"] else ""
        lines.append(
            Text.assemble(
                (f"{_cell(record['status']):<{STATUS_WIDTH}}", "bold"),
                f"{_cell(record['severity']):<9}{when(record['occurred_at'])}{reason}",
            )
        )
        lines.append(Text(f"  triggered by {_cell(record['trigger_event_id'])}", style="dim"))
    return Group(*lines)


def _evidence(items: list[Mapping[str, Any]]) -> Table:
    table = titled_table("Evidence", "role", "claim", "description")
    for item in items:
        table.add_row(*(_cell(item[name]) for name in ("role", "claim_id", "description")))
    return table


def _events(events: list[Mapping[str, Any]]) -> RenderableType:
    """One block per event (its id, type and roles, then where it came from and where it sits
    in the log), so that ids and topic names are not folded into slivers."""
    blocks: list[RenderableType] = [Text("Events", style="italic")]
    for event in events:
        roles = ", ".join(event["roles"]) or "-"
        blocks.append(Text(f"{_cell(event['event_id'])}  {_cell(event['type'])}  ({roles})"))
        block = Table.grid(padding=(0, 2))
        block.add_column(style="dim", no_wrap=True)
        block.add_column(overflow="fold")
        origin = _cell(event["origin"])
        if event["source_ref"]:
            origin += f" ({event['source_ref']})"
        block.add_row("  origin", origin)
        block.add_row("  occurred", when(event["occurred_at"]))
        block.add_row("  events topic", _coordinates(event["events_topic"]))
        block.add_row("  accepted topic", _coordinates(event["accepted_topic"]))
        blocks.append(block)
    return Group(*blocks)


def _coordinates(place: Mapping[str, Any]) -> str:
    """A record's place in the log: `topic/partition/offset`."""
    return f"{place['topic']}/{place['partition']}/{place['offset']}"
