"""Running a snippet of Python in fresh processes, for properties that must not depend on the
process (string hashing is salted per process unless `PYTHONHASHSEED` is fixed)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable


def outputs_under_hash_seeds(script: str, seeds: Iterable[int]) -> set[str]:
    """The distinct standard outputs of `python -c script`, run once per hash seed."""
    return {
        subprocess.run(
            [sys.executable, "-c", script],
            env=os.environ | {"PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in seeds
    }
