"""What the benchmark scripts print besides their figures."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager


def quiet_producer_retries() -> None:
    """Topics are created just before they are written, and until a new partition's leader is
    ready the producer retries, logging each retry: noise around the figures, not an error (a
    send that finally fails still raises)."""
    logging.getLogger("aiokafka.producer.sender").setLevel(logging.ERROR)


CALIBRATION_LOOPS = 10_000_000


def machine_speed() -> str:
    """How fast this machine runs plain Python right now: the seconds a fixed loop takes.

    The shared machines these figures come from change speed severalfold from hour to hour
    (a list of 10,000,000 zeros took 0.42 s to build on one, and 1.59 s hours earlier); printed
    before and after the figures, it tells a reader whether two runs can be compared at all."""
    started = time.perf_counter()
    for _ in range(CALIBRATION_LOOPS):
        pass
    seconds = time.perf_counter() - started
    return (
        f"machine speed: an empty {CALIBRATION_LOOPS:,}-iteration Python loop took {seconds:.2f} s"
    )


@contextmanager
def machine_speed_around() -> Iterator[None]:
    """Print the machine's speed before and after the figures printed inside."""
    print(machine_speed(), "(at the start)", flush=True)
    yield
    print(machine_speed(), "(at the end)")
