"""The bundled data files: manifest integrity, version, provenance and consistency."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rules.knowledge import tables
from rules.knowledge.bundled import BundledKnowledge
from rules.knowledge.errors import KnowledgeDataError
from rules.knowledge.report import check_drug
from rules.knowledge.tables import (
    data_text,
    file_digest,
    load_tables,
    read_manifest,
)
from tests.unit.knowledge.test_therapeutic_groups import load_edited

DATA = Path(tables.__file__).resolve().parent / "data"


def test_version_names_the_release(knowledge: BundledKnowledge) -> None:
    assert re.fullmatch(r"uac-bundled-\d{4}\.\d{2}(\.\d+)?", knowledge.version)


def test_manifest_lists_every_data_table_with_its_digest() -> None:
    _, digests = read_manifest()
    on_disk = {path.name for path in DATA.glob("*.csv")}

    assert set(digests) == on_disk
    for name, digest in digests.items():
        assert file_digest(data_text(name)) == digest, f"{name}: run refresh_manifest"


def test_every_data_file_has_a_recorded_source_and_licence() -> None:
    sources = (DATA / "SOURCES.md").read_text(encoding="utf-8")

    for path in DATA.glob("*.csv"):
        assert f"`{path.name}`" in sources


def test_a_table_edited_without_a_new_manifest_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = tables.data_text

    def tampered(name: str) -> str:
        text = original(name)
        return text + "\n" if name == "cross_reactivity.csv" else text

    monkeypatch.setattr(tables, "data_text", tampered)

    with pytest.raises(KnowledgeDataError, match=r"cross_reactivity\.csv"):
        load_tables()


def test_every_cross_reactivity_row_cites_a_source() -> None:
    loaded = load_tables()

    assert loaded.rows
    for row in loaded.rows:
        assert row.source
        assert row.reason


def test_curated_terms_take_precedence_over_derived_ones() -> None:
    loaded = load_tables()

    assert loaded.lexicon[("augmentin",)] == ("amoxicillin", "clavulanate")
    assert loaded.lexicon[("sodium",)] == ()


def test_an_ingredient_listed_twice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second row would silently replace the first, with whatever classes it gives."""
    twice = "amoxicillin,drug,aminopenicillins,723\namoxicillin,drug,,\n"
    with pytest.raises(KnowledgeDataError, match="ingredient amoxicillin: listed twice"):
        load_edited(
            monkeypatch, "ingredients.csv", "amoxicillin,drug,aminopenicillins,723\n", twice
        )


@pytest.mark.parametrize(
    ("old", "new", "refused"),
    [
        ("\nvaccines,biologic,", "\nvaccinez,biologic,", "class vaccinez"),
        ("\nvaccines,biologic,", "\nvaccines,drug,", "class vaccines"),
    ],
)
def test_an_allergy_category_of_an_unknown_class_or_category_is_refused(
    monkeypatch: pytest.MonkeyPatch, old: str, new: str, refused: str
) -> None:
    with pytest.raises(KnowledgeDataError, match=f"allergy category of {refused}"):
        load_edited(monkeypatch, "allergy_categories.csv", old, new)


@pytest.mark.parametrize(
    ("substance", "categories"),
    [
        ("Augmentin", ("medication",)),
        ("青霉素", ("medication",)),
        ("tree nuts", ("food",)),
        ("wasp venom", ("environment",)),
        ("house dust mite", ("environment",)),
        ("MMR vaccine", ("biologic", "medication")),
        ("penicillin and peanuts", ("food", "medication")),
        ("NKDA", ()),
    ],
)
def test_resolution_gives_the_fhir_allergy_categories_of_a_substance(
    knowledge: BundledKnowledge, substance: str, categories: tuple[str, ...]
) -> None:
    assert knowledge.resolve(substance).allergy_categories == categories


@pytest.mark.parametrize(
    ("old", "new", "refused"),
    [
        pytest.param(
            "\ncough,class:ace_inhibitors,",
            "\ncoughz,class:ace_inhibitors,",
            "side effect coughz",
            id="given a reaction that is no reaction word",
        ),
        pytest.param(
            "\ncough,class:ace_inhibitors,",
            "\ncough,class:ace_inhibitorz,",
            "side effect cough",
            id="given an unknown concept",
        ),
    ],
)
def test_a_side_effect_of_an_unknown_reaction_or_concept_is_refused(
    monkeypatch: pytest.MonkeyPatch, old: str, new: str, refused: str
) -> None:
    with pytest.raises(KnowledgeDataError, match=refused):
        load_edited(monkeypatch, "side_effects.csv", old, new)


@pytest.mark.parametrize(
    ("old", "new", "refused"),
    [
        pytest.param(
            "\nprogesterone,capsule;",
            "\nprogesterone,capsulez;",
            "product form progesterone/peanut",
            id="given a form that is no dose-form noise word",
        ),
        pytest.param(
            ",peanut,",
            ",peanutz,",
            "product form progesterone/peanutz",
            id="given an unknown allergen",
        ),
        pytest.param(
            "\nprogesterone,capsule;",
            "\nprogesterone,capsule,soy,\nprogesterone,capsule;",
            "product form progesterone/soy",
            id="given a row without a source",
        ),
    ],
)
def test_a_product_form_of_an_unknown_form_or_concept_or_without_source_is_refused(
    monkeypatch: pytest.MonkeyPatch, old: str, new: str, refused: str
) -> None:
    with pytest.raises(KnowledgeDataError, match=refused):
        load_edited(monkeypatch, "product_forms.csv", old, new)


_ARB_TO_ACE_INHIBITOR = "class:angiotensin_receptor_blockers,class:ace_inhibitors,"


def _levels_between_lisinopril_and_losartan() -> tuple[str, str]:
    knowledge = BundledKnowledge(load_tables())
    return (
        str(check_drug(knowledge, "losartan", "lisinopril")["level"]),
        str(check_drug(knowledge, "lisinopril", "losartan")["level"]),
    )


def test_a_row_written_for_the_reverse_pair_judges_that_direction_only() -> None:
    assert _levels_between_lisinopril_and_losartan() == ("partial", "low_risk")


def test_without_a_row_for_the_reverse_pair_a_row_judges_both_directions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    row = next(
        line
        for line in data_text("cross_reactivity.csv").splitlines(keepends=True)
        if line.startswith(_ARB_TO_ACE_INHIBITOR)
    )
    load_edited(monkeypatch, "cross_reactivity.csv", row, "")
    assert _levels_between_lisinopril_and_losartan() == ("low_risk", "low_risk")
