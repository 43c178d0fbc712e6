"""Whether the words and the codes of one concept name the same substance, as the knowledge
layer reads them: a name and a code that resolve to different substances differ; anything it
cannot resolve never does."""

from __future__ import annotations

import pytest

from rules.knowledge.bundled import BundledKnowledge
from rules.knowledge.coded_names import CodedNames
from rules.knowledge.model import Coding

RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"
SNOMED = "http://snomed.info/sct"
AMOXICILLIN = Coding(RXNORM, "723")
PENICILLIN_ALLERGY = Coding(SNOMED, "91936005")


@pytest.mark.parametrize(
    ("names", "coding", "named", "coded"),
    [
        pytest.param(
            ["Ibuprofen"], AMOXICILLIN, "ibuprofen", "amoxicillin",
            id="given amoxicillin's code written Ibuprofen then they differ",
        ),
        pytest.param(
            ["Penicillin G"], AMOXICILLIN, "penicillin g", "amoxicillin",
            id="given two penicillins then they differ: one class, two drugs",
        ),
        pytest.param(
            ["Sulfa drugs"], PENICILLIN_ALLERGY,
            "sulfonamide antibiotics (arylamine sulfonamides)", "penicillins",
            id="given a sulfa class coded as a penicillin allergy then they differ",
        ),
        pytest.param(
            ["Amoxicillin 500 mg capsule", "Ibuprofen"], AMOXICILLIN, "ibuprofen", "amoxicillin",
            id="given a text that agrees and a display that does not then the display differs",
        ),
    ],
)  # fmt: skip
def test_names_and_codes_of_different_substances_differ(
    knowledge: BundledKnowledge, names: list[str], coding: Coding, named: str, coded: str
) -> None:
    found = CodedNames(knowledge).differ(names, [coding])
    assert found is not None
    assert (found.named, found.coding, found.coded) == (named, coding, coded)


@pytest.mark.parametrize(
    ("names", "coding"),
    [
        pytest.param(["Amoxicillin 500 mg capsule"], AMOXICILLIN, id="given the same drug"),
        pytest.param(["Augmentin"], Coding(RXNORM, "48203"), id="given a combination and one of its ingredients"),
        pytest.param(["Opioids"], Coding(RXNORM, "7052"), id="given a class and a member of it"),
        pytest.param(["beta-lactams"], AMOXICILLIN, id="given a class above the drug's own"),
        pytest.param(["Allergy to penicillin"], PENICILLIN_ALLERGY, id="given a class and its allergy code"),
        pytest.param(["NKDA"], Coding(SNOMED, "409137002"), id="given a no known allergy statement"),
        pytest.param(["Xyzzy"], AMOXICILLIN, id="given words the knowledge cannot read"),
        pytest.param(["Ibuprofen"], Coding(RXNORM, "99999999"), id="given a code it does not list"),
        pytest.param(["Drug allergy"], Coding(SNOMED, "416098002"), id="given a general allergy code"),
    ],
)  # fmt: skip
def test_names_and_codes_that_agree_or_cannot_be_read_never_differ(
    knowledge: BundledKnowledge, names: list[str], coding: Coding
) -> None:
    assert CodedNames(knowledge).differ(names, [coding]) is None
