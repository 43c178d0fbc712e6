"""What the worker writes to the state table's changelog for a subject with a long history.

A subject that gets one event per batch has its head (the newest events, up to
`streams.table_codecs.SEGMENT_BYTES`) rewritten, sealed and sent by every batch. This prints,
for 20,000 events of one subject and each segment size, the changelog bytes written per event
(the head plus the segments that closed), the event's own size, and the CPU microseconds per
event of building those records (`StoredState.extended`: packing and sealing; the fold is not
counted). The first size is the one the worker uses.

Run: `.venv/bin/python -m benchmarks.state_writes`.
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path

from benchmarks.output import machine_speed_around
from benchmarks.synthetic import subject_events
from projections.state import evolve, initial_state
from schemas.codec import event_codec
from schemas.events import Event
from streams import table_codecs
from streams.keys import FileKeyStore
from streams.sealing import Sealer

EVENTS = 20_000
COMPARED_SEGMENT_KIB = (64, 256)


def changelog_writes(
    segment_bytes: int, events: list[Event], framed: list[bytes], sealer: Sealer
) -> None:
    state = initial_state(events[0].tenant_id, events[0].subject_id)
    head = table_codecs.StoredState(None, b"", b"")
    written, spent = 0, 0.0
    table_codecs.SEGMENT_BYTES = segment_bytes
    for event, record in zip(events, framed, strict=True):
        state = evolve(state, event)
        started = time.process_time()
        head, closed = head.extended(state, [record], sealer)
        spent += time.process_time() - started
        written += len(head.encoded) + sum(len(segment.encoded) for _, segment in closed)
    print(
        f"segments of {segment_bytes // 1024} KiB: {written / len(framed):,.0f} changelog bytes "
        f"per event of {sum(map(len, framed)) / len(framed):,.0f} bytes, "
        f"{spent / len(framed) * 1e6:.1f} us CPU per event; "
        f"the history ({head.history_bytes / 1e6:.1f} MB) in {head.segments} segments",
        flush=True,
    )


def main() -> None:
    events = list(subject_events(random.Random(7), "bench", "long", EVENTS, 0))
    framed = [event_codec().encode(event) for event in events]
    in_use = table_codecs.SEGMENT_BYTES
    with tempfile.TemporaryDirectory() as keys, machine_speed_around():
        sealer = Sealer(FileKeyStore(Path(keys)))
        print(f"one subject, {EVENTS:,} events, one event per batch")
        try:
            for segment_bytes in (in_use, *(kib * 1024 for kib in COMPARED_SEGMENT_KIB)):
                changelog_writes(segment_bytes, events, framed, sealer)
        finally:
            table_codecs.SEGMENT_BYTES = in_use


if __name__ == "__main__":
    main()
