"""`uac state` and `uac export` refuse a tenant the tenants file does not name as `uac query`
and `uac explain` do (exit 2), before they read anything: no Kafka is configured here, and a
read would have stopped at that."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from streams.cli_app import app
from streams.kafka_address import KafkaNotFound

REFUSED = "refused: unknown tenant 'nope': it is not in the tenants file"


def _uac(args: list[str], home: Path) -> Result:
    return CliRunner().invoke(app, args, env={"UAC_HOME": str(home)})


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["state", "--subject", "p-1001"], id="uac state"),
        pytest.param(["export", "--subject", "p-1001", "--out", "exported"], id="uac export"),
    ],
)
def test_given_a_tenant_the_tenants_file_does_not_name_then_refused_before_any_read(
    args: list[str], tmp_path: Path
) -> None:
    result = _uac([*args, "--tenant", "nope"], tmp_path)
    assert (result.exit_code, result.stderr.strip()) == (2, REFUSED)
    assert not (tmp_path / "exported").exists()


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["state", "--subject", "p-1001"], id="uac state"),
        pytest.param(["export", "--subject", "p-1001", "--out", "exported"], id="uac export"),
    ],
)
def test_given_a_tenant_of_the_tenants_file_then_the_read_goes_on(
    args: list[str], tmp_path: Path
) -> None:
    result = _uac([*args, "--tenant", "clinic-a"], tmp_path)
    assert isinstance(result.exception, KafkaNotFound)
