"""Sealing records with their subject's key (AES-256-GCM), for crypto-shredding.

A sealed value is `UACS` + version byte, the subject (`tenant:subject`, 2-byte length + UTF-8),
a 12-byte nonce and ciphertext||tag of the framed Avro record. The subject is the associated
data, so a sealed record cannot be passed off as another subject's, and any reader (a table
codec that sees only the value, a sink, the CLI) can find the key to open it. Unsealed values
start with the Confluent magic byte 0, so the two are never confused.
"""

from __future__ import annotations

import logging
import os
import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from streams.keys import SubjectErased, SubjectKeys

log = logging.getLogger(__name__)

SEAL_MAGIC = b"UACS\x01"
NONCE_BYTES = 12
_LENGTH = struct.Struct(">H")
_MAX_NAME_BYTES = 2 ** (8 * _LENGTH.size) - 1


class SealError(ValueError):
    """A sealed record that cannot be opened (malformed, or tampered with)."""


class SubjectTooLong(ValueError):
    """A record whose `tenant:subject` is longer than a sealed record can name (its length is
    written in two bytes): it cannot be sealed."""


def is_sealed(value: bytes) -> bool:
    return value.startswith(SEAL_MAGIC)


def too_long_to_seal(subject: str) -> str | None:
    """Why records of `subject` cannot be sealed (None when they can)."""
    return _name_too_long(len(subject.encode("utf-8")))


def _name_too_long(size: int) -> str | None:
    if size <= _MAX_NAME_BYTES:
        return None
    return (
        f"its tenant_id:subject_id of {size:,} bytes is longer than a sealed record can "
        f"name ({_MAX_NAME_BYTES:,} bytes)"
    )


def seal(key: bytes, subject: str, plaintext: bytes) -> bytes:
    name = subject.encode("utf-8")
    problem = _name_too_long(len(name))
    if problem is not None:
        raise SubjectTooLong(problem)
    nonce = os.urandom(NONCE_BYTES)
    return (
        SEAL_MAGIC
        + _LENGTH.pack(len(name))
        + name
        + nonce
        + AESGCM(key).encrypt(nonce, plaintext, name)
    )


def sealed_subject(sealed: bytes) -> str:
    """The `tenant:subject` a sealed record belongs to (readable without its key)."""
    start = len(SEAL_MAGIC)
    if len(sealed) < start + _LENGTH.size:
        raise SealError("sealed record is truncated")
    (length,) = _LENGTH.unpack_from(sealed, start)
    name = sealed[start + _LENGTH.size : start + _LENGTH.size + length]
    if len(name) != length:
        raise SealError("sealed record is truncated")
    try:
        return name.decode("utf-8")
    except UnicodeDecodeError:
        raise SealError("sealed record names no readable subject") from None


def open_sealed(key: bytes, sealed: bytes, subject: str) -> bytes:
    """The plaintext of a value sealed for `subject` (as `sealed_subject` reads it)."""
    name = subject.encode("utf-8")
    start = len(SEAL_MAGIC) + _LENGTH.size + len(name)
    nonce, body = sealed[start : start + NONCE_BYTES], sealed[start + NONCE_BYTES :]
    try:
        return AESGCM(key).decrypt(nonce, body, name)
    except (InvalidTag, ValueError):
        raise SealError("sealed record does not open with its subject's key") from None


class Sealer:
    """Seals and opens the records of subjects named `tenant:subject`."""

    def __init__(self, keys: SubjectKeys) -> None:
        self.keys = keys

    def seal(self, subject: str, framed: bytes) -> bytes:
        return seal(self.keys.key_for_writing(subject), subject, framed)

    def open(self, value: bytes) -> tuple[str | None, bytes]:
        """(subject, framed record) of a sealed value, (None, value) of an unsealed one.
        Raises SubjectErased when the subject's key is gone, SealError when it is corrupt."""
        if not is_sealed(value):
            return None, value
        subject = sealed_subject(value)
        key = self.keys.key_for(subject)
        if key is None:
            if self.keys.is_destroyed(subject):
                raise SubjectErased("the subject of this record was erased (its key is destroyed)")
            raise SealError("no key exists for the subject this record is sealed for")
        return subject, open_sealed(key, value, subject)


def readable(sealer: Sealer, value: bytes | None) -> bytes | None:
    """The framed record of a topic value, or None when it is a tombstone, its subject was
    erased (an erased subject has no data the system can read) or it does not open with the
    key the store holds for its subject (tampered with, or sealed under a key that is gone):
    readers skip those, and the last is logged as a warning, so one such record neither stops
    a read of every other subject nor passes unseen."""
    if value is None:
        return None
    try:
        return sealer.open(value)[1]
    except SubjectErased:
        return None
    except SealError as error:
        log.warning("skipped a record that cannot be opened: %s", error)
        return None
