"""Process care: a restart in place keeps its PID and command line; a bulk fold pauses the
cyclic collector and leaves it as it found it; a tuned process freezes its heap before the
interpreter's last collection."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import pytest

from streams.runtime import collector_paused

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


def test_given_a_bulk_fold_then_the_collector_is_paused_for_it_and_left_as_it_was() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_given_a_failing_bulk_fold_then_the_collector_is_enabled_again() -> None:
    with pytest.raises(ValueError, match="fold failed"), collector_paused():
        raise ValueError("fold failed")
    assert gc.isenabled()


EXITING = """
import atexit, gc
atexit.register(lambda: print(gc.get_freeze_count() - frozen_at_start > 40_000, flush=True))
from streams.runtime import tune_garbage_collector
tune_garbage_collector()
frozen_at_start = gc.get_freeze_count()
held = [[] for _ in range(50_000)]
"""


def test_given_a_tuned_process_exiting_then_what_it_holds_is_frozen_before_the_last_collection() -> (
    None
):
    """The interpreter's collection at exit would scan all 50,000 lists built after start-up;
    frozen first, it scans none of them (exit handlers run last registered first, so the check
    registered before the tuning runs after its handler; the margin is for start-up objects
    freed meanwhile, which leave the frozen count)."""
    result = subprocess.run(
        [sys.executable, "-c", EXITING], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "True"
