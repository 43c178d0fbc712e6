"""What CPython's cyclic collector costs the worker while its heap grows, and how long it pauses.

Folds `UAC_BENCH_EVENTS` events (400,000 by default) of new subjects through the worker's batch
step (open, decode, gate, fold, rules; no Kafka), in batches of the worker's size, with the
collector tuned as the worker tunes it (`streams.runtime.tune_garbage_collector`), and prints
the step's CPU per event, the time spent in collections per event, and the number of
collections and the longest pause of each generation. Each state the fold keeps is scanned by a
young collection and again by a middle-generation one: the total depends little on the
thresholds, the longest pause on how many young collections a middle one follows
(`UAC_BENCH_MIDDLE` overrides `MIDDLE_THRESHOLD` to compare).

Run: `.venv/bin/python -m benchmarks.collector_pauses`.
"""

from __future__ import annotations

import gc
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.output import machine_speed_around
from benchmarks.pipeline_throughput import fold_in_batches, step_input, workload
from streams import runtime

EVENTS = int(os.environ.get("UAC_BENCH_EVENTS", "400000"))


class Pauses:
    """Every collection's generation and duration, from the collector's callbacks."""

    def __init__(self) -> None:
        self.seconds: dict[int, list[float]] = defaultdict(list)
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds[info["generation"]].append(time.perf_counter() - self._started)


def main() -> None:
    middle = os.environ.get("UAC_BENCH_MIDDLE")
    if middle is not None:
        runtime.MIDDLE_THRESHOLD = int(middle)
    events = workload(EVENTS)
    with tempfile.TemporaryDirectory() as tmp:
        processor, messages, batch_size = step_input(Path(tmp), events)
        runtime.tune_garbage_collector()
        pauses = Pauses()
        gc.callbacks.append(pauses)
        started = time.process_time()
        states = fold_in_batches(processor, messages, batch_size)
        spent = time.process_time() - started
        gc.callbacks.remove(pauses)
    collecting = sum(sum(each) for each in pauses.seconds.values())
    print(
        f"{len(events):,} events of {len(states):,} new subjects, thresholds {gc.get_threshold()}:"
        f" batch step {spent / len(events) * 1e6:.1f} us CPU per event, of which collections"
        f" {collecting / len(events) * 1e6:.1f} us"
    )
    for generation, each in sorted(pauses.seconds.items()):
        print(
            f"generation {generation}: {len(each)} collections, longest {max(each) * 1000:,.0f} ms,"
            f" total {sum(each):.2f} s"
        )


if __name__ == "__main__":
    with machine_speed_around():
        main()
