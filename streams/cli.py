"""The `uac` entry point. The commands (`streams.cli_app`) import Faust, aiokafka, chDB and the
rest, which takes a second or more; they are imported once `main` runs, so a Ctrl-C at any
moment, while they load too, ends with one line, `interrupted`, and exit code 130, never a
traceback."""

from __future__ import annotations

import sys
from typing import Final

EXIT_INTERRUPTED: Final = 130
"""128 + SIGINT: what a shell reports for a command Ctrl-C ended (typer exits so too)."""


def main() -> None:
    """Run the `uac` command line (`streams.cli_app.run`)."""
    try:
        from streams.cli_app import run

        run()
    except KeyboardInterrupt:
        raise _interrupted() from None
    except SystemExit as leaving:
        if leaving.code == EXIT_INTERRUPTED:
            raise _interrupted() from None
        raise


def _interrupted() -> SystemExit:
    sys.stderr.write("interrupted\n")
    return SystemExit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()
