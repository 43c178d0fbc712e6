"""Per-subject data keys: the key store behind crypto-shredding.

Every personal record UaC writes to Kafka (events, accepted events, alerts, checkpoints, the
state table's changelog) is sealed with its subject's key. Erasure destroys the key, so every
copy in every topic becomes unreadable to everyone, however long the log keeps it.

`SubjectKeys` is the interface. `FileKeyStore` is the embedded default: one 256-bit key file
per subject under `UAC_HOME/keys`, readable by its owner only and shared by the processes of one
machine (publisher, worker, sink, CLI). A production store (HashiCorp Vault transit, AWS/GCP
KMS envelope keys, an HSM) implements the same four methods; see docs/operator.md.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Protocol

from schemas.erasures import ref_of_key
from streams.private_files import (
    narrowed_directory,
    private_directory,
    private_draft,
    read_private,
)

KEY_BYTES = 32


class SubjectErased(LookupError):
    """The subject was erased: its key is gone and will never be created again."""


class SubjectKeys(Protocol):
    def key_for(self, subject: str) -> bytes | None:
        """The key of `tenant:subject`, or None if it has none (never sealed, or erased)."""
        ...

    def key_for_writing(self, subject: str) -> bytes:
        """The subject's key, created on first use; raises SubjectErased after erasure."""
        ...

    def destroy(self, subject: str) -> bool:
        """Destroy the key for good (True if there was one) and refuse to ever create it again."""
        ...

    def is_destroyed(self, subject: str) -> bool: ...

    def destroy_by_ref(self, ref: str) -> bool:
        """Destroy the key of the subject whose `subject_ref` is `ref` (ledger reconciliation)."""
        ...


class FileKeyStore:
    """Keys as files named by the subject's sha256 reference (no subject ids on disk)."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._cache: dict[str, bytes] = {}
        self._path_cache: dict[str, tuple[Path, Path]] = {}
        if directory.is_dir():
            for folder in (directory, *(path for path in directory.iterdir() if path.is_dir())):
                narrowed_directory(folder)

    def _paths(self, subject: str) -> tuple[Path, Path]:
        paths = self._path_cache.get(subject)
        if paths is None:
            paths = self._path_cache[subject] = self._ref_paths(ref_of_key(subject))
        return paths

    def _ref_paths(self, ref: str) -> tuple[Path, Path]:
        folder = self._directory / ref[:2]
        return folder / f"{ref}.key", folder / f"{ref}.destroyed"

    def key_for(self, subject: str) -> bytes | None:
        key_path, marker = self._paths(subject)
        if os.path.exists(marker):  # noqa: PTH110 (the cheaper check on the hot path)
            self._cache.pop(subject, None)
            return None
        cached = self._cache.get(subject)
        if cached is not None:
            return cached
        try:
            key = read_private(key_path)
        except FileNotFoundError:
            return None
        self._cache[subject] = key
        return key

    def key_for_writing(self, subject: str) -> bytes:
        existing = self.key_for(subject)  # None once the subject's key is destroyed
        if existing is not None:
            return existing
        if self.is_destroyed(subject):
            raise SubjectErased(f"subject {ref_of_key(subject)[:12]}… was erased")
        return self._create(subject)

    def _create(self, subject: str) -> bytes:
        """Create atomically: of two processes racing, both end up with the same key."""
        key_path, _ = self._paths(subject)
        private_directory(self._directory)
        private_directory(key_path.parent)
        draft = private_draft(key_path, os.urandom(KEY_BYTES))
        with contextlib.suppress(FileExistsError):
            os.link(draft, key_path)
        draft.unlink()
        key = key_path.read_bytes()
        self._cache[subject] = key
        return key

    def destroy(self, subject: str) -> bool:
        self._cache.pop(subject, None)
        return self.destroy_by_ref(ref_of_key(subject))

    def destroy_by_ref(self, ref: str) -> bool:
        key_path, marker = self._ref_paths(ref)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
        self._cache = {s: k for s, k in self._cache.items() if ref_of_key(s) != ref}
        try:
            size = key_path.stat().st_size
        except FileNotFoundError:
            return False
        with key_path.open("r+b") as handle:
            handle.write(b"\0" * size)
            handle.flush()
            os.fsync(handle.fileno())
        key_path.unlink()
        return True

    def is_destroyed(self, subject: str) -> bool:
        _, marker = self._paths(subject)
        return marker.exists()
