"""After a severe cutaneous adverse reaction (SJS, TEN, DRESS, AGEP) the allergy records, a
related drug is never "low risk": it needs an allergist's evaluation first."""

from __future__ import annotations

import pytest

from rules.knowledge.bundled import BundledKnowledge
from rules.knowledge.report import check_drug
from schemas.severe_reactions import life_threatening_reaction, severe_cutaneous_reaction


@pytest.mark.parametrize(
    ("text", "named"),
    [
        pytest.param("penicillin - SJS", "SJS", id="given SJS"),
        pytest.param(
            "penicillin - Stevens-Johnson syndrome",
            "Stevens-Johnson syndrome",
            id="given Stevens-Johnson syndrome",
        ),
        pytest.param("amoxicillin DRESS", "DRESS", id="given DRESS"),
        pytest.param("penicillin TEN", "TEN", id="given TEN in capitals"),
        pytest.param("penicillin - ten", "ten", id="given ten as an item of its own"),
        pytest.param("sulfa - SJS/TEN", "SJS", id="given SJS/TEN"),
        pytest.param(
            "carbamazepine: toxic epidermal necrolysis",
            "toxic epidermal necrolysis",
            id="given toxic epidermal necrolysis",
        ),
        pytest.param("penicillin AGEP", "AGEP", id="given AGEP"),
        pytest.param(
            "allopurinol - drug reaction with eosinophilia and systemic symptoms",
            "drug reaction with eosinophilia",
            id="given DRESS spelled out",
        ),
        pytest.param(
            "abacavir - drug-induced hypersensitivity syndrome",
            "drug-induced hypersensitivity syndrome",
            id="given DIHS spelled out",
        ),
        pytest.param(
            "piperacillin - acute generalised exanthematous pustulosis",
            "acute generalised exanthematous pustulosis",
            id="given AGEP spelled out",
        ),
        pytest.param("青霉素 - 史蒂文斯-约翰逊综合征", "史蒂文斯", id="given SJS in Chinese"),
    ],
)
def test_the_severe_cutaneous_reaction_a_text_names_is_read_as_written(
    text: str, named: str
) -> None:
    assert severe_cutaneous_reaction(text) == named


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("penicillin - hives", id="given hives"),
        pytest.param("penicillin - rash ten days after", id="given ten as a number"),
        pytest.param("penicillin - rash, not SJS", id="given a denied SJS"),
        pytest.param("penicillin - rash; no SJS", id="given no SJS"),
        pytest.param("penicillin - rash; SJS ruled out", id="given SJS ruled out"),
        pytest.param("latex - dressing", id="given a dressing"),
    ],
)
def test_a_text_that_names_no_severe_cutaneous_reaction_reads_as_none(text: str) -> None:
    assert severe_cutaneous_reaction(text) is None


@pytest.mark.parametrize(
    ("allergy", "drug", "level", "severity"),
    [
        pytest.param(
            "penicillin - SJS",
            "ceftriaxone",
            "low_risk",
            "warning",
            id="given penicillin SJS when a dissimilar cephalosporin then a warning",
        ),
        pytest.param(
            "penicillin - Stevens-Johnson syndrome",
            "meropenem",
            "low_risk",
            "warning",
            id="given penicillin SJS when a carbapenem then a warning",
        ),
        pytest.param(
            "amoxicillin DRESS",
            "cefazolin",
            "low_risk",
            "warning",
            id="given amoxicillin DRESS when cefazolin then a warning",
        ),
        pytest.param(
            "amoxicillin - TEN",
            "cefadroxil",
            "partial",
            "critical",
            id="given amoxicillin TEN when a cephalosporin of its side chain then critical",
        ),
        pytest.param(
            "sulfa - SJS",
            "darunavir",
            "low_risk",
            "warning",
            id="given sulfa SJS when darunavir then a warning",
        ),
        pytest.param(
            "penicillin - SJS",
            "amoxicillin",
            "same_class",
            "critical",
            id="given penicillin SJS when a penicillin then still critical",
        ),
        pytest.param(
            "amoxicillin AGEP",
            "amoxicillin",
            "same_ingredient",
            "critical",
            id="given amoxicillin AGEP when amoxicillin then still critical",
        ),
        pytest.param(
            "penicillin - SJS",
            "azithromycin",
            "none",
            "none",
            id="given penicillin SJS when an unrelated drug then none",
        ),
        pytest.param(
            "penicillin - SJS; tolerated cefazolin since",
            "cefazolin",
            "low_risk",
            "info",
            id="given penicillin SJS and a tolerated cephalosporin then that one stays info",
        ),
    ],
)
def test_after_a_severe_cutaneous_reaction_a_related_drug_needs_an_evaluation_first(
    knowledge: BundledKnowledge, allergy: str, drug: str, level: str, severity: str
) -> None:
    report = check_drug(knowledge, allergy, drug)

    assert (report["level"], report["severity"]) == (level, severity), report["reason"]
    if severity == "warning":
        assert report["test_first_after_severe_reaction"] is True
        assert "severe cutaneous adverse reaction" in str(report["reason"])
        assert "allergist's evaluation first" in str(report["reason"])
        assert "2022 practice parameter" in str(report["source"])


def test_a_severe_cutaneous_reaction_among_the_recorded_reactions_counts_as_in_the_text(
    knowledge: BundledKnowledge,
) -> None:
    in_text = check_drug(knowledge, "penicillin - Stevens-Johnson syndrome", "ceftriaxone")
    in_reactions = check_drug(
        knowledge, "penicillin", "ceftriaxone", reactions=("Stevens-Johnson syndrome",)
    )

    assert in_reactions["severe_cutaneous_reaction"] == "Stevens-Johnson syndrome"
    assert (in_reactions["severity"], in_reactions["test_first_after_severe_reaction"]) == (
        in_text["severity"],
        in_text["test_first_after_severe_reaction"],
    )
    assert in_reactions["reason"] == in_text["reason"]


@pytest.mark.parametrize(
    "text",
    [
        "penicillin - tongue swelling",
        "swelling of the lips",
        "Throat closing",
        "laryngeal oedema",
        "Bronchospasm",
        "wheezing and hives",
        "Hypotension",
        "anaphylactic shock",
        "difficulty breathing",
        "could not breathe",
        "intubated in ICU",
        "青霉素 - 喉头水肿",
        "呼吸困难",
    ],
)
def test_the_signs_of_anaphylaxis_and_angioedema_read_as_a_life_threatening_reaction(
    text: str,
) -> None:
    assert life_threatening_reaction(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "rash",
        "ankle swelling",
        "swelling at the injection site",
        "no difficulty breathing",
        "wheezing: no",
        "not hypotensive",
        "nausea",
    ],
)
def test_a_reaction_without_those_signs_is_not_life_threatening(text: str) -> None:
    assert life_threatening_reaction(text) is None
