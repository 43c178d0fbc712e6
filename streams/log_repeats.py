"""Repeated log records of the Kafka client, held back.

While the broker cannot be reached, aiokafka logs the same few errors ("Unable connect to node
with id 1", "Unable to update metadata", "Failed fetch messages") many times a second in every
process: 6,767 lines from one worker in a 40 s outage. The first record of a kind (its logger,
level and message template) is logged; then at most one per window, saying how many like it
were held back since the last one logged. Records of other loggers pass untouched.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Final

NOISY_LOGGERS: Final = ("aiokafka",)
WINDOW_SECONDS: Final = 30.0
LOG_FORMAT: Final = "[%(asctime)s] [%(process)d] [%(levelname)s] %(message)s"
"""The worker's log line (Faust's format), for the processes that set up logging themselves."""

_Kind = tuple[str, int, str]


class RepeatedRecords(logging.Filter):
    """Lets through the first record of each kind of a noisy logger, then one per window (by
    the records' own times), with the count held back in between appended to its message."""

    def __init__(
        self, window_seconds: float = WINDOW_SECONDS, loggers: tuple[str, ...] = NOISY_LOGGERS
    ) -> None:
        super().__init__()
        self.window_seconds = window_seconds
        self.loggers = loggers
        self._last_logged: dict[_Kind, float] = {}
        self._held_back: dict[_Kind, int] = {}
        self._judged: tuple[logging.LogRecord, bool] | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether to log `record`; the same record reaching several handlers is judged once."""
        if self._judged is not None and self._judged[0] is record:
            return self._judged[1]
        logged = self._judge(record)
        self._judged = (record, logged)
        return logged

    def _judge(self, record: logging.LogRecord) -> bool:
        if not _from(record.name, self.loggers):
            return True
        kind = (record.name, record.levelno, str(record.msg))
        last = self._last_logged.get(kind)
        if last is not None and record.created - last < self.window_seconds:
            self._held_back[kind] = self._held_back.get(kind, 0) + 1
            return False
        self._last_logged[kind] = record.created
        held = self._held_back.pop(kind, 0)
        if held:
            record.msg = f"{record.msg} ({held:,} more like it since the last one logged)"
        return True


def hold_back_repeats(handlers: Iterable[logging.Handler]) -> None:
    """Give every handler one shared `RepeatedRecords` filter."""
    repeats = RepeatedRecords()
    for handler in handlers:
        handler.addFilter(repeats)


def _from(name: str, loggers: tuple[str, ...]) -> bool:
    return any(name == logger or name.startswith(f"{logger}.") for logger in loggers)
