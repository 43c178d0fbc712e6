"""Reference agents for the end-to-end benchmark, on the same broker, topic layout and
partitions as the pipeline:

- `per-event` (the baseline): a naive Faust agent that only updates a table per event (one
  changelog write per event);
- `read-only`: an agent that only takes the events in batches, as the UaC worker takes them
  (the worker's app and fetch loop, `streams.delivery`), and records its running count once
  per batch (outside any one event, so the table places the count by its key): what the
  worker's delivery alone costs.

Run as a process by `benchmarks/pipeline_throughput.py`:
    python -m benchmarks.naive_agent BOOTSTRAP TOPIC APP_ID PARTITIONS per-event|read-only DATADIR
"""

from __future__ import annotations

import sys
from typing import Any

import faust

from streams.delivery import InlineDeliveryApp

BATCH = 500
WITHIN = 0.05
"""The worker's default batch size and window (`UAC_BATCH_SIZE`, `UAC_BATCH_SECONDS`)."""


def raw_topic(app: faust.App, name: str, partitions: int) -> Any:
    return app.topic(name, key_serializer="raw", value_serializer="raw", partitions=partitions)


def counting_app(app_id: str, topic_name: str, partitions: int, options: dict[str, Any]) -> Any:
    """The baseline: a plain Faust app whose agent writes its table once per event."""
    app = faust.App(app_id, **options)
    counts = app.Table("counts", default=int, partitions=partitions)

    @app.agent(raw_topic(app, topic_name, partitions), concurrency=1)
    async def count_events(stream: Any) -> None:
        async for event in stream.events():
            key = event.key.decode()
            counts[key] = counts[key] + 1

    return app


def batch_taking_app(app_id: str, topic_name: str, partitions: int, options: dict[str, Any]) -> Any:
    """The worker's app and fetch loop, with an agent that only takes the batches."""
    app = InlineDeliveryApp(app_id, **options)
    gathered = app.batches_of(topic_name, BATCH, WITHIN)
    counts = app.Table("counts", default=int, partitions=partitions, use_partitioner=True)

    @app.agent(raw_topic(app, topic_name, partitions), concurrency=1)
    async def take_batches(_stream: Any) -> None:
        async for batch in gathered.batches(app.acknowledge):
            counts["taken"] = counts["taken"] + len(batch)

    return app


def main(
    bootstrap: str, topic_name: str, app_id: str, partitions: int, mode: str, datadir: str
) -> None:
    options: dict[str, Any] = {
        "datadir": datadir,
        "broker": f"kafka://{bootstrap}",
        "store": "memory://",
        "topic_partitions": partitions,
        "topic_replication_factor": 1,
        "consumer_auto_offset_reset": "earliest",
        "web_enabled": False,
    }
    build = {"per-event": counting_app, "read-only": batch_taking_app}[mode]
    app = build(app_id, topic_name, partitions, options)
    faust.Worker(app, loglevel="warn", quiet=True).execute_from_commandline()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6])
