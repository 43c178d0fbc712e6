"""Process-level tuning and care for long-running UaC processes.

The fold allocates many small, acyclic, long-lived objects (persistent maps and tuples).
CPython's cyclic garbage collector rescans the whole old generation as it grows, which on a
worker holding many subjects costs more than the fold itself; reference counting already frees
these objects. So processes that fold at volume raise the collection thresholds and move what
start-up built (code, settings, knowledge tables) out of the collector's view, and what the
process holds when it exits.

A process can also restart itself in place, and dump what its tasks wait for on request.
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NoReturn

log = logging.getLogger(__name__)
YOUNG_THRESHOLD = 100_000
MIDDLE_THRESHOLD = 5
"""Young collections between two middle-generation ones. A middle collection rescans every
object the young ones kept since the last, so this bounds the pause: folding 400,000 events of
new subjects, 50 gave one pause of 4.2 s, 5 gave pauses of 0.44-0.74 s, for the same total
(21.2 and 22.7 us of collection per event; docs/operator.md, Capacity)."""
OLD_THRESHOLD = 1_000


def tune_garbage_collector() -> None:
    """Raise the thresholds, freeze what start-up built, and skip the collection at exit: the
    interpreter's last collection scans the whole heap, which a worker holding 20,000 subjects
    spent 10 s on after it had stopped (11.3 s from SIGTERM to exit, 1.1 s with the heap frozen
    first; docs/operator.md, Capacity). Nothing is lost by it: the process is ending, and what
    needs closing closed before (Faust's services stopped, logging's own exit handler, which
    runs after this one, flushes the logs)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
    atexit.unregister(gc.freeze)  # once per process, however often it is tuned
    atexit.register(gc.freeze)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run a bulk fold without the cyclic collector: what it builds is acyclic (reference
    counting frees it) and would otherwise be rescanned by each collection as it grows."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def awaiting(coroutine: object) -> list[str]:
    """The chain of frames a coroutine is suspended in, outermost first."""
    frames: list[str] = []
    while coroutine is not None:
        frame = getattr(coroutine, "cr_frame", None) or getattr(coroutine, "ag_frame", None)
        if frame is not None:
            frames.append(f"  {frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}")
        coroutine = (
            getattr(coroutine, "cr_await", None)
            or getattr(coroutine, "ag_await", None)
            or getattr(coroutine, "gi_yieldfrom", None)
        )
    return frames


def dump_tasks_on_signal(
    describe: Callable[[], list[str]] = list, signum: int = signal.SIGUSR1
) -> None:
    """On `kill -USR1 <pid>`, write every asyncio task's stack to the log, then the lines of
    `describe`: what a stuck worker is waiting for (operators' diagnosis; costs nothing until
    signalled)."""

    def dump() -> None:
        for task in asyncio.all_tasks():
            log.warning("task %s:\n%s", task.get_name(), "\n".join(awaiting(task.get_coro())))
        for line in describe():
            log.warning("%s", line)

    asyncio.get_running_loop().add_signal_handler(signum, dump)


def restart_in_place() -> NoReturn:
    """Replace this process with a fresh run of the same command (same PID, so supervisors
    and PID files still point at it). Sockets are not inherited."""
    logging.shutdown()
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])  # noqa: S606 (our own argv)
