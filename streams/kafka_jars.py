"""The official Apache Kafka broker jars, fetched once from Maven Central with
``deploy/local/kafka/pom.xml`` into a cache outside the repository, and the small process
helpers the launcher shares (an exclusive lock, a log tail, a required executable, running a
tool to its end)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from streams.checkout import existing, in_checkout
from streams.kafka_config import KAFKA_VERSION, KafkaLauncherError

POM_PATH = in_checkout("deploy/local/kafka/pom.xml")
MAVEN_TIMEOUT_S = 900.0
LOG_TAIL_LINES = 40

_COMPLETE_MARKER = ".complete"
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def default_cache_dir() -> Path:
    """Where downloaded jars are kept: ``$UAC_CACHE_DIR`` or ``~/.cache/uac``."""
    configured = os.environ.get("UAC_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "uac"


# --------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------


@contextlib.contextmanager
def exclusive_lock(lock_file: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_file`` (created if missing)."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of ``text``, without terminal colour codes."""
    return "\n".join(_ANSI_ESCAPE.sub("", text).splitlines()[-lines:])


def require_executable(name: str, purpose: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise KafkaLauncherError(f"`{name}` was not found on PATH; it is needed {purpose}")
    return found


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------
# Jars
# --------------------------------------------------------------------------


def _kafka_cache_dir(cache_dir: Path) -> Path:
    return cache_dir / f"kafka-{KAFKA_VERSION}"


def _jars_are_complete(kafka_dir: Path) -> bool:
    marker = kafka_dir / _COMPLETE_MARKER
    if not marker.is_file() or not (kafka_dir / "libs").is_dir():
        return False
    if not POM_PATH.is_file():
        return True
    return marker.read_text(encoding="utf-8").strip() == _file_sha256(POM_PATH)


def _copy_jars_with_maven(libs_dir: Path) -> None:
    mvn = require_executable("mvn", "to download the Kafka jars (install Maven 3)")
    require_executable("java", "to run Maven and the Kafka broker (install JDK 17+)")
    existing(POM_PATH, "the local Kafka pom")
    command = [
        mvn,
        "-q",
        "-B",
        "-f",
        str(POM_PATH),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={libs_dir}",
    ]
    run_tool(command, f"Maven fetching the Kafka {KAFKA_VERSION} jars", MAVEN_TIMEOUT_S)
    if not any(libs_dir.glob("kafka_2.13-*.jar")):
        raise KafkaLauncherError(f"Maven left no Kafka {KAFKA_VERSION} jars in {libs_dir}")


def run_tool(command: list[str], what: str, timeout: float) -> None:
    """Run a command to its end; KafkaLauncherError naming `what` it was doing, with the tail
    of its output, when it fails or takes longer than `timeout` seconds."""
    try:
        result = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        output = exc.output if isinstance(exc.output, str) else ""
        raise KafkaLauncherError(
            f"{what} did not finish within {timeout:.0f}s:\n{tail(output)}"
        ) from exc
    if result.returncode != 0:
        raise KafkaLauncherError(
            f"{what} failed (exit {result.returncode}):\n{tail(result.stdout)}"
        )


def ensure_jars(cache_dir: Path) -> Path:
    """Return ``<cache_dir>/kafka-3.9.1/libs``, fetching the jars with Maven if needed.

    A marker file (holding the pom's SHA-256) is written only after a
    successful copy, so an interrupted download, or a changed pom, is redone
    from scratch.
    """
    kafka_dir = _kafka_cache_dir(cache_dir)
    libs_dir = kafka_dir / "libs"
    with exclusive_lock(cache_dir / f"kafka-{KAFKA_VERSION}.lock"):
        if _jars_are_complete(kafka_dir):
            return libs_dir
        (kafka_dir / _COMPLETE_MARKER).unlink(missing_ok=True)
        shutil.rmtree(libs_dir, ignore_errors=True)
        libs_dir.mkdir(parents=True)
        _copy_jars_with_maven(libs_dir)
        (kafka_dir / _COMPLETE_MARKER).write_text(_file_sha256(POM_PATH) + "\n", encoding="utf-8")
    return libs_dir
