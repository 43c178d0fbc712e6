"""The README's main-job command: `uac demo` on embedded defaults shows alerts and answers (the
analyst views, which read each subject's latest checkpoint, with the sample's trips and
allergies in them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_given_a_fresh_home_then_the_demo_prints_the_alerts_and_the_analyst_answers(
    tmp_path: Path,
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "streams.cli", "demo"],
        env=os.environ | {"UAC_HOME": str(tmp_path), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    shown = result.stdout
    assert result.returncode == 0, shown[-3000:] + result.stderr[-3000:]
    assert "drug-allergy-conflict" in shown
    assert "critical" in shown
    assert "duplicate-therapy" in shown
    assert "allergy-list-contradiction" in shown
    assert "resolved" in shown
    for answer in ("International trips per subject per year", "Active allergies"):
        assert answer in shown
    rows = table_rows(shown)
    assert ["p-1001", "2024", "2", "3"] in rows
    assert ["p-1001", "2025", "2", "2"] in rows
    assert ["u-42", "2024", "2", "4"] in rows
    assert ["p-1001", "Penicillin", "high", "confirmed"] in rows
    assert "Stopped" in shown


def table_rows(shown: str) -> list[list[str]]:
    """The cells of every one-line row of the tables rich printed."""
    return [
        [cell.strip() for cell in line.strip().strip("│").split("│")]
        for line in shown.splitlines()
        if line.startswith("│")
    ]
