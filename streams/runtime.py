"""Process-level tuning for long-running UaC processes.

The fold allocates many small, acyclic, long-lived objects (persistent maps and tuples).
CPython's cyclic garbage collector rescans the whole old generation as it grows, which on a
worker holding many subjects costs more than the fold itself; reference counting already frees
these objects. So processes that fold at volume raise the collection thresholds and move what
start-up built (code, settings, knowledge tables) out of the collector's view.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 100_000
MIDDLE_THRESHOLD = 50
OLD_THRESHOLD = 1_000


def tune_garbage_collector() -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
