"""The evaluation harness used by scripts/knowledge_eval.py."""

from __future__ import annotations

from rules.knowledge.bundled import BundledKnowledge
from rules.knowledge.evaluation import read_pairs, score, summary_lines
from rules.knowledge.model import MatchLevel

TABLE = """# comment lines are skipped
allergen,allergen_codes,drug,drug_codes,expected,topic
penicillin,,amoxicillin,,same_class,penicillins
penicillin,,ceftriaxone,,partial,penicillins
sulfa,,furosemide,,none,sulfonamides
,rxnorm|1191,ibuprofen,,low_risk,nsaids
"""


def test_pairs_are_read_with_codes() -> None:
    pairs = read_pairs(TABLE)

    assert len(pairs) == 4
    assert pairs[3].allergen_codes[0].code == "1191"
    assert pairs[3].description.startswith("given rxnorm:1191 allergy")


def test_score_counts_recall_false_alerts_and_confusion(knowledge: BundledKnowledge) -> None:
    result = score(knowledge, read_pairs(TABLE))

    assert (result.pairs, result.must_alert, result.alerted) == (4, 2, 1)
    assert (result.must_not_alert, result.false_alerts) == (2, 1)
    assert result.recall == 0.5
    assert result.confusion[(MatchLevel.PARTIAL, MatchLevel.LOW_RISK)] == 1


def test_summary_lines_report_every_figure(knowledge: BundledKnowledge) -> None:
    lines = summary_lines(score(knowledge, read_pairs(TABLE)))

    assert lines[0] == "pairs: 4"
    assert any(line.startswith("recall on must-alert pairs: 1/2") for line in lines)
    assert any(line.startswith("false alerts on must-not-alert pairs: 1/2") for line in lines)
