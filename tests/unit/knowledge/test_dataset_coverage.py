"""Every drug and allergen in the CC0 Synthea and FHIR example extracts resolves."""

from __future__ import annotations

import pytest

from rules.knowledge.bundled import BundledKnowledge
from rules.knowledge.model import Coding, MatchLevel
from tests.unit.knowledge.fixtures import codes_of, dataset_codings

ROWS = dataset_codings()
SYNTHEA_DRUGS = [r for r in ROWS if r["dataset"] == "synthea-10-patients" and r["role"] == "drug"]
ALL_DRUGS = [r for r in ROWS if r["role"] == "drug"]
ALLERGENS = [r for r in ROWS if r["role"] == "allergen"]


def _id(row: dict[str, str]) -> str:
    return f"given {row['dataset']} {row['role']} {row['code'] or '-'} {row['text'][:40]}"


@pytest.mark.parametrize(
    "row", [pytest.param(r, id=_id(r) + " when resolved then known") for r in ROWS]
)
def test_every_dataset_coding_resolves(knowledge: BundledKnowledge, row: dict[str, str]) -> None:
    resolution = knowledge.resolve(row["text"], codes_of(row))

    assert resolution.resolved
    assert resolution.ingredients or resolution.classes


@pytest.mark.parametrize(
    "row",
    [pytest.param(r, id=_id(r) + " when its text alone is resolved") for r in SYNTHEA_DRUGS],
)
def test_synthea_drug_text_resolves_without_codes(
    knowledge: BundledKnowledge, row: dict[str, str]
) -> None:
    assert knowledge.resolve(row["text"]).resolved


@pytest.mark.parametrize(
    "allergen", [pytest.param(r, id=_id(r) + " when checked then verified") for r in ALLERGENS]
)
def test_no_dataset_pair_is_unverified(
    knowledge: BundledKnowledge, allergen: dict[str, str]
) -> None:
    levels = {
        knowledge.cross_reactivity(
            allergen["text"], drug["text"], codes_of(allergen), codes_of(drug)
        ).level
        for drug in ALL_DRUGS
    }

    assert MatchLevel.UNVERIFIED not in levels


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("111088007", id="given latex when any dataset drug is given then none"),
        pytest.param("442571000124108", id="given tree nuts when any dataset drug then none"),
        pytest.param("264287008", id="given animal dander when any dataset drug then none"),
        pytest.param("84489001", id="given mold when any dataset drug is given then none"),
        pytest.param("260147004", id="given house dust mite when any dataset drug then none"),
        pytest.param("288328004", id="given bee venom when any dataset drug is given then none"),
        pytest.param("782576004", id="given tree pollen when any dataset drug is given then none"),
    ],
)
def test_non_drug_allergens_never_alert_on_dataset_drugs(
    knowledge: BundledKnowledge, code: str
) -> None:
    allergen = next(r for r in ALLERGENS if r["code"] == code)

    levels = {
        knowledge.cross_reactivity(
            allergen["text"], drug["text"], codes_of(allergen), codes_of(drug)
        ).level
        for drug in ALL_DRUGS
    }

    assert levels == {MatchLevel.NONE}


def _flagged(
    knowledge: BundledKnowledge, allergen_code: str
) -> list[tuple[dict[str, str], MatchLevel]]:
    """The dataset drugs judged other than `none` against the dataset allergen of that code."""
    allergen = next(r for r in ALLERGENS if r["code"] == allergen_code)
    judged = (
        (
            drug,
            knowledge.cross_reactivity(
                allergen["text"], drug["text"], codes_of(allergen), codes_of(drug)
            ).level,
        )
        for drug in ALL_DRUGS
    )
    return [(drug, level) for drug, level in judged if level is not MatchLevel.NONE]


def test_an_egg_allergy_flags_only_the_egg_emulsified_lipid_emulsion_among_dataset_drugs(
    knowledge: BundledKnowledge,
) -> None:
    """Intralipid is emulsified with egg phospholipids and labelled against egg allergy; no
    other drug of the datasets is a concern for it (propofol's egg lecithin is a myth row)."""
    flagged = _flagged(knowledge, "102263004")

    assert {drug["text"]: level for drug, level in flagged} == {
        "Intralipid 20% IV Fat Emulsion": MatchLevel.PARTIAL
    }


def test_a_fish_allergy_flags_only_the_protamine_insulin_among_dataset_drugs(
    knowledge: BundledKnowledge,
) -> None:
    """Protamine, from salmon sperm, is a listed risk for fish-allergic patients; NPH insulin
    is insulin crystallised with it, so the Humulin 70/30 mix holds it. No other drug of the
    datasets is a concern for a fish allergy."""
    flagged = _flagged(knowledge, "227037002")

    assert {drug["code"]: level for drug, level in flagged} == {"106892": MatchLevel.PARTIAL}


SNOMED = "http://snomed.info/sct"


@pytest.mark.parametrize(
    ("finding", "substance"),
    [
        pytest.param("91935009", "762952008", id="given Allergy to peanuts"),
        pytest.param("91934008", "442571000124108", id="given Allergy to nut"),
        pytest.param("417532002", "735971005", id="given Allergy to fish"),
        pytest.param("300913006", "735029006", id="given Shellfish allergy"),
        pytest.param("420174000", "412071004", id="given Allergy to wheat"),
        pytest.param("91930004", "102263004", id="given Allergy to eggs"),
        pytest.param("714035009", "256355007", id="given Allergy to soya"),
        pytest.param("425525006", "3718001", id="given Allergy to dairy product"),
        pytest.param("419263009", "782576004", id="given Allergy to tree pollen"),
        pytest.param("418689008", "256277009", id="given Allergy to grass pollen"),
        pytest.param("232347008", "264287008", id="given Dander (animal) allergy"),
        pytest.param("232350006", "260147004", id="given House dust mite allergy"),
        pytest.param("419474003", "84489001", id="given Allergy to mould"),
        pytest.param("424213003", "288328004", id="given Allergy to bee venom"),
        pytest.param("300916003", "111088007", id="given Latex allergy"),
    ],
)
def test_older_synthea_allergy_findings_read_as_the_substance_newer_synthea_codes(
    knowledge: BundledKnowledge, finding: str, substance: str
) -> None:
    by_finding = knowledge.resolve("", (Coding(SNOMED, finding),))
    by_substance = knowledge.resolve("", (Coding(SNOMED, substance),))

    assert by_finding.resolved
    assert (by_finding.ingredients, by_finding.classes) == (
        by_substance.ingredients,
        by_substance.classes,
    )


def test_the_unspecified_synthea_allergy_stays_unverified(knowledge: BundledKnowledge) -> None:
    unspecified = (Coding(SNOMED, "419199007"),)

    judgement = knowledge.cross_reactivity(
        "Allergy to substance (finding)", "amoxicillin", unspecified
    )

    assert judgement.level is MatchLevel.UNVERIFIED


def test_extract_covers_both_datasets() -> None:
    assert {r["dataset"] for r in ROWS} == {"synthea-10-patients", "fhir-r4-examples"}
    assert len({(r["system"], r["code"], r["text"]) for r in ALL_DRUGS}) >= 100
