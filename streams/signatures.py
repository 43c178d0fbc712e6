"""Producers that prove who they are: Ed25519 signatures on the records they publish.

An actor is otherwise only a name in the event. A tenant may register a public key for an
actor (`actor_keys` in the tenants file); from then on the gate counts that actor's events only
when their record carries, in the `uac-signature` header, a signature made with the matching
private key over the record's key and value exactly as published (sealed bytes included), so
neither a changed byte nor a record moved to another subject verifies. The worker holds public
keys only; the private key stays with the producer (`uac publish --signing-key FILE`).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from projections.gate import Signature
from schemas.events import Event
from streams.private_files import write_private

HEADER = "uac-signature"
Headers = tuple[tuple[str, bytes], ...]


class SigningKeyError(ValueError):
    """A signing key or registered public key that cannot be used (named, with why)."""


def signed_bytes(key: bytes | None, value: bytes) -> bytes:
    """What a signature covers: the record's key (length first, so no byte moves between the
    two) and its value."""
    key = key or b""
    return len(key).to_bytes(4, "big") + key + value


@dataclass(frozen=True)
class Signer:
    """A producer's private key."""

    private_key: Ed25519PrivateKey

    @classmethod
    def from_file(cls, path: Path) -> Signer:
        try:
            loaded = serialization.load_pem_private_key(path.read_bytes(), password=None)
        except (OSError, ValueError, TypeError) as error:
            raise SigningKeyError(f"signing key {path}: {error}") from None
        if not isinstance(loaded, Ed25519PrivateKey):
            raise SigningKeyError(f"signing key {path}: not an Ed25519 private key")
        return cls(loaded)

    def headers(self, key: bytes | None, value: bytes) -> Headers:
        return ((HEADER, self.private_key.sign(signed_bytes(key, value))),)

    def public_key_text(self) -> str:
        return public_key_text(self.private_key.public_key())


def new_signing_key(path: Path) -> str:
    """Write a new Ed25519 private key to `path` (PEM, readable by its owner only; never over
    an existing file) and return its public key as the tenants file takes it."""
    if path.exists():
        raise SigningKeyError(f"{path} exists; a signing key is never overwritten")
    private_key = Ed25519PrivateKey.generate()
    pem = private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    write_private(path, pem)
    return public_key_text(private_key.public_key())


def public_key_text(public_key: Ed25519PublicKey) -> str:
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode("ascii")


@dataclass(frozen=True)
class ActorKeys:
    """The public keys registered per (tenant, actor): a record of the actor counts as signed
    when any of them verifies it, so that a key can be rotated (register the new key beside
    the old, move the producers to it, then remove the old) without refusing the records
    signed with either key while both are in use."""

    keys: Mapping[tuple[str, str], tuple[Ed25519PublicKey, ...]] = field(default_factory=dict)

    @classmethod
    def from_texts(cls, texts: Mapping[tuple[str, str], Sequence[str]], where: str) -> ActorKeys:
        """The keys of (tenant, actor) -> base64 public key texts, as the tenants file gives
        them (`where` names the file in an error)."""
        return cls(
            {
                (tenant, actor): tuple(
                    _public_key(f"{where}: tenant {tenant} actor {actor}", text) for text in keys
                )
                for (tenant, actor), keys in texts.items()
            }
        )

    def check(self, event: Event, key: bytes | None, value: bytes, headers: Headers) -> Signature:
        """The signature of a record that carries `event`, against its actor's registered
        keys (ABSENT for an actor without one: the gate asks only of actors with keys)."""
        public_keys = self.keys.get((event.tenant_id, event.actor), ())
        signature = _header(headers) if public_keys else None
        if signature is None:
            return Signature.ABSENT
        signed = signed_bytes(key, value)
        if any(_verifies(public_key, signature, signed) for public_key in public_keys):
            return Signature.VALID
        return Signature.INVALID


def _verifies(public_key: Ed25519PublicKey, signature: bytes, signed: bytes) -> bool:
    try:
        public_key.verify(signature, signed)
    except InvalidSignature:
        return False
    return True


def _header(headers: Iterable[tuple[str, bytes]]) -> bytes | None:
    return next((value for name, value in headers if name == HEADER), None)


def _public_key(where: str, text: str) -> Ed25519PublicKey:
    try:
        return Ed25519PublicKey.from_public_bytes(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError) as error:
        raise SigningKeyError(f"{where}: not a base64 Ed25519 public key ({error})") from None


def headers_of(record: Any) -> Headers:
    """A Kafka record's headers as (name, bytes) pairs, whichever form the client gives."""
    found = getattr(record, "headers", None) or ()
    pairs = found.items() if isinstance(found, Mapping) else found
    return tuple((str(name), bytes(value)) for name, value in pairs)
