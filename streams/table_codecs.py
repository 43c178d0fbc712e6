"""Faust codecs for the user-state table: keys are `tenant:subject` text (the same UTF-8 bytes
producers use as message keys, so the changelog is co-partitioned with the events topic), values
are StateCheckpoint records (the same framed Avro the compacted state topic carries)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from faust.serializers import codecs

from projections.document import checkpoint_of, state_from_checkpoint
from projections.state import UserState
from schemas.codec import checkpoint_codec

KEY_CODEC = "uac-subject-key"
STATE_CODEC = "uac-user-state"


@dataclass(frozen=True)
class StoredState:
    """A subject's state and its encoded checkpoint, encoded once per write."""

    state: UserState
    encoded: bytes

    @classmethod
    def of(cls, state: UserState) -> StoredState:
        return cls(state, checkpoint_codec().encode(checkpoint_of(state)))


class SubjectKeyCodec(codecs.Codec):
    def _dumps(self, obj: Any) -> bytes:
        return str(obj).encode("utf-8")

    def _loads(self, s: bytes) -> str:
        return s.decode("utf-8")


class UserStateCodec(codecs.Codec):
    def _dumps(self, obj: Any) -> bytes:
        if not isinstance(obj, StoredState):
            raise TypeError(f"the user-state table stores StoredState, not {type(obj).__name__}")
        return obj.encoded

    def _loads(self, s: bytes) -> StoredState:
        return StoredState(state_from_checkpoint(checkpoint_codec().decode(s)), s)


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


def register_table_codecs() -> None:
    codecs.register(KEY_CODEC, SubjectKeyCodec())
    codecs.register(STATE_CODEC, UserStateCodec())
