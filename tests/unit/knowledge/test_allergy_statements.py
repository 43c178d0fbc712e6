"""The "no known allergy" statements the gate and the FHIR mapping read in words are statements
to the drug knowledge layer too, and the other way round: no reader says "NKDA" is a substance
while another says it is not."""

from __future__ import annotations

import pytest

from rules.knowledge.model import DrugKnowledge, MatchLevel
from schemas.allergy_statements import NO_KNOWN_ALLERGY_TEXTS, statement_categories
from schemas.events import AllergyCategory

EVERY = tuple(AllergyCategory)
MEDICATION = (AllergyCategory.MEDICATION,)


@pytest.mark.parametrize("text", sorted(NO_KNOWN_ALLERGY_TEXTS))
def test_every_statement_in_words_is_a_statement_to_the_knowledge_layer(
    knowledge: DrugKnowledge, text: str
) -> None:
    verdict = knowledge.cross_reactivity(text, "amoxicillin")
    assert verdict.level is MatchLevel.NONE
    assert "no known allergy" in verdict.reason


@pytest.mark.parametrize(
    ("text", "categories"),
    [
        pytest.param("NKDA - no known drug allergies", MEDICATION, id="given a code and its words"),
        pytest.param("No Known Drug Allergies (NKDA)", MEDICATION, id="given words and the code"),
        pytest.param("N.K.D.A.", MEDICATION, id="given the code with dots"),
        pytest.param("n. k. a.", EVERY, id="given the code with dots and spaces"),
        pytest.param("Allergies: none", EVERY, id="given a heading and 'none'"),
        pytest.param("Drug allergies: nil", MEDICATION, id="given a heading that narrows"),
        pytest.param("Allergies: NKDA", MEDICATION, id="given a heading and a narrower code"),
        pytest.param(
            "NKDA/NKFA",
            (AllergyCategory.FOOD, AllergyCategory.MEDICATION),
            id="given two statements",
        ),
        pytest.param("Allergies - none known.", EVERY, id="given a heading and a dash"),
        pytest.param("过敏史\uff1a无过敏史", EVERY, id="given a Chinese heading"),
        pytest.param(
            "Patient has no known allergies", EVERY, id="given who says it before the statement"
        ),
        pytest.param("none reported", EVERY, id="given how it is known after the statement"),
        pytest.param(
            "No known drug allergies - confirmed", MEDICATION, id="given a part saying how known"
        ),
        pytest.param("No allergies known", EVERY, id="given 'known' last"),
        pytest.param("no drug allergies known", MEDICATION, id="given 'known' last, narrowed"),
        pytest.param("NKA to drugs", MEDICATION, id="given NKA narrowed to drugs"),
        pytest.param(
            "No known allergy to medications", MEDICATION, id="given words narrowed to medicines"
        ),
        pytest.param("No allergy", EVERY, id="given 'no allergy'"),
        pytest.param(
            "no known drug or food allergies",
            (AllergyCategory.FOOD, AllergyCategory.MEDICATION),
            id="given drug or food",
        ),
    ],
)
def test_a_statement_written_in_parts_is_read_as_one_by_the_gate_and_the_knowledge_layer(
    knowledge: DrugKnowledge, text: str, categories: tuple[AllergyCategory, ...]
) -> None:
    assert statement_categories(text) == categories
    verdict = knowledge.cross_reactivity(text, "ibuprofen")
    assert verdict.level is MatchLevel.NONE
    assert verdict.reason == f"'{text}' records that there is no known allergy"


@pytest.mark.parametrize(
    "text",
    [
        "Penicillin",
        "nkda penicillin",
        "no known penicillin",
        "",
        "Allergies:",
        "No known allergies except penicillin",
        "NKDA (penicillin - rash)",
        "Patient has penicillin allergy",
        "penicillin reported",
        "reported",
    ],
)
def test_a_substance_is_not_a_statement(knowledge: DrugKnowledge, text: str) -> None:
    assert statement_categories(text) is None
    assert (
        "records that there is no known allergy"
        not in knowledge.cross_reactivity(text, "amoxicillin").reason
    )
