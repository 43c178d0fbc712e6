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
import fcntl
import mmap
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
GENERATION_FILE = "destroyed.generation"
_GENERATION_BYTES = 8


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


class DestructionCount:
    """How many keys were destroyed under a key directory, shared by every process of the
    machine through one memory-mapped 8-byte file: a process reads it without a system call and
    sees another process's destruction as soon as that process has counted it."""

    def __init__(self, directory: Path) -> None:
        path = directory / GENERATION_FILE
        private_directory(directory)
        with contextlib.suppress(FileExistsError):
            draft = private_draft(path, bytes(_GENERATION_BYTES))
            try:
                os.link(draft, path)
            finally:
                draft.unlink()
        self._path = path
        with path.open("rb") as handle:
            self._view = mmap.mmap(handle.fileno(), _GENERATION_BYTES, access=mmap.ACCESS_READ)

    def current(self) -> bytes:
        return self._view[:_GENERATION_BYTES]

    def increment(self) -> None:
        with self._path.open("r+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            count = int.from_bytes(handle.read(_GENERATION_BYTES), "little") + 1
            handle.seek(0)
            handle.write(count.to_bytes(_GENERATION_BYTES, "little"))


class FileKeyStore:
    """Keys as files named by the subject's sha256 reference (no subject ids on disk).

    A destroyed key leaves a marker file, so it is never created again. Keys read once are
    cached; every lookup first compares the machine's `DestructionCount` with the count the
    cache was filled under, and empties the cache when another destruction happened since, so a
    key destroyed by any process is never used again, without a file check per lookup."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._cache: dict[str, bytes] = {}
        self._path_cache: dict[str, tuple[Path, Path]] = {}
        if directory.is_dir():
            for folder in (directory, *(path for path in directory.iterdir() if path.is_dir())):
                narrowed_directory(folder)
        self._destructions = DestructionCount(directory)
        self._cached_under = self._destructions.current()

    def _paths(self, subject: str) -> tuple[Path, Path]:
        paths = self._path_cache.get(subject)
        if paths is None:
            paths = self._path_cache[subject] = self._ref_paths(ref_of_key(subject))
        return paths

    def _ref_paths(self, ref: str) -> tuple[Path, Path]:
        folder = self._directory / ref[:2]
        return folder / f"{ref}.key", folder / f"{ref}.destroyed"

    def _current_cache(self) -> dict[str, bytes]:
        """The cached keys, emptied first if a key was destroyed since they were read."""
        destructions = self._destructions.current()
        if destructions != self._cached_under:
            self._cache.clear()
            self._cached_under = destructions
        return self._cache

    def key_for(self, subject: str) -> bytes | None:
        cached = self._current_cache().get(subject)
        if cached is not None:
            return cached
        key_path, marker = self._paths(subject)
        if marker.exists():
            return None
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
        return self.destroy_by_ref(ref_of_key(subject))

    def destroy_by_ref(self, ref: str) -> bool:
        """Marker first, then the count (every process that sees the new count, this one
        included, empties its cache and finds the marker), then the key file is overwritten and
        removed. A destruction already complete (its marker, no key file) is left as it is: the
        count does not move, so reconciling with the ledger again (each worker start, each
        read from the CLI) empties no process's cache."""
        key_path, marker = self._ref_paths(ref)
        if marker.exists() and not key_path.exists():
            return False
        private_directory(marker.parent)
        marker.touch()
        self._destructions.increment()
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

    def destroyed_refs(self) -> frozenset[str]:
        """The `subject_ref` of every subject whose key was destroyed here (its marker)."""
        if not self._directory.is_dir():
            return frozenset()
        return frozenset(marker.stem for marker in self._directory.glob("*/*.destroyed"))

    def is_destroyed(self, subject: str) -> bool:
        """A cached key was not destroyed (no key was since it was read); any other subject's
        marker is looked up."""
        if subject in self._current_cache():
            return False
        _, marker = self._paths(subject)
        return marker.exists()
