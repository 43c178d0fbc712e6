"""An allergy whose every recorded reaction is a known side effect of its substance ("codeine -
nausea", "lisinopril - cough") is an intolerance: one step lower, never dropped."""

from __future__ import annotations

import pytest

from rules.knowledge.bundled import BundledKnowledge
from rules.knowledge.report import check_drug


@pytest.mark.parametrize(
    ("allergy", "drug", "level", "severity", "side_effect"),
    [
        pytest.param(
            "codeine - nausea", "codeine", "same_ingredient", "warning", "nausea", id="nausea"
        ),
        pytest.param(
            "vancomycin - red man syndrome",
            "vancomycin 1 g IV",
            "same_ingredient",
            "warning",
            "red man syndrome",
            id="red man syndrome",
        ),
        pytest.param(
            "vancomycin infusion reaction",
            "vancomycin",
            "same_ingredient",
            "warning",
            "infusion reaction",
            id="a vancomycin infusion reaction",
        ),
        pytest.param(
            "morphine - itching", "morphine", "same_ingredient", "warning", "itching", id="itching"
        ),
        pytest.param(
            "lisinopril - cough", "enalapril", "same_class", "warning", "cough", id="ACE cough"
        ),
        pytest.param(
            "statin - myalgia", "atorvastatin", "same_class", "warning", "myalgia", id="myalgia"
        ),
        pytest.param(
            "amoxicillin - diarrhea",
            "cefadroxil",
            "partial",
            "info",
            "diarrhea",
            id="a partial cross-reactivity one step lower",
        ),
        pytest.param(
            "codeine - N/V", "oxycodone", "same_class", "warning", "n v", id="N/V abbreviated"
        ),
        pytest.param(
            "codeine (drowsy)", "oxycodone", "same_class", "warning", "drowsy", id="drowsy"
        ),
        pytest.param(
            "codeine - nausea", "fentanyl", "low_risk", "info", "nausea", id="low risk stays info"
        ),
        pytest.param(
            "codeine - nausea", "azithromycin", "none", "none", "nausea", id="unrelated stays none"
        ),
        pytest.param(
            "vancomycin - RMS",
            "vancomycin",
            "same_ingredient",
            "warning",
            "rms",
            id="red man syndrome abbreviated",
        ),
        pytest.param(
            "amlodipine - ankle swelling",
            "nifedipine",
            "same_class",
            "warning",
            "ankle swelling",
            id="calcium channel blocker oedema",
        ),
        pytest.param(
            "amlodipine - edema",
            "amlodipine",
            "same_ingredient",
            "warning",
            "edema",
            id="oedema on amlodipine",
        ),
        pytest.param(
            "codeine makes me sick",
            "morphine",
            "same_class",
            "warning",
            "sick",
            id="said in the patient's words",
        ),
        pytest.param(
            "morphine makes me itch", "morphine", "same_ingredient", "warning", "itch", id="itch"
        ),
        pytest.param(
            "codeine makes me throw up",
            "codeine",
            "same_ingredient",
            "warning",
            "throw up",
            id="throw up",
        ),
        pytest.param(
            "erythromycin - stomach cramps",
            "erythromycin",
            "same_ingredient",
            "warning",
            "stomach cramps",
            id="stomach cramps",
        ),
        pytest.param(
            "Tetracycline - photosensitivity",
            "doxycycline",
            "same_class",
            "warning",
            "photosensitivity",
            id="photosensitivity on a tetracycline",
        ),
        pytest.param(
            "Reglan causes EPS", "metoclopramide", "same_ingredient", "warning", "eps", id="EPS"
        ),
        pytest.param(
            "valproate - hair loss",
            "valproate",
            "same_ingredient",
            "warning",
            "hair loss",
            id="hair loss",
        ),
        pytest.param(
            "Eliquis - bleeding",
            "apixaban",
            "same_ingredient",
            "warning",
            "bleeding",
            id="bleeding on an anticoagulant",
        ),
        pytest.param(
            "ciprofloxacin - sunburn",
            "levofloxacin",
            "same_class",
            "warning",
            "sunburn",
            id="sunburn on a fluoroquinolone",
        ),
    ],
)
def test_an_allergy_that_records_only_side_effects_is_an_intolerance_one_step_lower(
    knowledge: BundledKnowledge,
    allergy: str,
    drug: str,
    level: str,
    severity: str,
    side_effect: str,
) -> None:
    report = check_drug(knowledge, allergy, drug)

    assert (report["level"], report["severity"], report["side_effect"]) == (
        level,
        severity,
        side_effect,
    )
    if level != "none":
        assert f"the recorded reaction ('{side_effect}') is a known side effect" in str(
            report["reason"]
        )


@pytest.mark.parametrize(
    ("allergy", "drug"),
    [
        pytest.param("codeine - nausea, hives", "codeine", id="an allergic reaction among them"),
        pytest.param("penicillin - itching", "amoxicillin", id="itching of a penicillin"),
        pytest.param("amoxicillin - cough", "amoxicillin", id="cough of a non-ACE inhibitor"),
        pytest.param(
            "amoxicillin - photosensitivity", "amoxicillin", id="photosensitivity of a penicillin"
        ),
        pytest.param("amoxicillin - bleeding", "amoxicillin", id="bleeding of a non-anticoagulant"),
        pytest.param("lisinopril - edema", "lisinopril", id="oedema of a non-calcium blocker"),
        pytest.param("amlodipine - facial edema", "amlodipine", id="facial oedema: angioedema"),
        pytest.param("amlodipine - swelling", "amlodipine", id="a swelling it does not place"),
        pytest.param("codeine - SJS, nausea", "codeine", id="a severe cutaneous reaction"),
        pytest.param("cefazolin - nausea, anaphylaxis", "cefazolin", id="anaphylaxis in the text"),
        pytest.param("penicillin", "amoxicillin", id="no reaction recorded"),
    ],
)
def test_an_allergy_with_any_other_reaction_stays_an_allergy(
    knowledge: BundledKnowledge, allergy: str, drug: str
) -> None:
    report = check_drug(knowledge, allergy, drug)

    assert (report["severity"], report["side_effect"]) == ("critical", None)


def test_side_effects_among_the_recorded_reactions_count_as_in_the_text(
    knowledge: BundledKnowledge,
) -> None:
    report = check_drug(knowledge, "lisinopril", "lisinopril", reactions=("Dry cough",))

    assert (report["severity"], report["side_effect"]) == ("warning", "dry cough")


def test_a_side_effect_recorded_beside_anaphylaxis_does_not_make_it_an_intolerance(
    knowledge: BundledKnowledge,
) -> None:
    report = check_drug(knowledge, "cefazolin", "cefazolin", reactions=("Nausea", "39579001"))

    assert (report["severity"], report["side_effect"]) == ("critical", None)


@pytest.mark.parametrize(
    ("allergy", "drug", "severity"),
    [
        pytest.param("statin intolerance", "rosuvastatin", "warning", id="a class"),
        pytest.param("codeine intolerant", "morphine", "warning", id="intolerant"),
        pytest.param("penicillin intolerance, hives", "amoxicillin", "critical", id="and hives"),
    ],
)
def test_an_allergy_text_that_says_intolerance_is_one_unless_a_reaction_says_otherwise(
    knowledge: BundledKnowledge, allergy: str, drug: str, severity: str
) -> None:
    report = check_drug(knowledge, allergy, drug)

    assert report["severity"] == severity
    if severity == "warning":
        assert str(report["reason"]).startswith(
            f"the record says '{report['side_effect']}', not an allergic reaction: an intolerance"
        )
