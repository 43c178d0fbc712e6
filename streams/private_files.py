"""Files only their owner may read: subject keys and the sink's read token."""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_FILE = 0o600
PRIVATE_DIRECTORY = 0o700


def private_directory(path: Path) -> Path:
    """`path` as a directory; created (with its missing parents) for the owner only."""
    path.mkdir(mode=PRIVATE_DIRECTORY, parents=True, exist_ok=True)
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
