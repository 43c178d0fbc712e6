"""Whatever a producer writes as an allergen, a drug or a reaction (misspellings, doses,
punctuation, other scripts, letters that fold into others), the knowledge layer gives a
verdict; and a drug it cannot read is never silently `none` against an allergy."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rules.knowledge.bundled import BundledKnowledge, load_bundled_knowledge
from rules.knowledge.model import CrossReactivity, MatchLevel

WORDS = st.sampled_from(
    [
        *("penicillin", "amoxicillin", "ibuprofen", "sulfa", "青霉素", "头孢", "zyxoral", "qwerty"),
        *("10", "mg", "tablet", "oral", "/", "-", "(", ")", "no", "not", "allergy", "rash", "and"),
        *("with", "x", "ß", "ﬁ", "½", "®"),
    ]
)
TEXTS = st.lists(WORDS | st.text(max_size=6), max_size=8).map(" ".join)
KNOWLEDGE: BundledKnowledge = load_bundled_knowledge()


@settings(max_examples=300)
@given(drug=TEXTS)
def test_given_a_drug_the_knowledge_cannot_read_then_a_penicillin_allergy_is_never_none(
    drug: str,
) -> None:
    verdict = KNOWLEDGE.cross_reactivity("penicillin", drug)
    if not KNOWLEDGE.resolve(drug, ()).resolved:
        assert verdict.level is not MatchLevel.NONE, verdict.reason


@settings(max_examples=300)
@given(allergen=TEXTS, drug=TEXTS, reaction=TEXTS)
def test_given_any_allergen_drug_and_reaction_text_then_a_verdict(
    allergen: str, drug: str, reaction: str
) -> None:
    verdict = KNOWLEDGE.cross_reactivity(allergen, drug, (), (), (reaction,))
    assert isinstance(verdict, CrossReactivity)
    assert verdict.level in MatchLevel
