"""Settings a process cannot run with are refused when they are read: one `invalid setting`
line naming the variable and what it may be, exit code 3, before anything connects."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from streams.app import create_app
from streams.cli_app import app
from streams.keys import FileKeyStore
from streams.ledger import ErasureLedger
from streams.settings import KAFKA_REQUEST_SECONDS, Settings


def _refused(env: dict[str, str], tmp_path: Path) -> str:
    result = CliRunner().invoke(app, ["lag"], env={"UAC_HOME": str(tmp_path), **env})
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize(
    ("env", "line"),
    [
        pytest.param(
            {"UAC_SESSION_TIMEOUT_SECONDS": "120"},
            "invalid setting UAC_SESSION_TIMEOUT_SECONDS: 120 is out of range: from 6 (the "
            "shortest session Kafka brokers accept by default) to 90 seconds",
            id="given a session longer than the worker's Kafka request timeout then refused",
        ),
        pytest.param(
            {"UAC_SESSION_TIMEOUT_SECONDS": "3"},
            "invalid setting UAC_SESSION_TIMEOUT_SECONDS: 3 is out of range: from 6",
            id="given a session shorter than brokers accept then refused",
        ),
        pytest.param(
            {"UAC_WORKER_METRICS_PORT": "99999"},
            "invalid setting UAC_WORKER_METRICS_PORT: 99999 is not a port (1 to 65535)",
            id="given a metrics port above 65535 then refused",
        ),
        pytest.param(
            {"UAC_WORKER_METRICS_PORT": "0"},
            "invalid setting UAC_WORKER_METRICS_PORT: 0 is not a port (1 to 65535)",
            id="given metrics port 0 (any free port, which nobody could find) then refused",
        ),
        pytest.param(
            {"UAC_KAFKA_BOOTSTRAP": "broker-1:9092,broker-2:99999"},
            "invalid setting UAC_KAFKA_BOOTSTRAP: broker-2:99999: 99999 is not a port (1 to 65535)",
            id="given a bootstrap address with a port above 65535 then it is named",
        ),
        pytest.param(
            {"UAC_KAFKA_BOOTSTRAP": "[::1]:kafka"},
            "invalid setting UAC_KAFKA_BOOTSTRAP: [::1]:kafka: kafka is not a port (1 to 65535)",
            id="given a bootstrap address whose port is no number then it is named",
        ),
        pytest.param(
            {"UAC_CLICKHOUSE_URL": "http://analyst:s3cret@clickhouse:99999/uac"},
            "invalid setting UAC_CLICKHOUSE_URL: 99999 is not a port (1 to 65535)",
            id="given a ClickHouse URL with a port above 65535 then refused without the URL",
        ),
        pytest.param(
            {"UAC_SCHEMA_REGISTRY_URL": "http://registry:0"},
            "invalid setting UAC_SCHEMA_REGISTRY_URL: 0 is not a port (1 to 65535)",
            id="given a registry URL with port 0 then refused",
        ),
    ],
)
def test_given_a_setting_out_of_range_then_one_line_names_it_and_its_range(
    env: dict[str, str], line: str, tmp_path: Path
) -> None:
    refused = _refused(env, tmp_path)
    assert refused.startswith(line), refused
    assert "s3cret" not in refused


@pytest.mark.parametrize(
    "bootstrap",
    [
        pytest.param("127.0.0.1:9092", id="host and port"),
        pytest.param("broker-1:9092, broker-2:9093", id="a list"),
        pytest.param("broker-1", id="a host alone takes Kafka's port"),
        pytest.param("[::1]:9092", id="IPv6 with a port"),
        pytest.param("::1", id="IPv6 without a port"),
    ],
)
def test_given_a_bootstrap_list_kafka_reads_then_it_is_accepted(bootstrap: str) -> None:
    assert Settings(kafka_bootstrap=bootstrap).kafka_bootstrap == bootstrap


def test_given_urls_with_and_without_ports_then_they_are_accepted() -> None:
    settings = Settings(
        clickhouse_url="https://user:password@clickhouse.example.net/uac",
        schema_registry_url="http://[::1]:8081",
        worker_metrics_port=65535,
    )
    assert settings.worker_metrics_port == 65535


def test_given_the_longest_session_allowed_then_the_worker_asks_faust_for_no_more_than_it_allows(
    tmp_path: Path,
) -> None:
    """Faust refuses a consumer whose session outlasts its request timeout; the worker passes
    the request timeout the settings check against."""
    settings = Settings(home=tmp_path, session_timeout_seconds=KAFKA_REQUEST_SECONDS)
    keys = FileKeyStore(tmp_path / "keys")
    conf = create_app(settings, "127.0.0.1:9092", keys, ErasureLedger(keys)).app.conf
    assert conf.broker_session_timeout <= conf.broker_request_timeout
    with pytest.raises(ValidationError, match="to 90 seconds"):
        Settings(session_timeout_seconds=KAFKA_REQUEST_SECONDS + 0.5)
