"""`uac check-drug`: one judgement by name, by code, or both."""

from __future__ import annotations

import json
import sys

import pytest
from typer.testing import CliRunner

from rules.knowledge import bundled, tables
from streams.cli import main
from streams.cli_app import app

runner = CliRunner()


def _verdict(*options: str) -> dict[str, object]:
    result = runner.invoke(app, ["check-drug", *options, "--json"])
    assert result.exit_code == 0, result.stderr
    verdict: dict[str, object] = json.loads(result.stdout)
    return verdict


def test_given_names_then_the_json_verdict() -> None:
    verdict = _verdict("--allergy", "penicillin", "--drug", "Augmentin 875")
    assert (verdict["level"], verdict["severity"], verdict["matched"]) == (
        "same_class",
        "critical",
        ["amoxicillin"],
    )


def test_given_a_severe_cutaneous_reaction_as_text_or_reaction_then_a_warning_to_evaluate_first() -> (
    None
):
    in_text = _verdict("--allergy", "penicillin - SJS", "--drug", "ceftriaxone")
    as_reaction = _verdict("--allergy", "penicillin", "--reaction", "SJS", "--drug", "ceftriaxone")
    for verdict in (in_text, as_reaction):
        assert (verdict["level"], verdict["severity"]) == ("low_risk", "warning")
        assert verdict["test_first_after_severe_reaction"] is True
        assert verdict["severe_cutaneous_reaction"] == "SJS"


def test_given_an_allergy_list_with_an_unread_item_then_the_conflict_stands_and_names_it() -> None:
    verdict = _verdict("--allergy", "Pen, sulfa", "--drug", "Bactrim")
    assert (verdict["level"], verdict["severity"]) == ("same_class", "critical")
    assert "part of the record could not be read" in str(verdict["reason"])
    assert "(unrecognised: pen)" in str(verdict["reason"])


def test_given_only_a_vaccine_code_then_it_is_judged_and_names_the_drug() -> None:
    verdict = _verdict("--allergy", "gelatin", "--drug-code", "cvx|21")
    assert (verdict["drug"], verdict["ingredients"], verdict["level"]) == (
        "cvx|21",
        ["varicella vaccine"],
        "partial",
    )


def test_given_a_code_the_text_does_not_know_then_the_code_resolves_it() -> None:
    by_name = _verdict("--allergy", "penicillin", "--drug", "Zylopen 5 MU")
    by_code = _verdict(
        "--allergy", "penicillin", "--drug", "Zylopen 5 MU", "--drug-code", "rxnorm|7980"
    )
    assert (by_name["level"], by_code["level"]) == ("unverified", "same_class")


def test_given_a_code_system_uri_then_it_is_read() -> None:
    verdict = _verdict(
        "--allergy-code", "http://www.nlm.nih.gov/research/umls/rxnorm|7980", "--drug", "Zosyn"
    )
    assert verdict["level"] == "same_class"


@pytest.mark.parametrize(
    ("option", "code"),
    [
        pytest.param("--drug-code", "rxnorm:723", id="given rxnorm:723 for the drug"),
        pytest.param("--drug-code", "RXCUI:723", id="given RXCUI:723 for the drug"),
        pytest.param(
            "--drug-code",
            "http://www.nlm.nih.gov/research/umls/rxnorm|723",
            id="given a URI with its colon then the bar still separates",
        ),
        pytest.param("--drug", "rxnorm:723", id="given rxnorm:723 as the drug's text"),
        pytest.param("--drug", "RxNorm 723", id="given RxNorm 723 as the drug's text"),
    ],
)
def test_given_a_code_written_system_colon_code_then_it_is_read(option: str, code: str) -> None:
    verdict = _verdict("--allergy", "penicillin", option, code)
    assert (verdict["ingredients"], verdict["level"]) == (["amoxicillin"], "same_class")


@pytest.mark.parametrize(
    "allergy",
    [
        pytest.param(
            ["--allergy", "Drug allergy - see chart"], id="given a name that names nothing"
        ),
        pytest.param([], id="given no name"),
    ],
)
def test_given_an_unknown_code_with_its_display_then_the_display_names_it(
    allergy: list[str],
) -> None:
    verdict = _verdict(
        *allergy,
        "--allergy-code",
        "snomed|91936005|Allergy to penicillin",
        "--drug",
        "azithromycin",
    )
    assert (verdict["allergen"], verdict["level"]) == (
        allergy[1] if allergy else "Allergy to penicillin",
        "none",
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param(["--drug-code", "21"], "is not system|code", id="given a code without system"),
        pytest.param(
            ["--drug-code", "atc|J01"], "is not system|code", id="given an unknown system"
        ),
        pytest.param(
            ["--drug-code", "atc:J01"], "is not system|code", id="given an unknown system:code"
        ),
        pytest.param([], "give a name or a code", id="given neither name nor code"),
    ],
)
def test_bad_drug_options_are_usage_errors(options: list[str], message: str) -> None:
    result = runner.invoke(app, ["check-drug", "--allergy", "penicillin", *options])
    assert result.exit_code == 2
    assert message in " ".join(result.stderr.split())


def test_given_knowledge_data_changed_after_its_release_then_one_line_and_exit_code_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A data file edited without a new manifest (or damaged on disk) stops every command that
    judges drugs, the worker included, with what failed: never a traceback, never a judgement
    from unverified data."""
    real = tables.data_text

    def edited(name: str) -> str:
        text = real(name)
        return text + "\n" if name == "cross_reactivity.csv" else text

    monkeypatch.setattr(tables, "data_text", edited)
    bundled.load_bundled_knowledge.cache_clear()
    monkeypatch.setattr(sys, "argv", ["uac", "check-drug", "--allergy", "x", "--drug", "y"])
    try:
        with pytest.raises(SystemExit) as stopped:
            main()
    finally:
        bundled.load_bundled_knowledge.cache_clear()
    assert stopped.value.code == 3
    stderr = capsys.readouterr().err
    assert "the drug knowledge data cannot be used" in stderr
    assert "cross_reactivity.csv does not match its SHA-256 in manifest.json" in stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize(
    ("side", "codes"),
    [
        pytest.param("--allergy", ["http://snomed.info/sct|999999"], id="an allergen code URI"),
        pytest.param("--drug", ["rxnorm|99999999", "ndc|0000-1111"], id="two drug codes"),
    ],
)
def test_given_only_unknown_codes_then_the_reason_names_the_codes_not_words_of_them(
    side: str, codes: list[str]
) -> None:
    other = "--drug" if side == "--allergy" else "--allergy"
    coded = [option for code in codes for option in (f"{side}-code", code)]
    verdict = _verdict(*coded, other, "amoxicillin")
    unrecognised = str(verdict["reason"]).partition("(unrecognised: ")[2].rstrip(")")
    assert verdict["level"] == "unverified"
    assert all(word.startswith("http://") for word in unrecognised.split(", ")), unrecognised
    assert len(unrecognised.split(", ")) == len(codes)


def test_given_a_local_code_that_is_a_name_then_the_name_is_still_read() -> None:
    verdict = _verdict("--allergy", "penicillin", "--drug-code", "urn:local:formulary|amoxicillin")
    assert verdict["level"] == "same_class"


def test_given_an_unknown_ndc_code_alone_then_the_reason_names_it_once() -> None:
    verdict = _verdict("--allergy", "Penicillin", "--drug-code", "ndc|0093-3109-01")
    assert verdict["level"] == "unverified"
    assert str(verdict["reason"]).count("0093-3109-01") == 2, verdict["reason"]
