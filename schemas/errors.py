"""Typed decode failures. Each carries the reason code its quarantine record will show."""

from __future__ import annotations

from schemas.reasons import ReasonCode


class DecodeError(Exception):
    """Bytes that must not be turned into a record. Never decoded with a guessed schema."""

    reason: ReasonCode = ReasonCode.MALFORMED_AVRO


class BadFraming(DecodeError):
    reason = ReasonCode.BAD_FRAMING


class UnknownSchemaId(DecodeError):
    reason = ReasonCode.UNKNOWN_SCHEMA_ID


class IncompatibleSchema(DecodeError):
    reason = ReasonCode.INCOMPATIBLE_SCHEMA


class MalformedAvro(DecodeError):
    reason = ReasonCode.MALFORMED_AVRO


class InvalidRecord(DecodeError):
    reason = ReasonCode.INVALID_RECORD


class MalformedJson(DecodeError):
    reason = ReasonCode.MALFORMED_JSON


class RegistryUnavailable(RuntimeError):
    """The schema registry did not answer. Not a verdict on the bytes (they may be fine): the
    caller retries later instead of quarantining."""
