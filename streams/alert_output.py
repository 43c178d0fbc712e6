"""How alerts are read from the alerts topic and shown: a table for people, JSON lines for
tools, FHIR R4 DetectedIssue resources for clinical systems."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from rich.console import Console
from rich.table import Table

from projections.document import plain
from schemas.alerts import Alert
from schemas.codec import alert_codec
from schemas.fhir.detected_issue import detected_issue, detected_issue_bundle
from streams.json_out import json_document, json_line
from streams.sealing import Sealer, readable


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


def alert_table(alerts: list[Alert], title: str = "Alerts") -> Table:
    table = Table(title=title, expand=False)
    for column in ("subject", "status", "severity", "rule", "title", "alert_id"):
        table.add_column(column, overflow="fold")
    for alert in alerts:
        table.add_row(
            alert.key,
            alert.status.value,
            alert.severity.value,
            alert.rule_id,
            alert.title,
            str(alert.alert_id),
        )
    return table


def print_alerts(alerts: list[Alert], console: Console, output: AlertFormat) -> None:
    """All alerts at once: a table, JSON lines, or one FHIR Bundle of DetectedIssues."""
    if output is AlertFormat.TABLE:
        console.print(alert_table(alerts))
    elif output is AlertFormat.JSON:
        for alert in alerts:
            console.out(alert_json(alert), highlight=False)
    else:
        bundle = detected_issue_bundle(alerts)
        console.out(json_document(bundle), highlight=False)


def print_alert(alert: Alert, console: Console, output: AlertFormat) -> None:
    """One alert as it arrives: a line, a JSON line, or a DetectedIssue as one NDJSON line."""
    if output is AlertFormat.TABLE:
        console.print(
            f"{alert.status.value:>12} {alert.severity.value:<8} {alert.key} {alert.title}"
        )
    elif output is AlertFormat.JSON:
        console.out(alert_json(alert), highlight=False)
    else:
        issue = json_line(detected_issue(alert))
        console.out(issue, highlight=False)
