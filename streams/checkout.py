"""The source checkout the running code was installed from, and the files read from it.

UaC runs from its checkout, installed editable (`make setup` does `pip install -e .`, and so does
the Docker image): the ClickHouse DDL (`deploy/clickhouse/`), the local Kafka pom
(`deploy/local/kafka/`), the default tenants file (`deploy/config/`) and the demo's sample events
(`examples/`) are read from there, not from the installed packages. A copy of the packages
installed elsewhere (a plain `pip install .`) finds none of them: each use then stops with a
`CheckoutFileMissing` that says so, not with a traceback or an empty schema.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

CHECKOUT: Final = Path(__file__).resolve().parents[1]


class CheckoutFileMissing(FileNotFoundError):
    """A file of the checkout is not where the installed code looks for it."""


def in_checkout(relative: str) -> Path:
    return CHECKOUT / relative


def existing(path: Path, what: str) -> Path:
    """`path` if it exists, else CheckoutFileMissing naming `what` it is and why it is missing."""
    if not path.exists():
        raise missing(path, what)
    return path


def missing(path: Path, what: str) -> CheckoutFileMissing:
    return CheckoutFileMissing(
        f"{what} is not at {path}: UaC runs from its source checkout, installed with "
        "`pip install -e .` (as `make setup` and the Docker image do); a copy of the "
        "packages installed elsewhere lacks deploy/ and examples/"
    )
