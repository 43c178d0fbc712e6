"""Loads the tenant policy file (actor allow-lists, consent-exempt purposes) into a GatePolicy."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

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


def load_gate_policy(
    path: Path,
    *,
    max_future_skew_seconds: int = 300,
    max_event_bytes: int = 64 * 1024,
    require_sealed: bool = False,
    max_history_bytes: int | None = None,
) -> GatePolicy:
    parsed = _parsed(path)
    return GatePolicy(
        tenants={
            name: TenantPolicy(
                frozenset(t.actors),
                frozenset(t.consent_exempt_purposes),
                signing_actors=frozenset(t.actor_keys),
            )
            for name, t in parsed.tenants.items()
        },
        max_future_skew=timedelta(seconds=max_future_skew_seconds),
        max_event_bytes=max_event_bytes,
        require_sealed=require_sealed,
        max_history_bytes=max_history_bytes,
    )


def actor_keys_of(path: Path) -> ActorKeys:
    """The public keys the tenants file registers for its signing actors."""
    texts = {
        (name, actor): tenant.keys_of(actor)
        for name, tenant in _parsed(path).tenants.items()
        for actor in tenant.actor_keys
    }
    return ActorKeys.from_texts(texts, f"tenants file {path}")


def gate_policy_of(settings: Settings) -> GatePolicy:
    """The gate policy a streaming process enforces (sealing required unless configured off,
    and a bounded history per subject)."""
    return load_gate_policy(
        settings.tenants_file,
        max_future_skew_seconds=settings.max_future_skew_seconds,
        max_event_bytes=settings.max_event_bytes,
        require_sealed=settings.require_sealed,
        max_history_bytes=settings.max_subject_history_bytes,
    )


class TenantsFileError(ValueError):
    """A tenants file that cannot be read or does not match its format (named, with why)."""


def _parsed(path: Path) -> _TenantsFile:
    try:
        return _TenantsFile.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as error:
        if isinstance(error, ValidationError):
            problems = "; ".join(
                f"{'.'.join(str(part) for part in problem['loc'])}: "
                + problem["msg"].removeprefix("Value error, ")
                for problem in error.errors()
            )
            raise TenantsFileError(f"tenants file {path}: {problems}") from None
        raise TenantsFileError(f"tenants file {path}: {error}") from None
