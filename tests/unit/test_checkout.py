"""The files read from the source checkout (deploy/, examples/): found from the editable install,
and from a copy of the packages installed elsewhere a one-line refusal that says why (exit 3),
never a traceback or an empty ClickHouse schema."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from streams import demo, kafka_jars
from streams.checkout import CHECKOUT, CheckoutFileMissing
from streams.clickhouse import schema_files
from streams.settings import Settings

PACKAGES = ("schemas", "projections", "rules", "streams")


def test_given_the_checkout_then_every_file_read_from_it_is_there() -> None:
    assert Settings().tenants_file.is_file()
    assert [path.name for path in schema_files()][:2] == ["001_tables.sql", "002_governance.sql"]
    assert kafka_jars.POM_PATH.is_file()
    assert all(path.is_file() for path in demo.SAMPLE_FILES)


def test_given_no_ddl_where_the_sink_looks_then_it_is_told_why(tmp_path: Path) -> None:
    with pytest.raises(CheckoutFileMissing, match=r"the ClickHouse DDL .*`pip install -e \.`"):
        schema_files(tmp_path / "deploy" / "clickhouse")


@pytest.fixture(scope="module")
def installed_elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packages alone, as a plain `pip install .` leaves them in site-packages."""
    site = tmp_path_factory.mktemp("site-packages")
    for package in PACKAGES:
        shutil.copytree(
            CHECKOUT / package, site / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    return site


@pytest.mark.parametrize(
    ("args", "said"),
    [
        pytest.param(["demo"], "the demo's sample file is not at", id="demo"),
        pytest.param(
            ["replay", "--file", str(CHECKOUT / "examples" / "events.ndjson")],
            "does not exist (UAC_TENANTS_FILE names it)",
            id="replay with the default tenants file",
        ),
    ],
)
def test_given_a_copy_of_the_packages_elsewhere_then_one_line_and_exit_code_3(
    installed_elsewhere: Path, tmp_path: Path, args: list[str], said: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UAC_")} | {
        "PYTHONPATH": str(installed_elsewhere),
        "UAC_HOME": str(tmp_path / "home"),
    }
    result = subprocess.run(
        [sys.executable, "-m", "streams.cli", *args],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 3, result.stderr
    assert said in result.stderr
    assert str(installed_elsewhere) in result.stderr
    assert "Traceback" not in result.stderr
