"""Rebuilding state from the log and comparing it with what the pipeline holds.

`uac replay --from-kafka` folds the accepted-events topic from its beginning in a fresh
consumer (the pure fold, never Faust's per-event path) and compares every subject's
`state_hash` with the latest checkpoint the worker published for it. Erased subjects have no
readable records (their key is gone) and no checkpoint (tombstoned), so they match by absence.
A difference says its cause: a different history, only a different rendering of the same events
(a checkpoint an earlier build wrote), or a checkpoint that does not match its own hash.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from aiokafka.partitioner import DefaultPartitioner

from projections.document import (
    CorruptCheckpoint,
    intact,
    state_from_checkpoint,
    state_hash,
)
from projections.state import UserState, replay_all
from schemas.checkpoint import StateCheckpoint
from schemas.codec import checkpoint_codec, event_codec
from streams.runtime import collector_paused
from streams.sealing import Sealer, readable
from streams.topic_reader import read_topic, topic_partitions


class Cause(StrEnum):
    """Why a subject's latest checkpoint and its rebuild from the log differ."""

    HISTORY = "history"
    """They fold different events (or one of them has no state for the subject)."""
    RENDERING = "rendering"
    """The same events; the checkpoint's document was rendered otherwise (by an earlier build,
    or by the live fold if it disagrees with the pure one). `uac rejudge` republishes it."""
    CORRUPT = "corrupt"
    """The checkpoint does not match its own hash, or holds another subject's events."""


@dataclass(frozen=True)
class Difference:
    key: str
    live_hash: str | None
    rebuilt_hash: str | None
    live_version: int | None
    rebuilt_version: int | None
    cause: Cause


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
        rebuilt_hash = state_hash(state) if state else None
        cause = _cause(checkpoint, rebuilt_hash)
        if cause is not None:
            found.append(
                Difference(
                    key,
                    checkpoint.state_hash if checkpoint else None,
                    rebuilt_hash,
                    checkpoint.version if checkpoint else None,
                    state.version if state else None,
                    cause,
                )
            )
    return found


def _cause(checkpoint: StateCheckpoint | None, rebuilt_hash: str | None) -> Cause | None:
    """None when they agree; the states are folded again only when the hashes differ."""
    if checkpoint is None or rebuilt_hash is None:
        return Cause.HISTORY
    if not intact(checkpoint):
        return Cause.CORRUPT
    if checkpoint.state_hash == rebuilt_hash:
        return None
    try:
        recorded = state_from_checkpoint(checkpoint)
    except CorruptCheckpoint:
        return Cause.CORRUPT
    return Cause.RENDERING if state_hash(recorded) == rebuilt_hash else Cause.HISTORY


def rerendered(live: dict[str, StateCheckpoint], rebuilt: dict[str, UserState]) -> list[UserState]:
    """The rebuilt states whose checkpoints differ only in their rendering: what `uac rejudge`
    republishes so the state topic and ClickHouse hold this build's document."""
    return [
        rebuilt[difference.key]
        for difference in differences(live, rebuilt)
        if difference.cause is Cause.RENDERING
    ]
