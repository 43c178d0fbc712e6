"""The baseline for the end-to-end benchmark: a naive Faust agent that only updates a table
per event (one changelog write per event), on the same broker, topic layout and partitions.

Run as a process by `benchmarks/pipeline_throughput.py`:
    python -m benchmarks.naive_agent BOOTSTRAP TOPIC APP_ID PARTITIONS
"""

from __future__ import annotations

import sys
from typing import Any

import faust


def main(bootstrap: str, topic_name: str, app_id: str, partitions: int) -> None:
    app = faust.App(
        app_id,
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
    counts = app.Table("counts", default=int, partitions=partitions)

    @app.agent(source, concurrency=1)
    async def count_events(stream: Any) -> None:
        async for event in stream.events():
            key = event.key.decode()
            counts[key] = counts[key] + 1

    faust.Worker(app, loglevel="warn", quiet=True).execute_from_commandline()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
