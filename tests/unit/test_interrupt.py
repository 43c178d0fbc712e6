"""Ctrl-C ends any `uac` command with one line, `interrupted`, and exit code 130: while the
command's modules are still loading too, never a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streams import cli, cli_app


def test_given_ctrl_c_while_the_commands_load_then_interrupted_and_exit_130(
    tmp_path: Path,
) -> None:
    """The interpreter is up within a tenth of a second; loading the commands takes a second or
    more, so the signal lands while they load."""
    process = subprocess.Popen(
        [sys.executable, "-c", "from streams.cli import main; main()", "worker"],
        env=os.environ | {"UAC_HOME": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.3)
    assert process.poll() is None, "the command ended before it was interrupted"
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert stderr == "interrupted\n"
    assert stdout == ""


def test_given_ctrl_c_while_a_command_runs_then_interrupted_and_exit_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def interrupted_check(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_app, "judge_drug", interrupted_check)
    monkeypatch.setattr(sys, "argv", ["uac", "check-drug", "--allergy", "x", "--drug", "y"])
    monkeypatch.setenv("UAC_HOME", str(tmp_path))
    with pytest.raises(SystemExit) as stopped:
        cli.main()
    assert stopped.value.code == 130
    assert capsys.readouterr().err == "interrupted\n"
