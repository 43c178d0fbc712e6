"""`check_drug` output shape and the base severity of each match level."""

from __future__ import annotations

import json

import pytest

from rules.knowledge.bundled import BundledKnowledge
from rules.knowledge.model import MatchLevel
from rules.knowledge.report import base_severity, check_drug

KEYS = {
    "allergen",
    "drug",
    "ingredients",
    "matched",
    "level",
    "severity",
    "reason",
    "source",
    "test_first_after_severe_reaction",
    "severe_cutaneous_reaction",
    "side_effect",
    "knowledge_version",
}


@pytest.mark.parametrize(
    ("level", "severity"),
    [
        pytest.param(
            MatchLevel.SAME_INGREDIENT, "critical", id="given same ingredient then critical"
        ),
        pytest.param(MatchLevel.SAME_CLASS, "critical", id="given same class then critical"),
        pytest.param(MatchLevel.PARTIAL, "warning", id="given partial then warning"),
        pytest.param(MatchLevel.UNVERIFIED, "warning", id="given unverified then warning"),
        pytest.param(MatchLevel.LOW_RISK, "info", id="given low risk then info"),
        pytest.param(MatchLevel.NONE, "none", id="given none then none"),
    ],
)
def test_base_severity(level: MatchLevel, severity: str) -> None:
    assert base_severity(level) == severity


def test_check_drug_returns_the_json_ready_shape(knowledge: BundledKnowledge) -> None:
    report = check_drug(knowledge, "Penicillin G", "Zosyn 4.5 g")

    assert set(report) == KEYS
    assert report == {
        "allergen": "Penicillin G",
        "drug": "Zosyn 4.5 g",
        "ingredients": ["piperacillin", "tazobactam"],
        "matched": ["piperacillin"],
        "level": "same_class",
        "severity": "critical",
        "reason": report["reason"],
        "source": "class membership: penicillins",
        "test_first_after_severe_reaction": False,
        "severe_cutaneous_reaction": None,
        "side_effect": None,
        "knowledge_version": knowledge.version,
    }
    assert json.loads(json.dumps(report, ensure_ascii=False)) == report


@pytest.mark.parametrize(
    ("allergy", "drug", "level", "severity"),
    [
        pytest.param(
            "aspirin", "ibuprofen", "same_class", "critical", id="given aspirin when ibuprofen"
        ),
        pytest.param("amoxicillin", "cephalexin", "partial", "warning", id="given amoxicillin"),
        pytest.param("penicillin", "ceftriaxone", "low_risk", "info", id="given penicillin"),
        pytest.param("sulfa", "furosemide", "none", "none", id="given sulfa when furosemide"),
        pytest.param("xyzzy", "amoxicillin", "unverified", "warning", id="given gibberish"),
    ],
)
def test_check_drug_levels_and_severities(
    knowledge: BundledKnowledge, allergy: str, drug: str, level: str, severity: str
) -> None:
    report = check_drug(knowledge, allergy, drug)

    assert (report["level"], report["severity"]) == (level, severity)
    assert isinstance(report["reason"], str)
    assert report["reason"]


def test_check_drug_says_when_a_severe_reaction_calls_for_a_test_first(
    knowledge: BundledKnowledge,
) -> None:
    report = check_drug(knowledge, "cephalexin", "ceftriaxone")

    assert (report["level"], report["severity"]) == ("low_risk", "info")
    assert report["test_first_after_severe_reaction"] is True
