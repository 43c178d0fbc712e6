"""Faust codecs for the user-state table: keys are `tenant:subject` text (the same UTF-8 bytes
producers use as message keys, so the changelog is co-partitioned with the events topic), values
are the subject's accepted events, sealed with its key.

A changelog value whose subject key was destroyed (erasure) loads as an erased marker instead
of failing table recovery.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from faust.serializers import codecs

from projections.state import UserState, replay
from schemas.codec import event_codec
from streams.keys import SubjectErased
from streams.sealing import Sealer, SealError

KEY_CODEC = "uac-subject-key"
STATE_CODEC = "uac-user-state"


_LENGTH = struct.Struct(">I")


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


@dataclass(frozen=True)
class StoredState:
    """A subject's state (None once erased), the framed accepted events it was folded from, and
    what the changelog carries: those events sealed with the subject's key.

    Appending a batch's events costs a copy of bytes, not a re-serialisation of the state, so a
    table write stays cheap however long the subject's history; recovery folds the events again
    (the pure fold is replay-equivalent)."""

    state: UserState | None
    events: bytes
    encoded: bytes

    def extended(
        self, state: UserState, framed_events: Sequence[bytes], sealer: Sealer
    ) -> StoredState:
        events = self.events + pack_events(framed_events)
        return StoredState(state, events, sealer.seal(state.key, events))

    @classmethod
    def first(cls, state: UserState, framed_events: Sequence[bytes], sealer: Sealer) -> StoredState:
        return cls(None, b"", b"").extended(state, framed_events, sealer)


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
        if not isinstance(obj, StoredState):
            raise TypeError(f"the user-state table stores StoredState, not {type(obj).__name__}")
        return obj.encoded

    def _loads(self, s: bytes) -> StoredState:
        return _unsealed_state(self._sealer, s)


def _unsealed_state(sealer: Sealer, value: bytes) -> StoredState:
    try:
        subject, blob = sealer.open(value)
    except (SubjectErased, SealError):
        return StoredState(None, b"", value)
    events = [event_codec().decode(framed) for framed in unpack_events(blob)]
    if subject is None or not events:
        return StoredState(None, blob, value)
    return StoredState(replay(events), blob, value)


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
