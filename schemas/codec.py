"""Avro binary with Confluent framing: magic byte 0, 4-byte big-endian schema id, Avro body.

Decoding never guesses: the writer schema comes from the registry by the id in the frame, and it
must be compatible with this build's reader schema (checked once per pair with the `avro`
package's checker), otherwise a typed `DecodeError` is raised.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from fastavro import schemaless_reader, schemaless_writer
from pydantic import ValidationError

from schemas.alerts import Alert
from schemas.base import WireModel
from schemas.checkpoint import StateCheckpoint
from schemas.compatibility import can_read
from schemas.decisions import GateDecision
from schemas.erasures import ErasureRecorded, ReadAudited
from schemas.errors import BadFraming, IncompatibleSchema, InvalidRecord, MalformedAvro
from schemas.events import Event
from schemas.json_lines import validation_summary
from schemas.registry import RegisteredSchema, SchemaRegistry, default_registry

MAGIC_BYTE = 0
_HEADER = struct.Struct(">bI")

M = TypeVar("M", bound=WireModel)


def frame(schema_id: int, body: bytes) -> bytes:
    return _HEADER.pack(MAGIC_BYTE, schema_id) + body


def unframe(data: bytes) -> tuple[int, bytes]:
    """Split a framed message into (schema id, Avro body)."""
    if len(data) < _HEADER.size:
        raise BadFraming(f"message of {len(data)} bytes is shorter than the 5-byte frame header")
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC_BYTE:
        raise BadFraming(f"first byte is {magic}, not the magic byte {MAGIC_BYTE}")
    return schema_id, data[_HEADER.size :]


class AvroCodec(Generic[M]):
    """Encodes one model type under one registry subject and decodes any compatible version."""

    def __init__(
        self,
        registry: SchemaRegistry,
        subject: str,
        model: type[M],
        to_record: Callable[[M], dict[str, Any]] | None = None,
    ) -> None:
        self._registry = registry
        self._model = model
        self._reader = registry.latest(subject)
        self._to_record = to_record or (lambda value: value.model_dump(mode="python"))
        self._checked: dict[int, RegisteredSchema] = {self._reader.schema_id: self._reader}

    @property
    def schema_id(self) -> int:
        return self._reader.schema_id

    @property
    def schema_version(self) -> int:
        return self._reader.version

    def encode(self, value: M) -> bytes:
        body = io.BytesIO()
        schemaless_writer(body, self._reader.parsed, self._to_record(value))
        return frame(self._reader.schema_id, body.getvalue())

    def decode(self, data: bytes) -> M:
        return self._model_from(self.decode_record(data))

    def decode_record(self, data: bytes) -> dict[str, Any]:
        """The record as fastavro reads it (resolved to this build's reader schema), without
        the model's validation: for records this system wrote itself from validated models,
        such as the sink's reading of the worker's accepted events. Raises what `decode`
        raises for bad framing, unknown or incompatible schemas and malformed Avro."""
        schema_id, body = unframe(data)
        return self._read(self._writer(schema_id), body)

    def _writer(self, schema_id: int) -> RegisteredSchema:
        known = self._checked.get(schema_id)
        if known is not None:
            return known
        writer = self._registry.by_id(schema_id)
        if writer.subject != self._reader.subject:
            raise IncompatibleSchema(
                f"schema id {schema_id} is {writer.subject}, not {self._reader.subject}"
            )
        problem = can_read(self._reader, writer)
        if problem:
            raise IncompatibleSchema(
                f"writer schema id {schema_id} cannot be read as {self._reader.subject} "
                f"v{self._reader.version}: {problem}"
            )
        self._checked[schema_id] = writer
        return writer

    def _read(self, writer: RegisteredSchema, body: bytes) -> dict[str, Any]:
        stream = io.BytesIO(body)
        reader = None if writer is self._reader else self._reader.parsed
        try:
            record = schemaless_reader(stream, writer.parsed, reader)
        except Exception as error:  # fastavro raises many types on corrupt input
            raise MalformedAvro(f"Avro body does not decode: {type(error).__name__}") from error
        if stream.tell() != len(body):
            raise MalformedAvro(f"{len(body) - stream.tell()} trailing bytes after the record")
        if not isinstance(record, dict):
            raise MalformedAvro("Avro body is not a record")
        return record

    def _model_from(self, record: dict[str, Any]) -> M:
        try:
            return self._model.model_validate(record)
        except ValidationError as error:
            raise InvalidRecord(validation_summary(error)) from error


def event_record(event: Event) -> dict[str, Any]:
    record = event.model_dump(mode="python")
    record["payload"] = (f"uac.{event.type.value}", record["payload"])
    return record


def event_codec(registry: SchemaRegistry | None = None) -> AvroCodec[Event]:
    return AvroCodec(registry or default_registry(), "uac.Event", Event, event_record)


def alert_codec(registry: SchemaRegistry | None = None) -> AvroCodec[Alert]:
    return AvroCodec(registry or default_registry(), "uac.Alert", Alert)


def decision_codec(registry: SchemaRegistry | None = None) -> AvroCodec[GateDecision]:
    return AvroCodec(registry or default_registry(), "uac.GateDecision", GateDecision)


def checkpoint_codec(registry: SchemaRegistry | None = None) -> AvroCodec[StateCheckpoint]:
    return AvroCodec(registry or default_registry(), "uac.StateCheckpoint", StateCheckpoint)


def erasure_codec(registry: SchemaRegistry | None = None) -> AvroCodec[ErasureRecorded]:
    return AvroCodec(registry or default_registry(), "uac.ErasureRecorded", ErasureRecorded)


def read_audit_codec(registry: SchemaRegistry | None = None) -> AvroCodec[ReadAudited]:
    return AvroCodec(registry or default_registry(), "uac.ReadAudited", ReadAudited)
