"""Whether a running service has heard from the Kafka broker lately.

A worker or sink that owns partitions but has heard nothing from the broker for
`BROKER_SILENCE_SECONDS` says so on `/health` (503 `waiting_for_broker`), so a supervisor stops
counting it as serving while the broker is away; it carries on by itself once the broker is back.
"""

from __future__ import annotations

from typing import Final

BROKER_SILENCE_SECONDS: Final = 30.0
"""How long a service that owns partitions may hear nothing from the broker before it says it
is waiting for it (six of the worker's offset readings, sixty of the sink's idle fetches)."""


def broker_silent(heard_at: float | None, now: float) -> bool:
    """Whether more than `BROKER_SILENCE_SECONDS` passed between `heard_at` and `now` (never
    while nothing was heard yet: the service is still starting)."""
    return heard_at is not None and now - heard_at > BROKER_SILENCE_SECONDS
