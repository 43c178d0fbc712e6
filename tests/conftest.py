"""Hypothesis profiles. The suite (`make test`, CI) runs `deterministic`: the same examples on
every run, so a property that passes on a change passes again on main, and a failure found is
reproduced by running the test again. `HYPOTHESIS_PROFILE=explore` draws fresh random examples
(1,000 for a property that does not set its own count) to look for what the fixed ones miss."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("deterministic", derandomize=True, database=None, print_blob=True)
settings.register_profile(
    "explore", derandomize=False, database=None, print_blob=True, max_examples=1000
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))
