"""Two cephalosporins are judged by their side chains (side_chains.csv, side_chain_levels.csv)."""

from __future__ import annotations

from itertools import permutations

import pytest

from rules.knowledge.bundled import BundledKnowledge
from rules.knowledge.errors import KnowledgeDataError
from rules.knowledge.model import MatchLevel
from rules.knowledge.side_chains import Shared, SideChains, SideChainTable, side_chain_table
from rules.knowledge.tables import load_tables
from tests.unit.knowledge.test_therapeutic_groups import load_edited


def _cephalosporins() -> list[str]:
    loaded = load_tables()
    return sorted(
        name
        for name, ingredient in loaded.ingredients.items()
        if any(
            cls == "cephalosporins" or loaded.classes[cls].parent == "cephalosporins"
            for cls in ingredient.classes
        )
    )


def test_every_cephalosporin_has_its_side_chains_listed() -> None:
    """A cephalosporin left out would fall back to the class-wide judgement unnoticed."""
    assert set(_cephalosporins()) == set(load_tables().side_chains.chains)


@pytest.mark.parametrize(
    ("allergen", "drug", "level", "named"),
    [
        ("ceftriaxone", "cefepime", MatchLevel.SAME_CLASS, "cefotaxime-like"),
        ("cephalexin", "cefaclor", MatchLevel.SAME_CLASS, "aminobenzyl"),
        ("cefixime", "ceftazidime", MatchLevel.SAME_CLASS, "ceftazidime-like"),
        ("cefixime", "ceftriaxone", MatchLevel.SAME_CLASS, "cefotaxime-like"),
        ("cefoxitin", "cefuroxime", MatchLevel.PARTIAL, "carbamoyloxymethyl"),
        ("cefamandole", "cefotetan", MatchLevel.PARTIAL, "methyltetrazolylthiomethyl"),
        ("cephalexin", "ceftriaxone", MatchLevel.LOW_RISK, "triazinedionylthiomethyl"),
        ("ceftriaxone", "ceftazidime", MatchLevel.LOW_RISK, "ceftazidime-like"),
        ("Keflex", "Rocephin", MatchLevel.LOW_RISK, "aminobenzyl"),
    ],
)
def test_two_cephalosporins_are_judged_by_what_their_side_chains_share(
    knowledge: BundledKnowledge, allergen: str, drug: str, level: MatchLevel, named: str
) -> None:
    verdict = knowledge.cross_reactivity(allergen, drug)

    assert verdict.level is level
    assert named in verdict.reason
    assert "side chain" in verdict.reason
    assert "practice parameter" in verdict.source or "Zagursky" in verdict.source


def test_dissimilar_side_chains_call_for_a_test_first_after_a_severe_reaction(
    knowledge: BundledKnowledge,
) -> None:
    assert knowledge.cross_reactivity("cephalexin", "ceftriaxone").test_first_after_severe_reaction
    assert not knowledge.cross_reactivity("cephalexin", "cefaclor").test_first_after_severe_reaction
    assert not knowledge.cross_reactivity(
        "penicillin", "meropenem"
    ).test_first_after_severe_reaction


def test_a_drug_the_record_says_is_tolerated_needs_no_test_first(
    knowledge: BundledKnowledge,
) -> None:
    verdict = knowledge.cross_reactivity(
        "cephalexin - anaphylaxis; tolerates cefuroxime", "cefuroxime"
    )

    assert verdict.level is MatchLevel.LOW_RISK
    assert not verdict.test_first_after_severe_reaction


def test_the_judgement_is_the_same_in_both_directions(knowledge: BundledKnowledge) -> None:
    for allergen, drug in permutations(_cephalosporins(), 2):
        forward = knowledge.cross_reactivity(allergen, drug).level
        assert forward is knowledge.cross_reactivity(drug, allergen).level, (allergen, drug)


@pytest.mark.parametrize("allergen", ["cephalosporins", "头孢类", "cephalosporin allergy"])
def test_an_allergy_to_the_class_still_flags_every_member(
    knowledge: BundledKnowledge, allergen: str
) -> None:
    for drug in _cephalosporins():
        assert knowledge.cross_reactivity(allergen, drug).level is MatchLevel.SAME_CLASS, drug


def test_a_combination_is_judged_by_its_strongest_ingredient(knowledge: BundledKnowledge) -> None:
    """Ceftazidime/avibactam after a ceftriaxone allergy: dissimilar side chains, low risk;
    after a cefixime allergy: an alike R1 side chain, same class."""
    assert knowledge.cross_reactivity("ceftriaxone", "Avycaz").level is MatchLevel.LOW_RISK
    assert knowledge.cross_reactivity("cefixime", "Avycaz").level is MatchLevel.SAME_CLASS


def test_penicillins_are_not_judged_by_side_chains(knowledge: BundledKnowledge) -> None:
    """The penicillins share their core determinant: one penicillin allergy flags the others."""
    verdict = knowledge.cross_reactivity("amoxicillin", "piperacillin")

    assert verdict.level is MatchLevel.SAME_CLASS
    assert "side chain" not in verdict.reason


def test_a_drug_resembling_two_groups_is_alike_to_both() -> None:
    table = SideChainTable(
        {
            "a": SideChains(frozenset({"x", "y"}), frozenset({"p"})),
            "b": SideChains(frozenset({"y"}), frozenset({"q"})),
            "c": SideChains(frozenset({"z"}), frozenset({"q"})),
        },
        load_tables().side_chains.levels,
    )

    assert _level(table, "a", "b") is MatchLevel.SAME_CLASS
    assert _level(table, "b", "c") is MatchLevel.PARTIAL
    assert _level(table, "a", "c") is MatchLevel.LOW_RISK
    assert table.compare("a", "unlisted") is None


def _level(table: SideChainTable, allergen: str, drug: str) -> MatchLevel:
    verdict = table.compare(allergen, drug)
    assert verdict is not None
    return verdict.level


@pytest.mark.parametrize(
    ("name", "old", "new", "refused"),
    [
        ("side_chains.csv", "\ncefazolin,", "\ncefazoline,", "side chains of cefazoline"),
        (
            "side_chains.csv",
            "\ncephalexin,aminobenzyl,",
            "\ncephalexin,,",
            "side chains of cephalexin",
        ),
        ("side_chain_levels.csv", "\nr2,partial,", "\nr2,same_ingredient,", "side-chain level r2"),
        (
            "side_chain_levels.csv",
            "\nnone,low_risk,",
            "\nneither,low_risk,",
            "side-chain level neither",
        ),
        (
            "side_chain_levels.csv",
            "\nnone,low_risk,yes,",
            "\nnone,low_risk,maybe,",
            "side-chain level none",
        ),
    ],
)
def test_a_malformed_side_chain_table_is_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, old: str, new: str, refused: str
) -> None:
    with pytest.raises(KnowledgeDataError, match=refused):
        load_edited(monkeypatch, name, old, new)


def test_a_level_row_missing_is_refused() -> None:
    chains = [{"ingredient": "cefazolin", "r1": "x", "r2": "y", "source": "cited"}]
    levels = [
        {"shared": s.value, "level": "low_risk", "test_first": "no", "reason": "r", "source": "c"}
        for s in (Shared.R1, Shared.NONE)
    ]
    with pytest.raises(KnowledgeDataError, match="r1, r2, none"):
        side_chain_table(chains, levels, frozenset({"cefazolin"}))
