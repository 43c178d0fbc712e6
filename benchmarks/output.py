"""What the benchmark scripts print besides their figures."""

from __future__ import annotations

import logging


def quiet_producer_retries() -> None:
    """Topics are created just before they are written, and until a new partition's leader is
    ready the producer retries, logging each retry: noise around the figures, not an error (a
    send that finally fails still raises)."""
    logging.getLogger("aiokafka.producer.sender").setLevel(logging.ERROR)
