"""Alerts in a terminal: every title and alert id readable whole, whatever the width."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from uuid import UUID

from schemas.alerts import Alert, AlertStatus
from schemas.severity import Severity
from streams.alert_output import alert_view
from streams.console_text import DataConsole

TITLE = (
    "Amoxicillin 500 MG / Clavulanate 125 MG Oral Tablet conflicts with the recorded "
    "Penicillin allergy"
)


def alert(
    status: AlertStatus, title: str = TITLE, number: int = 1, subject: str = "p-1001"
) -> Alert:
    return Alert(
        lifecycle_id=UUID(int=number * 2),
        alert_id=UUID(int=number),
        tenant_id="clinic-a",
        subject_id=subject,
        rule_id="drug-allergy-conflict",
        rule_version=1,
        status=status,
        severity=Severity.CRITICAL,
        title=title,
        detail="",
        cause=("e-1", "e-2"),
        evidence=(),
        trigger_event_id="e-2",
        occurred_at=datetime(2025, 3, 1, tzinfo=UTC),
    )


def printed(alerts: list[Alert], width: int) -> list[str]:
    console = DataConsole()
    console.file, console.width = io.StringIO(), width
    console.print(alert_view(alerts, width, "Alerts on uac.alerts"))
    text = console.file.getvalue()
    assert isinstance(text, str)
    return [line.rstrip() for line in text.splitlines()]


def test_given_a_narrow_terminal_then_each_alert_is_a_block_with_its_id_whole() -> None:
    alerts = [alert(AlertStatus.RAISED), alert(AlertStatus.RESOLVED, "Short title", number=2)]
    lines = printed(alerts, 80)
    assert lines[0] == "Alerts on uac.alerts"
    headings = [line.split() for line in lines if line.startswith(("raised", "resolved"))]
    assert headings == [
        ["raised", "critical", "clinic-a:p-1001", "drug-allergy-conflict"],
        ["resolved", "critical", "clinic-a:p-1001", "drug-allergy-conflict"],
    ]
    assert "  alert 00000000-0000-0000-0000-000000000001" in lines
    assert "  alert 00000000-0000-0000-0000-000000000002" in lines
    assert "  Short title" in lines
    assert all(len(line) <= 80 for line in lines)
    assert " ".join(line.strip() for line in lines[2:4]) == TITLE
    assert lines[-1] == "2 alerts"


def test_given_a_wide_terminal_then_a_table_with_one_row_per_alert() -> None:
    lines = printed([alert(AlertStatus.RAISED)], 220)
    header = next(line for line in lines if "subject" in line)
    assert [cell.strip() for cell in header.split("┃")[1:-1]] == [
        "subject",
        "status",
        "severity",
        "rule",
        "title",
        "alert_id",
    ]
    row = next(line for line in lines if "clinic-a:p-1001" in line)
    assert TITLE in row and "00000000-0000-0000-0000-000000000001" in row
    assert lines[-1] == "1 alert"


def test_given_no_alerts_then_the_count_says_so() -> None:
    assert printed([], 80)[-1] == "0 alerts"


def test_given_control_characters_in_an_alerts_subject_and_title_then_every_view_shows_them_escaped() -> (
    None
):
    shown = alert(AlertStatus.RAISED, "Penicillin \x1b[2J conflict", subject="p\x1b]0;pwned\x07")
    for width in (80, 200):
        lines = printed([shown], width)
        assert not any(character in "".join(lines) for character in "\x1b\x07"), width
        assert any("p\\x1b]0;pwned\\x07" in line for line in lines), width


def test_an_alert_of_another_purpose_than_care_says_its_purpose_in_every_view() -> None:
    """`uac replay` lists the alerts of every purpose side by side."""
    research = alert(AlertStatus.RAISED).model_copy(update={"purpose": "research"})
    care = alert(AlertStatus.RAISED, number=2)
    for width in (80, 240):
        shown = "\n".join(printed([research, care], width))
        assert "drug-allergy-conflict (for research)" in shown, width
        assert shown.count("(for ") == 1, width
