"""The README's main-job command: `uac demo` on embedded defaults shows alerts and answers."""

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
    assert "resolved" in shown
    for answer in ("International trips per subject per year", "Active allergies"):
        assert answer in shown
    assert "Stopped" in shown
