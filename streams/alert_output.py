"""How alerts are read from the alerts topic and shown: a table for people, JSON lines for
tools, FHIR R4 DetectedIssue resources for clinical systems."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from enum import StrEnum
from typing import Any, Final
from uuid import UUID

from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from projections.document import plain
from schemas.alerts import ALERT_DEFAULT_PURPOSE, Alert, AlertStatus
from schemas.codec import alert_codec
from schemas.fhir.detected_issue import detected_issue, detected_issue_bundle, first_raised
from streams.console_text import visible
from streams.json_out import json_document, json_line
from streams.result_view import TABLE_FRAME
from streams.sealing import Sealer, readable

STATUS_WIDTH: Final = max(len(status.value) for status in AlertStatus) + 1
"""The column of a lifecycle status in text output ("overridden" needs 10 characters)."""


class AlertFormat(StrEnum):
    TABLE = "table"
    JSON = "json"
    FHIR = "fhir"


def readable_alerts(records: Iterable[Any], sealer: Sealer) -> list[Alert]:
    """The alerts of topic records that can still be opened (erased subjects' cannot)."""
    codec = alert_codec()
    return [
        codec.decode(framed) for record in records if (framed := readable(sealer, record.value))
    ]


def alert_json(alert: Alert) -> str:
    return json_line(plain(alert))


ALERT_COLUMNS: Final = ("subject", "status", "severity", "rule", "title", "alert_id")

READABLE_TITLE: Final = 40
"""Characters the title column needs for an alert table to be worth showing as one."""

_SEVERITY_STYLE: Final = {"critical": "bold red", "warning": "yellow"}


def alert_view(alerts: list[Alert], width: int, title: str = "Alerts") -> RenderableType:
    """The alerts as a table when it fits `width` with a readable title column; else one block
    per alert (a line of status, severity, subject and rule, then its title and its id), so a
    narrow terminal does not fold every title and id into slivers. Then how many there are."""
    count = Text(f"{len(alerts)} alert{'' if len(alerts) == 1 else 's'}", style="dim")
    if _table_fits(alerts, width):
        return Group(_alert_table(alerts, title), count)
    return Group(Text(title, style="italic"), *(_alert_block(alert) for alert in alerts), count)


def _cells(alert: Alert) -> tuple[str, ...]:
    status, severity = alert.status.value, alert.severity.value
    return (alert.key, status, severity, _rule(alert), alert.title, str(alert.alert_id))


def _rule(alert: Alert) -> str:
    """The rule of an alert, with its purpose when that is not the default: `uac replay` lists
    the alerts of every purpose side by side."""
    if alert.purpose == ALERT_DEFAULT_PURPOSE:
        return alert.rule_id
    return f"{alert.rule_id} (for {alert.purpose})"


def _table_fits(alerts: list[Alert], width: int) -> bool:
    rows = [_cells(alert) for alert in alerts]
    needed = 1
    for index, column in enumerate(ALERT_COLUMNS):
        longest = max([len(column), *(len(row[index]) for row in rows)])
        needed += (READABLE_TITLE if column == "title" else longest) + TABLE_FRAME
    return needed <= width


def _alert_table(alerts: list[Alert], title: str) -> Table:
    table = Table(title=title, expand=False)
    for column in ALERT_COLUMNS:
        table.add_column(column, overflow="fold")
    for alert in alerts:
        table.add_row(*_cells(alert))
    return table


def _alert_block(alert: Alert) -> RenderableType:
    heading = Text.assemble(
        (f"{alert.status.value:<{STATUS_WIDTH}}", "bold"),
        (f"{alert.severity.value:<9}", _SEVERITY_STYLE.get(alert.severity.value, "")),
        visible(f"{alert.key}  {_rule(alert)}"),
        no_wrap=False,
        overflow="fold",
    )
    title = Text(visible(alert.title), no_wrap=False, overflow="fold")
    body = Group(title, Text(f"alert {alert.alert_id}", style="dim"))
    return Group(heading, Padding(body, (0, 0, 0, 2)))


def print_alerts(alerts: list[Alert], console: Console, output: AlertFormat) -> None:
    """All alerts at once: a table, JSON lines, or one FHIR Bundle of DetectedIssues."""
    if output is AlertFormat.TABLE:
        console.print(alert_view(alerts, console.width))
    elif output is AlertFormat.JSON:
        for alert in alerts:
            console.out(alert_json(alert), highlight=False)
    else:
        bundle = detected_issue_bundle(alerts)
        console.out(json_document(bundle), highlight=False)


def print_alert(
    alert: Alert, console: Console, output: AlertFormat, identified: dict[UUID, datetime]
) -> None:
    """One alert as it arrives: a line, a JSON line, or a DetectedIssue as one NDJSON line
    (`identified`: when each alert printed so far was first raised, kept up to date here)."""
    if output is AlertFormat.TABLE:
        console.print(
            f"{alert.status.value:>12} {alert.severity.value:<8} {alert.key} {alert.title}"
        )
    elif output is AlertFormat.JSON:
        console.out(alert_json(alert), highlight=False)
    else:
        first_raised([alert], identified)
        issue = json_line(detected_issue(alert, identified.get(alert.alert_id)))
        console.out(issue, highlight=False)
