"""Paths and readers for the knowledge fixtures in tests/fixtures/knowledge/."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from rules.knowledge.evaluation import Pair, read_pairs
from rules.knowledge.model import Coding

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "knowledge"
PAIRS_CSV = FIXTURES / "pairs.csv"
CODINGS_CSV = FIXTURES / "dataset_codings.csv"
COMMON_PRESCRIPTIONS = FIXTURES / "common_prescriptions.txt"
COMMON_ALLERGIES = FIXTURES / "common_allergies.txt"
SYNTHEA_MODULE_CODINGS_CSV = FIXTURES / "synthea_module_codings.csv"


def pairs() -> tuple[Pair, ...]:
    return read_pairs(PAIRS_CSV.read_text(encoding="utf-8"))


def common_prescriptions() -> list[str]:
    return _listed(COMMON_PRESCRIPTIONS)


def common_allergies() -> list[str]:
    return _listed(COMMON_ALLERGIES)


def _listed(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def dataset_codings() -> list[dict[str, str]]:
    return _commented_csv(CODINGS_CSV)


def synthea_module_codings() -> list[dict[str, str]]:
    """Codings of Synthea's module files: role, system (rxnorm or snomed), code and display."""
    return _commented_csv(SYNTHEA_MODULE_CODINGS_CSV)


def _commented_csv(path: Path) -> list[dict[str, str]]:
    text = path.read_text(encoding="utf-8")
    lines = (line for line in io.StringIO(text) if not line.startswith("#"))
    return list(csv.DictReader(lines))


def codes_of(row: dict[str, str]) -> tuple[Coding, ...]:
    return (Coding(row["system"], row["code"]),) if row["code"] else ()
