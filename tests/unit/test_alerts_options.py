"""`uac alerts --json` and `--format` are alternatives: asked for two different outputs, the
command says so (a usage error, exit 2) instead of quietly printing one of them."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from streams.cli_app import app


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--json", "--format", "fhir"], id="given --json and --format fhir"),
        pytest.param(["--format", "table", "--json"], id="given --format table and --json"),
    ],
)
def test_given_json_and_another_format_then_a_usage_error(args: list[str], tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["alerts", "--tenant", "clinic-a", *args], env={"UAC_HOME": str(tmp_path)}
    )
    assert result.exit_code == 2
    assert f"Invalid value for --json: not with --format {args[args.index('--format') + 1]}" in (
        " ".join(result.stderr.split())
    )


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--json"], id="given --json alone"),
        pytest.param(["--json", "--format", "json"], id="given --json and --format json"),
        pytest.param(["--format", "fhir"], id="given --format alone"),
    ],
)
def test_given_one_output_then_the_command_goes_on_to_read_the_topic(
    args: list[str], tmp_path: Path
) -> None:
    """No broker is configured: the command gets as far as looking for one."""
    result = CliRunner().invoke(
        app, ["alerts", "--tenant", "clinic-a", *args], env={"UAC_HOME": str(tmp_path)}
    )
    assert result.exit_code != 2
    assert "Invalid value" not in result.output
