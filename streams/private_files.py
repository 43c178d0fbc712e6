"""Files only their owner may read: subject keys and the sink's read token."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path

PRIVATE_FILE = 0o600
PRIVATE_DIRECTORY = 0o700
_OTHERS = stat.S_IRWXG | stat.S_IRWXO

log = logging.getLogger(__name__)


def private_directory(path: Path) -> Path:
    """`path` as a directory; created (with its missing parents) for the owner only."""
    missing = [directory for directory in (path, *path.parents) if not directory.exists()]
    for directory in reversed(missing):
        directory.mkdir(mode=PRIVATE_DIRECTORY, exist_ok=True)
    return path


def private_draft(path: Path, data: bytes) -> Path:
    """A complete, owner-only copy of `data` next to `path`, for the caller to move into place
    (rename to replace, link to create only if absent), so no reader sees it half written."""
    draft = path.with_name(f"{path.name}.{os.getpid()}.draft")
    draft.unlink(missing_ok=True)
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    with os.fdopen(descriptor, "wb") as draft_file:
        draft_file.write(data)
    return draft


def write_private(path: Path, data: bytes) -> None:
    """Replace `path` atomically with `data`, readable by its owner only."""
    private_draft(path, data).replace(path)


def narrowed_directory(path: Path) -> None:
    """An existing directory that an older version left open to others, made owner-only."""
    _narrow(path, path.stat().st_mode, PRIVATE_DIRECTORY, path.chmod)


def read_private(path: Path) -> bytes:
    """The bytes of `path`; if an older version left it readable by others, it is made
    owner-only first."""
    with path.open("rb") as handle:
        descriptor = handle.fileno()
        _narrow(
            path, os.fstat(descriptor).st_mode, PRIVATE_FILE, lambda m: os.fchmod(descriptor, m)
        )
        return handle.read()


def _narrow(path: Path, mode: int, private: int, change: Callable[[int], None]) -> None:
    if not mode & _OTHERS:
        return
    try:
        change(private)
    except PermissionError:
        log.warning("%s is open to other users and this process may not change that", path)
