"""The "no known allergy" statements the gate and the FHIR mapping read in words are statements
to the drug knowledge layer too: no table says "NKDA" is a substance while another says it is
not."""

from __future__ import annotations

import pytest

from rules.knowledge.model import DrugKnowledge, MatchLevel
from schemas.allergy_statements import NO_KNOWN_ALLERGY_TEXTS, statement_categories


@pytest.mark.parametrize("text", sorted(NO_KNOWN_ALLERGY_TEXTS))
def test_every_statement_in_words_is_a_statement_to_the_knowledge_layer(
    knowledge: DrugKnowledge, text: str
) -> None:
    verdict = knowledge.cross_reactivity(text, "amoxicillin")
    assert verdict.level is MatchLevel.NONE
    assert "no known allergy" in verdict.reason


@pytest.mark.parametrize("text", ["Penicillin", "nkda penicillin", "no known penicillin", ""])
def test_a_substance_is_not_a_statement(text: str) -> None:
    assert statement_categories(text) is None
