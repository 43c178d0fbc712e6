"""Judgements are pure: same inputs, same outputs, whatever the order or the instance."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rules.knowledge.bundled import BundledKnowledge, load_bundled_knowledge
from rules.knowledge.model import Coding, MatchLevel
from rules.knowledge.tables import load_tables
from tests.unit.knowledge.fixtures import pairs

RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"
NAMES = st.sampled_from(
    [
        "penicillin",
        "Zosyn 4.5 g",
        "sulfa",
        "ferrous sulfate",
        "aspirin",
        "ibuprofen",
        "shellfish",
        "iohexol",
        "青霉素",
        "头孢曲松",
        "morphine",
        "fentanyl",
        "latex",
    ]
)


def test_a_fresh_instance_judges_every_pair_identically(knowledge: BundledKnowledge) -> None:
    fresh = BundledKnowledge(load_tables())

    for pair in pairs():
        arguments = (pair.allergen, pair.drug, pair.allergen_codes, pair.drug_codes)
        assert fresh.cross_reactivity(*arguments) == knowledge.cross_reactivity(*arguments)


def test_the_loader_is_cached() -> None:
    assert load_bundled_knowledge() is load_bundled_knowledge()


@settings(max_examples=200)
@given(allergen=NAMES, drug=NAMES)
def test_repeated_calls_agree(allergen: str, drug: str) -> None:
    knowledge = load_bundled_knowledge()

    assert knowledge.cross_reactivity(allergen, drug) == knowledge.cross_reactivity(allergen, drug)


@settings(max_examples=100)
@given(codes=st.permutations([Coding(RXNORM, "10831"), Coding(RXNORM, "1191")]))
def test_coding_order_does_not_matter(codes: list[Coding]) -> None:
    knowledge = load_bundled_knowledge()

    verdict = knowledge.cross_reactivity("", "Bactrim", tuple(codes))

    assert verdict.level is MatchLevel.SAME_INGREDIENT
    assert verdict.matched == ("sulfamethoxazole", "trimethoprim")


@settings(max_examples=300)
@given(drug=st.text(max_size=40))
def test_any_text_is_judged_without_error_and_unknown_is_never_silent(drug: str) -> None:
    knowledge = load_bundled_knowledge()

    verdict = knowledge.cross_reactivity("penicillin", drug)

    if not knowledge.resolve(drug).resolved:
        assert verdict.level is not MatchLevel.NONE
    assert verdict.drug == drug
