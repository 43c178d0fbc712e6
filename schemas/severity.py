"""How grave an alert is: the CDS Hooks card indicator. An alert carries it, and an
acknowledgement may say which grade it answered."""

from __future__ import annotations

from enum import StrEnum


class Severity(StrEnum):
    """CDS Hooks card indicator."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"
