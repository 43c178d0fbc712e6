"""Reference agents for the end-to-end benchmark, on the same broker, topic layout and
partitions as the pipeline:

- `per-event` (the baseline): a naive Faust agent that only updates a table per event (one
  changelog write per event);
- `read-only`: a Faust agent that only takes the events in batches, as the UaC worker does,
  and records its running count once per batch (outside any one event, so the table places
  the count by its key): what Faust's delivery alone costs.

Run as a process by `benchmarks/pipeline_throughput.py`:
    python -m benchmarks.naive_agent BOOTSTRAP TOPIC APP_ID PARTITIONS per-event|read-only DATADIR
"""

from __future__ import annotations

import sys
from typing import Any

import faust

BATCH = 500
WITHIN = 0.05
"""The worker's default batch size and window (`UAC_BATCH_SIZE`, `UAC_BATCH_SECONDS`)."""


def main(
    bootstrap: str, topic_name: str, app_id: str, partitions: int, mode: str, datadir: str
) -> None:
    app = faust.App(
        app_id,
        datadir=datadir,
        broker=f"kafka://{bootstrap}",
        store="memory://",
        topic_partitions=partitions,
        topic_replication_factor=1,
        consumer_auto_offset_reset="earliest",
        web_enabled=False,
    )
    source = app.topic(
        topic_name, key_serializer="raw", value_serializer="raw", partitions=partitions
    )
    batched = mode == "read-only"
    counts = app.Table("counts", default=int, partitions=partitions, use_partitioner=batched)

    async def count_events(stream: Any) -> None:
        async for event in stream.events():
            key = event.key.decode()
            counts[key] = counts[key] + 1

    async def take_events(stream: Any) -> None:
        async for batch in stream.take_events(BATCH, within=WITHIN):
            counts["taken"] = counts["taken"] + len(batch)

    agents = {"per-event": count_events, "read-only": take_events}
    app.agent(source, concurrency=1)(agents[mode])

    faust.Worker(app, loglevel="warn", quiet=True).execute_from_commandline()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6])
