"""The user-state table's records and their Faust codecs.

Keys are `tenant:subject` text (the same UTF-8 bytes producers use as message keys, so the
changelog is co-partitioned with the events topic). A subject's history, its accepted events
sealed with its key, is kept in pieces so that a table write costs the same whatever the
history's length:

- the head, under `tenant:subject`, holds the newest events (less than `SEGMENT_BYTES`), how
  many segments precede them and the history's size; it is rewritten by every batch that
  changes the subject;
- each segment, under `tenant:subject:N` (ids never contain `:`), holds about `SEGMENT_BYTES`
  of older events; it is written once, when the head overflows, before the head that counts it.

`SubjectTable` writes a subject's segments to the changelog partition of the subject itself, so
the worker that owns the subject recovers all of them. Recovery decodes each record on its own:
a head without segments is folded at once, a head with segments is folded when first read
(`loaded` in `streams.pipeline_access`), from its segments and its own events. A record whose subject key
was destroyed (erasure) loads as an erased marker instead of failing table recovery.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import faust
from faust.serializers import codecs

from projections.state import UserState, replay
from schemas.codec import event_codec
from streams.keys import SubjectErased
from streams.record_batches import default_partition
from streams.sealing import Sealer, SealError

KEY_CODEC = "uac-subject-key"
STATE_CODEC = "uac-user-state"
SEGMENT_BYTES = 16 * 1024
"""The most a head holds, so the most a batch rewrites (and seals, and sends) per subject. A
subject that gets one event per batch rewrites half of it per event on average: with 256 KiB
segments, about 128,000 changelog bytes per 122-byte event; with 16 KiB, about 8,400
(`benchmarks/state_writes.py`)."""
HEAD_MAGIC = b"UACH\x01"
SEGMENT_MAGIC = b"UACG\x01"

_LENGTH = struct.Struct(">I")
_HEAD = struct.Struct(">IQ")


def pack_events(framed_events: Iterable[bytes]) -> bytes:
    return b"".join(_LENGTH.pack(len(framed)) + framed for framed in framed_events)


def unpack_events(blob: bytes) -> list[bytes]:
    events, position = [], 0
    while position < len(blob):
        (length,) = _LENGTH.unpack_from(blob, position)
        position += _LENGTH.size
        events.append(blob[position : position + length])
        position += length
    return events


def segment_key(subject: str, number: int) -> str:
    return f"{subject}:{number}"


def is_segment_key(key: str) -> bool:
    return key.count(":") == 2


def subject_of(key: str) -> str:
    """The `tenant:subject` a head or segment key belongs to."""
    return key.rsplit(":", 1)[0] if is_segment_key(key) else key


def _cut(packed: bytes, limit: int) -> int:
    """Length of the longest run of whole packed events from the start within `limit` bytes
    (at least one event)."""
    position = 0
    while position < len(packed):
        (length,) = _LENGTH.unpack_from(packed, position)
        following = position + _LENGTH.size + length
        if following > limit and position > 0:
            break
        position = following
    return position


@dataclass(frozen=True)
class StoredSegment:
    """Older events of a subject (packed, opened) and the sealed record the changelog holds."""

    events: bytes
    encoded: bytes


@dataclass(frozen=True)
class StoredState:
    """A subject's head: its state (None once erased, or until folded after recovery), its
    newest events (packed), the number of segments before them, the size of the whole history
    (packed bytes), and the sealed record the changelog holds."""

    state: UserState | None
    events: bytes
    encoded: bytes
    segments: int = 0
    history_bytes: int = 0

    @property
    def needs_fold(self) -> bool:
        """Recovered with segments: the state is folded when the subject is first read."""
        return self.state is None and self.segments > 0

    def extended(
        self, state: UserState, framed_events: Sequence[bytes], sealer: Sealer
    ) -> tuple[StoredState, list[tuple[str, StoredSegment]]]:
        """The next head after appending a batch's events, and the segments that closed (to be
        written before the head). Costs at most about `SEGMENT_BYTES` of copying and sealing,
        however long the history."""
        added = pack_events(framed_events)
        newest, segments, closed = self.events + added, self.segments, []
        while len(newest) >= SEGMENT_BYTES:
            cut = _cut(newest, SEGMENT_BYTES)
            sealed = sealer.seal(state.key, SEGMENT_MAGIC + newest[:cut])
            closed.append((segment_key(state.key, segments), StoredSegment(newest[:cut], sealed)))
            newest, segments = newest[cut:], segments + 1
        history = self.history_bytes + len(added)
        head = HEAD_MAGIC + _HEAD.pack(segments, history) + newest
        return StoredState(state, newest, sealer.seal(state.key, head), segments, history), closed

    @classmethod
    def first(
        cls, state: UserState, framed_events: Sequence[bytes], sealer: Sealer
    ) -> tuple[StoredState, list[tuple[str, StoredSegment]]]:
        return cls(None, b"", b"").extended(state, framed_events, sealer)

    def folded(self, segments: Sequence[StoredSegment]) -> StoredState:
        """This head with its state folded from its segments (in order) and its own events."""
        blob = b"".join(segment.events for segment in segments) + self.events
        events = [event_codec().decode(framed) for framed in unpack_events(blob)]
        state = replay(events) if events else None
        return StoredState(state, self.events, self.encoded, self.segments, self.history_bytes)


class SubjectTable(faust.Table[str, StoredState | StoredSegment]):
    """The state table: every record of a subject (head and segments) on the changelog
    partition Kafka's default partitioner gives the subject's key, i.e. the partition of its
    events."""

    def partition_for_key(self, key: Any) -> int | None:
        partitions = int(self.partitions or self.app.conf.topic_partitions)
        return default_partition(subject_of(str(key)).encode("utf-8"), partitions)


class PartitionProgressTable(faust.Table[int, int]):
    """The next offset the worker expects on each events partition (`streams.continuity`), on
    the changelog partition of the same number, so the worker that owns an events partition
    recovers its entry."""

    def partition_for_key(self, key: Any) -> int | None:
        return int(key)


class SubjectKeyCodec(codecs.Codec):
    def _dumps(self, obj: Any) -> bytes:
        return str(obj).encode("utf-8")

    def _loads(self, s: bytes) -> str:
        return s.decode("utf-8")


class UserStateCodec(codecs.Codec):
    def __init__(self, sealer: Sealer) -> None:
        super().__init__()
        self._sealer = sealer

    def _dumps(self, obj: Any) -> bytes:
        if not isinstance(obj, StoredState | StoredSegment):
            kind = type(obj).__name__
            raise TypeError(f"the user-state table stores heads and segments, not {kind}")
        return obj.encoded

    def _loads(self, s: bytes) -> StoredState | StoredSegment:
        return _unsealed_state(self._sealer, s)


def _unsealed_state(sealer: Sealer, value: bytes) -> StoredState | StoredSegment:
    try:
        subject, blob = sealer.open(value)
    except (SubjectErased, SealError):
        return StoredState(None, b"", value)
    if subject is None:
        return StoredState(None, b"", value)
    if blob.startswith(SEGMENT_MAGIC):
        return StoredSegment(blob[len(SEGMENT_MAGIC) :], value)
    if not blob.startswith(HEAD_MAGIC):
        return StoredState(None, b"", value)
    segments, history = _HEAD.unpack_from(blob, len(HEAD_MAGIC))
    newest = blob[len(HEAD_MAGIC) + _HEAD.size :]
    head = StoredState(None, newest, value, segments, history)
    return head if segments else head.folded(())


class _SerializedWith:
    """Faust picks a table's codecs from `key_type._options.serializer` and rebuilds values with
    `from_data`; these stand-in types name our codecs and hand values through unchanged."""

    class _options:  # noqa: N801 (the attribute name Faust reads)
        serializer = ""

    @classmethod
    def from_data(cls, data: Any, *, preferred_type: Any = None) -> Any:  # noqa: ARG003 (Faust passes it)
        return data


class SubjectKeyType(_SerializedWith):
    class _options:  # noqa: N801
        serializer = KEY_CODEC


class StoredStateType(_SerializedWith):
    class _options:  # noqa: N801
        serializer = STATE_CODEC


def register_table_codecs(sealer: Sealer) -> None:
    codecs.register(KEY_CODEC, SubjectKeyCodec())
    codecs.register(STATE_CODEC, UserStateCodec(sealer))
