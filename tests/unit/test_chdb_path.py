"""The embedded ClickHouse's data path holds the history in the clear: it is the owner's only."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

OPEN_CHDB = (
    "from streams.clickhouse import connect; from streams.settings import Settings; "
    "connect(Settings()).query('SELECT 1')"
)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_chdb_path_and_uac_home_are_created_for_the_owner_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = os.environ | {"UAC_HOME": str(home)}
    subprocess.run([sys.executable, "-c", OPEN_CHDB], check=True, env=env, timeout=120)
    assert (_mode(home), _mode(home / "chdb")) == (0o700, 0o700)


def test_a_chdb_path_an_older_version_left_open_is_made_owner_only(tmp_path: Path) -> None:
    chdb = tmp_path / "chdb"
    chdb.mkdir(mode=0o755)
    chdb.chmod(0o755)
    env = os.environ | {"UAC_HOME": str(tmp_path)}
    subprocess.run([sys.executable, "-c", OPEN_CHDB], check=True, env=env, timeout=120)
    assert _mode(chdb) == 0o700
