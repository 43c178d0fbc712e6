"""Hypothesis profiles. The suite (`make test`, CI) runs `deterministic`: the same examples on
every run, so a property that passes on a change passes again on main, and a failure found is
reproduced by running the test again. `HYPOTHESIS_PROFILE=explore` draws fresh random examples
(1,000 for a property that does not set its own count) to look for what the fixed ones miss.
Neither has a deadline: how long an example takes depends on the machine's load, and speed is
measured by the benchmarks, never asserted by a test."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile(
    "deterministic", derandomize=True, database=None, print_blob=True, deadline=None
)
settings.register_profile(
    "explore",
    derandomize=False,
    database=None,
    print_blob=True,
    max_examples=1000,
    deadline=None,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))
