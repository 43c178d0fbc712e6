"""Keeps a running worker and sink in step with their tenants file, without a restart. The
worker reads the file again every UAC_TENANTS_RELOAD_SECONDS, and a changed file that can be
used replaces the gate policy and the signing keys from the next batch on (an actor added or
removed, a key registered, rotated or revoked); the sink reads it again before each read it
serves (a tenant's consent-exempt purposes). A changed file that cannot be used (half written,
invalid, gone) is refused with its reason, logged once, and the process goes on enforcing the
last file it could use. Events decided before a change stay decided: `uac redrive` sends the
refused ones again."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from hashlib import sha256
from typing import NamedTuple

from streams.settings import Settings
from streams.signatures import SigningKeyError
from streams.tenants import TenantsFileError, TenantsPolicy, read_tenants_file, tenants_policy_of

log = logging.getLogger(__name__)


class Reloaded(NamedTuple):
    """A changed tenants file, to enforce from now on."""

    policy: TenantsPolicy


class Refused(NamedTuple):
    """A changed tenants file the worker cannot use, and why (the last good one stays)."""

    reason: str


@dataclass
class TenantsWatch:
    settings: Settings
    current: TenantsPolicy
    refused: str | None = None
    """The digest (or read error) of the last file refused, so one bad file is told once."""

    def poll(self) -> Reloaded | Refused | None:
        """What changed since the last poll: a file to enforce now, a file refused, or nothing
        (the same file, or the same refused file again)."""
        try:
            content = read_tenants_file(self.settings.tenants_file)
        except TenantsFileError as error:
            return self._refused(str(error), str(error))
        digest = sha256(content).hexdigest()
        if digest == self.current.sha256:
            self.refused = None
            return None
        try:
            policy = tenants_policy_of(self.settings, content)
        except (TenantsFileError, SigningKeyError) as error:
            return self._refused(digest, str(error))
        self.current, self.refused = policy, None
        return Reloaded(policy)

    def follow(self) -> Reloaded | Refused | None:
        """Poll, and log what changed: the file now enforced, or why a file is refused."""
        change = self.poll()
        if isinstance(change, Reloaded):
            log.warning(
                "tenants file reloaded: enforcing sha256 %s (%d tenants) from now on",
                change.policy.sha256,
                len(change.policy.gate_policy.tenants),
            )
        elif isinstance(change, Refused):
            log.error(
                "tenants file change refused, still enforcing sha256 %s: %s",
                self.current.sha256,
                change.reason,
            )
        return change

    def _refused(self, seen: str, reason: str) -> Refused | None:
        if seen == self.refused:
            return None
        self.refused = seen
        return Refused(reason)
