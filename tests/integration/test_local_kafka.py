"""Integration tests for streams.local_kafka: a real Kafka broker run with java.

Jars are cached in the default cache dir ($UAC_CACHE_DIR or ~/.cache/uac);
each test uses its own temporary state dir and stops its broker even when an
assertion fails.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from streams import local_kafka

pytestmark = pytest.mark.integration


async def _round_trip(bootstrap: str, topic: str, value: bytes) -> bytes:
    """Create ``topic``, produce ``value`` to it and read it back."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    finally:
        await admin.close()

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, value, key=b"key")
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id="test-local-kafka",
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        message = await asyncio.wait_for(consumer.getone(), timeout=30)
    finally:
        await consumer.stop()
    received: bytes = message.value
    return received


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _write_fake_record(state_dir: Path, pid: int) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    record = {"pid": pid, "port": 1, "controller_port": 2, "bootstrap": "127.0.0.1:1"}
    (state_dir / "broker.json").write_text(json.dumps(record), encoding="utf-8")


@pytest.mark.timeout(300)
def test_start_status_round_trip_stop(tmp_path: Path) -> None:
    state_dir = tmp_path / "kafka"
    try:
        info, started = local_kafka.start(state_dir)
        assert started
        assert info.bootstrap == f"127.0.0.1:{info.port}"
        assert info.port != info.controller_port
        assert info.state_dir == state_dir.resolve()
        assert info.log_file.is_file()
        assert (state_dir / "broker.json").is_file()

        assert local_kafka.status(state_dir) == info

        again, started_again = local_kafka.start(state_dir)
        assert (again.pid, started_again) == (info.pid, False)

        value = b"hello from uac"
        assert asyncio.run(_round_trip(info.bootstrap, "uac-test", value)) == value
    finally:
        stopped = local_kafka.stop(state_dir)

    assert stopped
    assert not _pid_alive(info.pid)
    assert not (state_dir / "broker.json").exists()
    assert local_kafka.status(state_dir) is None
    assert local_kafka.stop(state_dir) is False


def _fail_inside_running_broker(state_dir: Path, seen: list[local_kafka.BrokerInfo]) -> None:
    with local_kafka.running_broker(state_dir) as info:
        seen.append(info)
        assert local_kafka.status(state_dir) == info
        raise RuntimeError("boom")


@pytest.mark.timeout(300)
def test_running_broker_stops_on_exception(tmp_path: Path) -> None:
    state_dir = tmp_path / "kafka"
    seen: list[local_kafka.BrokerInfo] = []
    with pytest.raises(RuntimeError, match="boom"):
        _fail_inside_running_broker(state_dir, seen)
    assert len(seen) == 1
    assert not _pid_alive(seen[0].pid)
    assert local_kafka.status(state_dir) is None


def test_stop_does_not_signal_our_own_pid(tmp_path: Path) -> None:
    """A record naming a PID that is not this state dir's broker is stale.

    ``stop`` then signals nothing, removes the record and reports that
    nothing was running (returns False) rather than raising.
    """
    state_dir = tmp_path / "kafka"
    _write_fake_record(state_dir, os.getpid())

    assert local_kafka.status(state_dir) is None
    assert local_kafka.stop(state_dir, timeout=1.0) is False
    assert not (state_dir / "broker.json").exists()


def test_stop_does_not_signal_a_lookalike_process(tmp_path: Path) -> None:
    """A non-java process whose arguments mention kafka.Kafka and our properties."""
    state_dir = (tmp_path / "kafka").resolve()
    properties = str(state_dir / "server.properties")
    decoy = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; time.sleep(120)",
            "kafka.Kafka",
            properties,
        ]
    )
    try:
        _write_fake_record(state_dir, decoy.pid)
        assert local_kafka.stop(state_dir, timeout=1.0) is False
        assert decoy.poll() is None
    finally:
        decoy.kill()
        decoy.wait()
