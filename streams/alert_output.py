"""How alerts are shown: a table for people, JSON lines for tools."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

from projections.document import plain
from schemas.alerts import Alert


def alert_json(alert: Alert) -> str:
    return json.dumps(plain(alert), ensure_ascii=False, sort_keys=True)


def alert_table(alerts: list[Alert], title: str = "Alerts") -> Table:
    table = Table(title=title, expand=False)
    for column in ("subject", "status", "severity", "rule", "title", "alert_id"):
        table.add_column(column, overflow="fold")
    for alert in alerts:
        table.add_row(
            f"{alert.tenant_id}:{alert.subject_id}",
            alert.status.value,
            alert.severity.value,
            alert.rule_id,
            alert.title,
            str(alert.alert_id),
        )
    return table


def print_alerts(alerts: list[Alert], console: Console, as_json: bool) -> None:
    if as_json:
        for alert in alerts:
            console.out(alert_json(alert), highlight=False)
    else:
        console.print(alert_table(alerts))
