"""docker-compose.yml cannot run in CI (no Docker engine); what can be checked here is that it
only sets settings the code reads, so a misspelt variable does not silently keep a default."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from streams.cli_app import app
from streams.settings import Settings

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


def test_every_uac_variable_in_the_compose_file_is_a_setting() -> None:
    variables = set(re.findall(r"\b(UAC_[A-Z0-9_]+):", COMPOSE.read_text(encoding="utf-8")))
    known = {f"UAC_{name.upper()}" for name in Settings.model_fields}
    assert variables, "the compose file sets no UAC_ variables"
    assert variables - known == set()


def test_every_uac_command_in_the_compose_file_parses() -> None:
    """Each service's `command:` is a `uac` command with options the CLI accepts (checked by
    asking for its help with those options given)."""
    commands = [
        json.loads(found)
        for found in re.findall(r"^\s+command: (\[.*\])$", COMPOSE.read_text(), re.MULTILINE)
    ]
    uac_commands = [command for command in commands if command[0] in {"worker", "sink"}]
    assert len(uac_commands) == 2
    for command in uac_commands:
        result = CliRunner().invoke(app, [*command, "--help"])
        assert result.exit_code == 0, (command, result.output)
