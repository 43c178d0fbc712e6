"""Rebuilding state from the log and comparing it with what the pipeline holds.

`uac replay --from-kafka` folds the accepted-events topic from its beginning in a fresh
consumer (the pure fold, never Faust's per-event path) and compares every subject's
`state_hash` with the latest checkpoint the worker published for it. Erased subjects have no
readable records (their key is gone) and no checkpoint (tombstoned), so they match by absence.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiokafka.partitioner import DefaultPartitioner

from projections.document import state_hash
from projections.state import UserState, replay_all
from schemas.checkpoint import StateCheckpoint
from schemas.codec import checkpoint_codec, event_codec
from streams.runtime import collector_paused
from streams.sealing import Sealer, readable
from streams.topic_reader import read_topic, topic_partitions


@dataclass(frozen=True)
class Difference:
    key: str
    live_hash: str | None
    rebuilt_hash: str | None
    live_version: int | None
    rebuilt_version: int | None


async def latest_checkpoints(
    bootstrap: str, topic: str, sealer: Sealer
) -> dict[str, StateCheckpoint]:
    """The latest checkpoint per subject; a tombstone (erasure) removes the subject."""
    codec = checkpoint_codec()
    latest: dict[str, StateCheckpoint | None] = {}
    for record in await read_topic(bootstrap, topic):
        framed = readable(sealer, record.value)
        latest[record.key.decode("utf-8")] = None if framed is None else codec.decode(framed)
    return {key: checkpoint for key, checkpoint in latest.items() if checkpoint is not None}


async def checkpoint_of_subject(
    bootstrap: str, topic: str, key: str, sealer: Sealer
) -> StateCheckpoint | None:
    """The latest checkpoint of one subject, reading only the partition its key maps to among
    the topic's partitions (TopicMissing when the pipeline has not created the topic yet)."""
    partitions = await topic_partitions(bootstrap, topic)
    partition = DefaultPartitioner()(key.encode("utf-8"), partitions, partitions)
    codec = checkpoint_codec()
    found = None
    for record in await read_topic(bootstrap, topic, [partition]):
        if record.key.decode("utf-8") == key:
            framed = readable(sealer, record.value)
            found = None if framed is None else codec.decode(framed)
    return found


async def rebuild_states(
    bootstrap: str, accepted_topic: str, sealer: Sealer
) -> dict[str, UserState]:
    codec = event_codec()
    records = await read_topic(bootstrap, accepted_topic)
    events = [
        codec.decode(framed) for record in records if (framed := readable(sealer, record.value))
    ]
    with collector_paused():
        states = replay_all(events)
    return {key: state for key, state in states.items() if not state.erased}


def differences(
    live: dict[str, StateCheckpoint], rebuilt: dict[str, UserState]
) -> list[Difference]:
    found = []
    for key in sorted(live.keys() | rebuilt.keys()):
        checkpoint, state = live.get(key), rebuilt.get(key)
        live_hash = checkpoint.state_hash if checkpoint else None
        rebuilt_hash = state_hash(state) if state else None
        if live_hash != rebuilt_hash:
            found.append(
                Difference(
                    key,
                    live_hash,
                    rebuilt_hash,
                    checkpoint.version if checkpoint else None,
                    state.version if state else None,
                )
            )
    return found
