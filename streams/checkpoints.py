"""Checkpoints on the compacted state topic: each changed subject's readable state, sealed,
published by a timer beside the agent (`Checkpoints`), never inside its batches."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from projections.document import checkpoint_of
from schemas.codec import checkpoint_codec
from schemas.erasures import ref_of_key
from streams.app import Pipeline
from streams.keys import SubjectErased
from streams.pipeline_access import kafka_producer, loaded, partition_of
from streams.record_batches import RecordBatches
from streams.worker_metrics import WorkerMetrics

log = logging.getLogger(__name__)


async def publish_checkpoints(
    pipeline: Pipeline, keys: Iterable[str], metrics: WorkerMetrics
) -> None:
    """The readable checkpoint of each subject on the compacted state topic, sealed (delivered
    before the next offset commit: Faust flushes the producer first). A subject whose
    checkpoint cannot be made is logged (by reference) and counted, and the others go on: an
    exception here would crash the whole worker, in a loop, since recovery re-publishes every
    checkpoint."""
    codec, batches = checkpoint_codec(), RecordBatches(kafka_producer(pipeline))
    for key in keys:
        try:
            stored = loaded(pipeline, key)
            if stored is None or stored.state is None:
                continue
            sealed = pipeline.sealer.seal(key, codec.encode(checkpoint_of(stored.state)))
        except SubjectErased:
            continue
        except Exception as error:  # noqa: BLE001 (one subject must not stop the worker)
            metrics.checkpoint_failures.inc()
            log.error(
                "no checkpoint for subject %s…: %s; its state stays in the table",
                ref_of_key(key)[:12],
                type(error).__name__,
            )
            continue
        batches.add(pipeline.topics.state, partition_of(pipeline, key), key.encode(), sealed)
    for delivery in await batches.send():
        delivery.add_done_callback(lambda done: checkpoints_delivered(done, metrics))


def checkpoints_delivered(delivery: asyncio.Future[Any], metrics: WorkerMetrics) -> None:
    """A refused batch of checkpoints is counted and logged (nobody else awaits it): the
    subjects' states stay in the table, their checkpoints behind until they change again."""
    if delivery.cancelled() or delivery.exception() is None:
        return
    metrics.checkpoint_batches_refused.inc()
    log.error(
        "Kafka refused a batch of checkpoints: %s; those subjects' checkpoints stay behind",
        type(delivery.exception()).__name__,
    )


@dataclass
class Checkpoints:
    """Subjects whose checkpoint on the state topic is behind their state, oldest first. A
    timer publishes them every `interval` seconds, so a checkpoint (which serialises the whole
    state) is written once per interval however often the subject changes, and the batches
    never wait for it. Each tick spends at most `BUDGET` of the interval on checkpoints, in
    chunks (a few milliseconds each), and ends within its interval (a tick that runs past it
    overlaps the next, which Faust logs as a warning); after each chunk the timer sleeps `PAUSE`
    times as long as the chunk took, so checkpoints never hold more than a third of the event
    loop in any stretch of time and the agent's batches and Faust's delivery go on in between
    (chunks run back to back held the loop for a tenth of a second every second, and the
    alerts of that moment waited as long). A chunk is `CHUNK` subjects, or more when the loop
    was away longer than the pause (`next_chunk`): while the agent works through a backlog each
    pause lasts a whole batch, and chunks of five then published a third as many checkpoints
    per second. Under a load the worker cannot checkpoint in time, the state topic falls behind
    (oldest subjects first), never the processing. `clock` and `pause` are the monotonic clock
    and `asyncio.sleep` (a simulated event loop replaces them in tests)."""

    BUDGET = 0.10
    CHUNK = 5
    MAX_CHUNK = 100
    PAUSE = 2.0

    interval: float
    dirty: dict[str, None] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic
    pause: Callable[[float], Awaitable[None]] = asyncio.sleep

    def touched(self, key: str) -> None:
        self.dirty.setdefault(key)

    def touch_all(self, keys: Iterable[str]) -> None:
        for key in keys:
            self.touched(key)

    def take(self, limit: int) -> list[str]:
        keys = list(itertools.islice(self.dirty, limit))
        for key in keys:
            del self.dirty[key]
        return keys

    def next_chunk(self, size: int, took: float, away: float) -> int:
        """The size of the chunk after one of `size` subjects that took `took` seconds, the loop
        then away for `away` seconds (the pause, and what ran meanwhile): as many subjects as
        fit in `away / PAUSE` at that chunk's pace, so the next chunk holds the loop for at most
        a third of the stretch, between `CHUNK` and `MAX_CHUNK`."""
        if took <= 0:
            return size
        fitting = int(size * away / (self.PAUSE * took))
        return max(self.CHUNK, min(self.MAX_CHUNK, fitting))

    async def publish_due(
        self,
        publish: Callable[[list[str]], Awaitable[None]],
        can_publish: Callable[[], bool],
    ) -> None:
        """One tick: `publish` chunk after chunk of dirty subjects, pausing after each, until
        none is left, the tick's budget of work is spent, the next chunk and pause could end
        past its interval (`longest_stretch`), or `can_publish()` says no (the producer
        stopped: the subjects stay dirty)."""
        spent, size, tick = 0.0, self.CHUNK, self.clock()
        coming, longest_away = 0.0, 0.0
        while (
            self.dirty
            and spent < self.BUDGET * self.interval
            and self.clock() - tick + coming < self.interval
            and can_publish()
        ):
            started = self.clock()
            await publish(self.take(size))
            took = self.clock() - started
            spent += took
            await self.pause(self.PAUSE * took)
            away = self.clock() - started - took
            longest_away = max(longest_away, away)
            pace = took / size
            size = self.next_chunk(size, took, away)
            coming = self.longest_stretch(size * pace, longest_away)

    def longest_stretch(self, work: float, longest_away: float) -> float:
        """How long a chunk of `work` seconds and its pause may take: the chunk, its pause, and
        as long again as the loop was ever away in this tick (a batch of the agent that began
        just before the pause ended runs to its end). The tick's end is judged with it, so a
        chunk whose pause would run past the interval is left to the next tick."""
        return work * (1 + self.PAUSE) + longest_away
