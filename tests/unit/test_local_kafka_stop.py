"""`uac kafka stop` reports the broker stopped only once its process has exited, and `uac kafka
status` tells a broker that is not running from a record whose broker was killed.

The brokers here are stand-ins: Python processes named `java` with a broker's arguments, so
that `local_kafka` takes them for this state directory's broker. A JVM's main thread exits
first and its other threads go on closing files and sockets for a moment; the stand-in does
the same (its main thread exits, another one finishes a second later). They are children of the
test, which collects them itself; the system collects a broker `uac kafka start` launched."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from streams import local_kafka
from streams.cli_app import app

SHUTDOWN = textwrap.dedent(
    """
    import ctypes, os, signal, sys, threading, time

    def closing(*_):
        def last_thread():
            time.sleep(1.0)
            with open(sys.argv[-1], "w") as closed:
                closed.write("closed")
            os._exit(0)

        threading.Thread(target=last_thread).start()
        ctypes.CDLL(None).pthread_exit(None)  # the main thread exits, the process goes on

    signal.signal(signal.SIGTERM, {handler})
    print("ready", flush=True)
    while True:
        time.sleep(0.1)
    """
)


def _record(state_dir: Path, pid: int, port: int = 9092) -> None:
    record = {"pid": pid, "port": port, "controller_port": 2, "bootstrap": f"127.0.0.1:{port}"}
    (state_dir / "broker.json").write_text(json.dumps(record), encoding="utf-8")


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    directory = (tmp_path / "kafka").resolve()
    directory.mkdir()
    return directory


@pytest.fixture(autouse=True)
def collected_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test collects its stand-ins itself, after `stop` returned: it does not wait for it."""
    monkeypatch.setattr(local_kafka, "REAP_WAIT_S", 0.0)


def _stand_in(state_dir: Path, handler: str) -> Iterator[subprocess.Popen[str]]:
    properties, marker = state_dir / "server.properties", state_dir / "closed"
    script = SHUTDOWN.format(handler=handler)
    looks_like_a_broker = ["java", "-c", script, "kafka.Kafka", str(properties), str(marker)]
    process = subprocess.Popen(
        looks_like_a_broker,  # argv[0] `java`; the program run is Python
        executable=sys.executable,
        env={"PYTHONHOME": sys.base_prefix},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "ready\n"
        _record(state_dir, process.pid)
        yield process
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture
def slow_to_exit(state_dir: Path) -> Iterator[subprocess.Popen[str]]:
    yield from _stand_in(state_dir, "closing")


@pytest.fixture
def deaf_to_sigterm(state_dir: Path) -> Iterator[subprocess.Popen[str]]:
    yield from _stand_in(state_dir, "signal.SIG_IGN")


def test_given_a_broker_whose_threads_outlive_its_main_thread_then_stopped_once_they_are_done(
    state_dir: Path, slow_to_exit: subprocess.Popen[str]
) -> None:
    assert local_kafka.status(state_dir) is not None
    assert local_kafka.stop(state_dir, timeout=30.0) is True
    assert (state_dir / "closed").read_text() == "closed"
    assert slow_to_exit.poll() == 0
    assert not (state_dir / "broker.json").exists()


def test_given_a_broker_that_ignores_sigterm_then_it_is_killed_after_the_timeout(
    state_dir: Path, deaf_to_sigterm: subprocess.Popen[str]
) -> None:
    assert local_kafka.stop(state_dir, timeout=1.0) is True
    assert deaf_to_sigterm.poll() == -9
    assert not (state_dir / "broker.json").exists()


def test_given_a_recorded_broker_that_was_killed_then_status_says_its_record_is_stale(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "kafka"
    state_dir.mkdir()
    killed = subprocess.Popen([sys.executable, "-c", "pass"])
    killed.wait()
    _record(state_dir, killed.pid, port=40123)
    result = CliRunner().invoke(app, ["kafka", "status"], env={"UAC_HOME": str(tmp_path)})
    assert result.exit_code == 3
    assert " ".join(result.stdout.split()) == (
        f"Kafka is not running: the broker recorded in {state_dir.resolve() / 'broker.json'} "
        f"(pid {killed.pid}, port 40123) is no longer running; the record is stale "
        "(`uac kafka start` replaces it, `uac kafka stop` removes it)"
    )
    assert (state_dir / "broker.json").exists()


def test_given_no_record_then_status_says_only_that_kafka_is_not_running(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["kafka", "status"], env={"UAC_HOME": str(tmp_path)})
    assert (result.exit_code, result.stdout) == (3, "Kafka is not running\n")
