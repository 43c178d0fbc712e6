"""A process restarting itself in place keeps its PID and its command line."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = """
import os, sys
from streams.runtime import restart_in_place
print(os.getpid(), sys.argv[1:], flush=True)
if not os.environ.get("RESTARTED"):
    os.environ["RESTARTED"] = "1"
    restart_in_place()
"""


def test_given_a_restart_in_place_then_the_same_pid_runs_the_same_command_again() -> None:
    env = {key: value for key, value in os.environ.items() if key != "RESTARTED"}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, "worker", "--loglevel", "info"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=env,
    )
    first, second = result.stdout.splitlines()
    assert first == second
    assert first.endswith("['worker', '--loglevel', 'info']")
