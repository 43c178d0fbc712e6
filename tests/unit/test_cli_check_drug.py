"""`uac check-drug`: one judgement by name, by code, or both."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from streams.cli import app

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
    ("options", "message"),
    [
        pytest.param(["--drug-code", "21"], "is not system|code", id="given a code without system"),
        pytest.param(
            ["--drug-code", "atc|J01"], "is not system|code", id="given an unknown system"
        ),
        pytest.param([], "give a name or a code", id="given neither name nor code"),
    ],
)
def test_bad_drug_options_are_usage_errors(options: list[str], message: str) -> None:
    result = runner.invoke(app, ["check-drug", "--allergy", "penicillin", *options])
    assert result.exit_code == 2
    assert message in " ".join(result.stderr.split())
