"""Every offset of the events topic is processed, whatever the consumer hands the agent.

Faust can, rarely, pass over a record after a rebalance: a record that reaches the stream while
flow is suspended, or from an older consumer generation, is skipped *and acknowledged*
(`faust.streams`), so the commit moves past it and the seek after the rebalance resumes behind
it. `take_events` also acknowledges a batch's events in a `finally`, so a batch the agent was
cancelled in the middle of (a stop) can be acknowledged unprocessed. Nothing in Faust notices.
(The worker's batches no longer come from `take_events` but from its fetch loop, acknowledged
once handled, `streams.delivery.TopicBatches`; the record kept here covers whatever else moves
the commit or the consumer past an event.) The worker therefore keeps its own durable record of
the next offset it expects on each events partition (a changelog-backed table written after each
batch's outputs) and plans every batch against it: an offset jump becomes a `Gap`, read straight
from the log and processed, in order, before the records that follow it. A record below the
expected offset was processed already, its outputs delivered before the offset was recorded;
Kafka delivers such records again when the consumer goes back to the committed offset (after a
crash, and after a clean restart too: a worker that processed a record fetched early was handed
it a second time). It is left out, so a redelivery does not add a duplicate refusal to the
quarantine and the gate's decisions.

Kafka-free: the agent supplies the expected offsets and runs the steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from streams.processing import Incoming


@dataclass(frozen=True)
class Gap:
    """Offsets `start` to `end` (exclusive) of an events partition that the consumer passed
    over. Some may hold no record (transaction markers, retention): reading finds what is there."""

    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


Step = Gap | tuple[Incoming, ...]


def plan(expected: Mapping[int, int], messages: Sequence[Incoming]) -> list[Step]:
    """The batch as steps to run in order: runs of messages, and before a message that jumps
    past the next expected offset of its partition, the gap. Within a partition the delivery
    order is kept; a record below the next expected offset (processed already) is left out.
    Without any gap or redelivery the whole batch is one step, as delivered. `expected` must
    name every partition of the batch."""
    by_partition: dict[int, list[Incoming]] = {}
    for message in messages:
        by_partition.setdefault(message.partition, []).append(message)
    pieces = {p: _pieces(expected[p], p, records) for p, records in by_partition.items()}
    unsplit = {p for p, steps in pieces.items() if len(steps) <= 1}
    kept = {id(m) for p in unsplit for step in pieces[p] if not isinstance(step, Gap) for m in step}
    whole = tuple(m for m in messages if id(m) in kept)
    with_gaps = [step for p, steps in pieces.items() if p not in unsplit for step in steps]
    return ([whole] if whole else []) + with_gaps


def _pieces(expected: int, partition: int, records: Sequence[Incoming]) -> list[Step]:
    steps: list[Step] = []
    run: list[Incoming] = []
    following = expected
    for record in records:
        if record.offset < following:
            continue
        if record.offset > following:
            if run:
                steps.append(tuple(run))
                run = []
            steps.append(Gap(partition, following, record.offset))
        run.append(record)
        following = record.offset + 1
    if run:
        steps.append(tuple(run))
    return steps


def reached(step: Step) -> dict[int, int]:
    """The next offset of each partition once `step` has run: after its last record, or after
    the gap (offsets without a record in the log included)."""
    if isinstance(step, Gap):
        return {step.partition: step.end}
    following: dict[int, int] = {}
    for message in step:
        following[message.partition] = max(following.get(message.partition, 0), message.offset + 1)
    return following
