"""The `uac` entry point. The commands (`streams.cli_app`) import Faust, aiokafka, chDB and the
rest, which takes a second or more; they are imported once `main` runs, so a Ctrl-C at any
moment, while they load too, ends with one line, `interrupted`, and exit code 130, never a
traceback."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import Final

EXIT_INTERRUPTED: Final = 130
"""128 + SIGINT: what a shell reports for a command Ctrl-C ended (typer exits so too)."""


def main() -> None:
    """Run the `uac` command line (`streams.cli_app.run`)."""
    try:
        run = _commands()
        run()
    except KeyboardInterrupt:
        raise _interrupted() from None
    except SystemExit as leaving:
        if leaving.code == EXIT_INTERRUPTED:
            raise _interrupted() from None
        raise


def _commands() -> Callable[[], None]:
    """Import the commands with Ctrl-C held, then act on it: an interrupt raised while modules
    load can land in a finaliser, where Python prints it as ignored and goes on loading (the
    command would then run). Held, it ends the command as soon as they have loaded."""
    received: list[int] = []

    def hold(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)

    previous = signal.signal(signal.SIGINT, hold)
    try:
        from streams.cli_app import run
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        raise KeyboardInterrupt
    return run


def _interrupted() -> SystemExit:
    sys.stderr.write("interrupted\n")
    return SystemExit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()
