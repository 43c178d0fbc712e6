"""A source's OperationOutcome (a bulk export's error file, a server's failed answer) is its
report of what it could not give: an error says the import is incomplete, never passes as an
unsupported resource of a complete one."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.fhir.mapping import import_fhir, parse_ndjson, without_unmapped
from tests.unit.fhir.test_error_paths import ALLERGY, PATIENT, run
from tests.unit.fhir.test_mapping import CONTEXT


def outcome(*issues: Any) -> dict[str, Any]:
    return {"resourceType": "OperationOutcome", "issue": list(issues)}


FAILED = {
    "severity": "error",
    "code": "processing",
    "diagnostics": "Unable to export MedicationRequest for Patient/123: timeout",
}
NOTED = {"severity": "warning", "code": "informational", "details": {"text": "filtered"}}


def test_given_an_export_error_then_an_import_error_quoting_it_and_the_records_still_imported() -> (
    None
):
    result = run(PATIENT, ALLERGY, outcome(FAILED))

    assert [error.reason for error in result.errors] == ["source_reported_error"]
    assert "Unable to export MedicationRequest for Patient/123: timeout" in result.errors[0].message
    assert {event.type.value for _, event in result.events} >= {"AllergyRecorded"}
    assert result.skipped == []


@pytest.mark.parametrize(
    ("issues", "quoted"),
    [
        pytest.param((NOTED,), "warning informational: filtered", id="given a warning"),
        pytest.param((), "no issue", id="given no issue"),
        pytest.param(("garbage",), "no issue", id="given issues that are no objects"),
    ],
)
def test_given_an_outcome_without_an_error_then_a_skip_that_quotes_it(
    issues: tuple[Any, ...], quoted: str
) -> None:
    result = run(outcome(*issues))

    assert result.errors == []
    assert [skip.reason for skip in result.skipped] == [
        f"OperationOutcome without an error, the source notes: {quoted}"
    ]


def test_given_an_error_among_warnings_then_the_errors_are_quoted() -> None:
    result = run(outcome(NOTED, FAILED | {"severity": "fatal", "diagnostics": "x" * 500}))

    assert len(result.errors) == 1
    assert "fatal processing: " + "x" * 199 + "…" in result.errors[0].message
    assert "filtered" not in result.errors[0].message


def test_given_a_bulk_error_file_then_its_outcomes_are_read_not_dropped_as_unsupported() -> None:
    lines = ['{"resourceType": "OperationOutcome", "issue": [{"severity": "error", "code": "x"}]}']
    parsed = parse_ndjson(iter(lines), "OperationOutcome.ndjson", each=without_unmapped)

    result = import_fhir(parsed, CONTEXT)

    assert [error.origin for error in result.errors] == ["OperationOutcome.ndjson:1"]
