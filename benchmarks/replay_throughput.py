"""Replay throughput of the pure fold, on one core.

Prints events/s of `replay` (the bulk fold of a whole history) for (a) 1,000,000 events over
10,000 subjects and (b) one subject with 100,000 events, each with the collector paused as
`uac replay --from-kafka` runs it and with the collector tuned as the worker tunes it (the first
run, which pays for memory fresh from the operating system as a one-off replay does, then the
best and median of RUNS runs: this shared machine's speed varies by a fifth from moment to
moment, and the best run is the one least disturbed by it); then the streaming path
(`evolve`, one event at a time, as the worker folds) over (b), and the cost of one event after
histories of 0 to 400,000 events (the subject's own, then the same kind of history continued;
collector off, best of several tries, so neither its pauses
nor the machine's slow moments land on one length), which shows whether the cost of an event
grows with the length of the history. Each of (a) and (b) runs in a fresh process. Run:
`make bench`.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import random
import subprocess
import sys
import time
from collections.abc import Sequence

from benchmarks.output import machine_speed_around
from benchmarks.synthetic import subject_events
from projections.state import evolve, initial_state, replay_all
from schemas.events import Event
from streams.runtime import collector_paused, tune_garbage_collector


def _pin_to_one_core() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def many_subjects(subjects: int, per_subject: int) -> list[Event]:
    rng = random.Random(42)
    streams = [
        list(subject_events(rng, "bench", f"s{n}", per_subject, n * per_subject))
        for n in range(subjects)
    ]
    return [stream[i] for i in range(per_subject) for stream in streams]


def timed_replay(events: list[Event], paused: bool) -> float:
    """Seconds to fold `events`, with the collector paused as `uac replay --from-kafka` pauses
    it (nothing collected beforehand), or tuned as the worker tunes it (a full collection, then
    the input frozen out of the collector's view like the worker's start-up objects). The states
    are freed after the clock stops: releasing memory is not folding."""
    if not paused:
        tune_garbage_collector()
    started = time.perf_counter()
    with collector_paused() if paused else contextlib.nullcontext():
        states = replay_all(events)
    seconds = time.perf_counter() - started
    del states
    return seconds


RUNS = 3


def report_replay(label: str, events: list[Event]) -> None:
    """The first run folds into memory fresh from the operating system and pays its page
    faults, as a one-off replay does; later runs may reuse what an earlier one freed."""
    for paused, how in ((True, "collector paused"), (False, "collector tuned as in the worker")):
        rates = [len(events) / timed_replay(events, paused) for _ in range(RUNS)]
        ordered = sorted(rates)
        print(
            f"replay {label} ({how}): first run {rates[0]:,.0f} events/s,"
            f" best {ordered[-1]:,.0f}, median {ordered[RUNS // 2]:,.0f} (of {RUNS} runs)",
            flush=True,
        )


def timed_evolve(events: list[Event]) -> float:
    """Seconds to fold `events` (one subject) one event at a time, as the worker does."""
    tune_garbage_collector()
    started = time.perf_counter()
    state = initial_state(events[0].tenant_id, events[0].subject_id)
    for event in events:
        state = evolve(state, event)
    seconds = time.perf_counter() - started
    del state
    return seconds


def per_event_costs(
    events: list[Event], lengths: Sequence[int], probe: int, rounds: int
) -> list[tuple[int, float]]:
    """Mean microseconds per event of folding the `probe` events that follow the first L
    events onto their state, for each history length L: the best over `rounds` rounds, each of
    which times every length once (collector off). `evolve` is pure, so each probe starts from
    the same state; interleaving the lengths and keeping the best keeps the machine's slow
    moments from passing for growth."""
    gc.collect()
    gc.disable()
    snapshots, state, folded = [], initial_state(events[0].tenant_id, events[0].subject_id), 0
    for length in lengths:
        for event in events[folded:length]:
            state = evolve(state, event)
        snapshots.append((length, state, events[length : length + probe]))
        folded = length
    best = dict.fromkeys(lengths, float("inf"))
    for _ in range(rounds):
        for length, snapshot, following in snapshots:
            started = time.perf_counter()
            probed = snapshot
            for event in following:
                probed = evolve(probed, event)
            best[length] = min(best[length], (time.perf_counter() - started) / len(following))
    gc.enable()
    return [(length, seconds * 1e6) for length, seconds in best.items()]


def wide() -> None:
    print("building 1,000,000 synthetic events over 10,000 subjects ...", flush=True)
    gc.disable()
    events = many_subjects(10_000, 100)
    gc.enable()
    report_replay("1,000,000 events / 10,000 subjects", events)


HISTORY_LENGTHS = (0, 1_000, 10_000, 20_000, 40_000, 60_000, 80_000, 99_000, 200_000, 400_000)
"""Lengths of history after which the cost of one more event is measured: the subject's
100,000 events, and on to four times as many to show the shape of the growth."""


def deep() -> None:
    print("building one subject with 100,000 events ...", flush=True)
    history = subject_events(random.Random(7), "bench", "deep", HISTORY_LENGTHS[-1] + 1_000, 0)
    gc.disable()
    events = list(itertools.islice(history, 100_000))
    gc.enable()
    report_replay("100,000 events / 1 subject", events)
    seconds = timed_evolve(events)
    print(
        f"evolve one event at a time, 100,000 events / 1 subject: {len(events) / seconds:,.0f}"
        f" events/s ({seconds:.1f} s)"
    )
    print("continuing its history to 401,000 events ...", flush=True)
    gc.disable()
    longest = events + list(history)
    gc.enable()
    costs = per_event_costs(longest, HISTORY_LENGTHS, probe=1_000, rounds=9)
    print(
        "evolve: per-event cost after a history of N events (us; the next 1,000, best of 9):",
        "  ".join(f"{length:,}: {micros:.1f}" for length, micros in costs),
    )
    by_length = dict(costs)
    print(
        f"evolve: from 1,000 to 400,000 events of history (400 times as long) one event costs"
        f" {by_length[400_000] / by_length[1_000]:.2f} times as much; from 100,000 to 400,000"
        f" (4 times) {by_length[400_000] / by_length[99_000]:.2f} times"
    )


SCENARIOS = {"wide": wide, "deep": deep}


def main() -> None:
    """Each scenario in a process of its own, as a replay runs: folding the one subject after
    the million events were freed measured the allocator's leftovers too (about a third slower
    than in a fresh process on the same machine)."""
    for name in SCENARIOS:
        subprocess.run([sys.executable, "-m", "benchmarks.replay_throughput", name], check=True)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        _pin_to_one_core()
        SCENARIOS[sys.argv[1]]()
    else:
        with machine_speed_around():
            main()
