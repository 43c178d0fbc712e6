"""Loads the tenant policy file (actor allow-lists, consent-exempt purposes) into a GatePolicy."""

from __future__ import annotations

import json
from datetime import timedelta
from hashlib import sha256
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from projections.gate import GatePolicy, TenantPolicy
from streams.settings import Settings
from streams.signatures import ActorKeys


class _Tenant(BaseModel):
    model_config = ConfigDict(extra="forbid")
    actors: list[str]
    consent_exempt_purposes: list[str] = ["care"]
    actor_keys: dict[str, str | list[str]] = {}
    """Actor -> base64 Ed25519 public key, or a list of them while a key is rotated: that
    actor's events count only when signed with one of its keys."""

    @model_validator(mode="after")
    def _keys_of_allowed_actors(self) -> _Tenant:
        strangers = sorted(set(self.actor_keys) - set(self.actors))
        if strangers:
            raise ValueError(f"actor_keys names actors not in actors: {', '.join(strangers)}")
        keyless = sorted(actor for actor, keys in self.actor_keys.items() if not keys)
        if keyless:
            raise ValueError(f"actor_keys gives no key for: {', '.join(keyless)}")
        return self

    def keys_of(self, actor: str) -> tuple[str, ...]:
        keys = self.actor_keys[actor]
        return (keys,) if isinstance(keys, str) else tuple(keys)


class _TenantsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    doc: str = ""
    tenants: dict[str, _Tenant]


class TenantsPolicy(NamedTuple):
    """What a worker enforces from one reading of the tenants file."""

    gate_policy: GatePolicy
    actor_keys: ActorKeys
    sha256: str
    """Of the file's bytes: which file a worker enforces, without its contents."""


def load_gate_policy(
    path: Path,
    *,
    max_future_skew_seconds: int = 300,
    max_event_bytes: int = 64 * 1024,
    require_sealed: bool = False,
    max_history_bytes: int | None = None,
) -> GatePolicy:
    return _gate_policy(
        _parsed(read_tenants_file(path), path),
        max_future_skew=timedelta(seconds=max_future_skew_seconds),
        max_event_bytes=max_event_bytes,
        require_sealed=require_sealed,
        max_history_bytes=max_history_bytes,
    )


def actor_keys_of(path: Path) -> ActorKeys:
    """The public keys the tenants file registers for its signing actors."""
    return _actor_keys(_parsed(read_tenants_file(path), path), path)


def gate_policy_of(settings: Settings) -> GatePolicy:
    """The gate policy a streaming process enforces (sealing required unless configured off,
    and a bounded history per subject)."""
    return tenants_policy_of(settings).gate_policy


def tenants_policy_of(settings: Settings, content: bytes | None = None) -> TenantsPolicy:
    """The gate policy and signing keys a streaming process enforces, from `content` (the
    tenants file's bytes, read now when not given)."""
    path = settings.tenants_file
    content = read_tenants_file(path) if content is None else content
    parsed = _parsed(content, path)
    gate_policy = _gate_policy(
        parsed,
        max_future_skew=timedelta(seconds=settings.max_future_skew_seconds),
        max_event_bytes=settings.max_event_bytes,
        require_sealed=settings.require_sealed,
        max_history_bytes=settings.max_subject_history_bytes,
    )
    return TenantsPolicy(gate_policy, _actor_keys(parsed, path), sha256(content).hexdigest())


def _gate_policy(
    parsed: _TenantsFile,
    *,
    max_future_skew: timedelta,
    max_event_bytes: int,
    require_sealed: bool,
    max_history_bytes: int | None,
) -> GatePolicy:
    return GatePolicy(
        tenants={
            name: TenantPolicy(
                frozenset(t.actors),
                frozenset(t.consent_exempt_purposes),
                signing_actors=frozenset(t.actor_keys),
            )
            for name, t in parsed.tenants.items()
        },
        max_future_skew=max_future_skew,
        max_event_bytes=max_event_bytes,
        require_sealed=require_sealed,
        max_history_bytes=max_history_bytes,
    )


def _actor_keys(parsed: _TenantsFile, path: Path) -> ActorKeys:
    texts = {
        (name, actor): tenant.keys_of(actor)
        for name, tenant in parsed.tenants.items()
        for actor in tenant.actor_keys
    }
    return ActorKeys.from_texts(texts, f"tenants file {path}")


class TenantsFileError(ValueError):
    """A tenants file that cannot be read or does not match its format (named, with why)."""


def read_tenants_file(path: Path) -> bytes:
    """The tenants file's bytes (TenantsFileError, named, when it cannot be read)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise TenantsFileError(
            f"tenants file {path} does not exist (UAC_TENANTS_FILE names it)"
        ) from None
    except OSError as error:
        raise TenantsFileError(f"tenants file {path}: {error}") from None


def _parsed(content: bytes, path: Path) -> _TenantsFile:
    try:
        return _TenantsFile.model_validate(json.loads(content))
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in problem['loc'])}: "
            + problem["msg"].removeprefix("Value error, ")
            for problem in error.errors()
        )
        raise TenantsFileError(f"tenants file {path}: {problems}") from None
    except ValueError as error:
        raise TenantsFileError(f"tenants file {path}: {error}") from None
