"""Every drug and allergen in the CC0 Synthea and FHIR example extracts resolves."""

from __future__ import annotations

import pytest

from rules.knowledge.bundled import BundledKnowledge
from rules.knowledge.model import MatchLevel
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
        pytest.param("102263004", id="given eggs when any dataset drug is given then none"),
        pytest.param("227037002", id="given fish when any dataset drug is given then none"),
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


def test_extract_covers_both_datasets() -> None:
    assert {r["dataset"] for r in ROWS} == {"synthea-10-patients", "fhir-r4-examples"}
    assert len({(r["system"], r["code"], r["text"]) for r in ALL_DRUGS}) >= 100
