"""The sink's HTTP port, like the worker's: a port out of range is a usage error (exit 2), a port
in use one line before anything starts (exit 3), never a traceback."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from streams.cli_app import app
from streams.ports import PortUnavailable
from streams.query_clients import sink_record_path
from streams.settings import Settings
from streams.sink import Sink


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port: int = taken.getsockname()[1]
        yield port


def test_given_a_taken_port_then_the_sink_says_so_before_it_reads_anything(
    tmp_path: Path, taken_port: int
) -> None:
    """No Kafka is configured: the port is refused before the sink looks for one."""
    sink = Sink(Settings(home=tmp_path), http_port=taken_port)
    with pytest.raises(PortUnavailable) as refused:
        asyncio.run(sink.start())
    assert str(refused.value) == f"sink HTTP port 127.0.0.1:{taken_port}: Address already in use"
    assert not sink_record_path(tmp_path).exists()


def test_given_a_taken_port_then_uac_sink_prints_one_line_and_exits_3(
    tmp_path: Path, taken_port: int
) -> None:
    env = os.environ | {"UAC_HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "streams.cli", "sink", "--port", str(taken_port)],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 3, result.stderr
    expected = f"failed: sink HTTP port 127.0.0.1:{taken_port}: Address already in use"
    assert result.stderr.strip() == expected


@pytest.mark.parametrize(
    "port",
    [
        pytest.param("99999", id="given a port above 65535 then a usage error"),
        pytest.param("-5", id="given a negative port then a usage error"),
    ],
)
def test_given_a_sink_port_out_of_range_then_a_usage_error(port: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["sink", "--port", port], env={"UAC_HOME": str(tmp_path)})
    assert result.exit_code == 2
    assert "Invalid value for '--port'" in result.stderr
