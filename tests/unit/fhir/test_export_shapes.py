"""Shapes of real EHR exports that lost or misfiled records: a drug given under a request that
is no prescription (a proposal, an option, a draft, a doNotPerform), ..."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.events import MedicationPrescribed, MedicationStopped
from tests.unit.fhir.test_clinical_scenarios import DRUG_ALLERGY, drug_allergy_alerts
from tests.unit.fhir.test_references import penicillin_allergy, run
from tests.unit.fhir.test_therapies import GIVEN_KINDS, _given, folded, raised, request

_ORDER_FIELDS = {
    "MedicationDispense": "authorizingPrescription",
    "MedicationAdministration": "request",
    "MedicationStatement": "basedOn",
}
_NOT_PRESCRIBED = [
    pytest.param(
        {"intent": "proposal"},
        "MedicationRequest intent proposal is not a prescription",
        id="proposal",
    ),
    pytest.param(
        {"intent": "option"}, "MedicationRequest intent option is not a prescription", id="option"
    ),
    pytest.param(
        {"status": "draft"}, "MedicationRequest status draft is not yet a prescription", id="draft"
    ),
    pytest.param(
        {"doNotPerform": True},
        "MedicationRequest doNotPerform: an instruction not to give the drug",
        id="doNotPerform",
    ),
]


@pytest.mark.parametrize(("fields", "why"), _NOT_PRESCRIBED)
@pytest.mark.parametrize("kind", GIVEN_KINDS)
def test_a_drug_given_under_a_request_that_is_no_prescription_is_a_course_of_its_own(
    kind: str, fields: dict[str, Any], why: str
) -> None:
    """The request is skipped, so nothing prescribed the drug: the record is its own course,
    with a line. It was filed under the request's id, as news of a prescription that does not
    exist, and a single dose or fill stayed an active medication with nothing to end it."""
    not_prescribed = request("r1", "order") | fields
    given = _given(kind, "2024-05-03")
    result = run(not_prescribed, given)
    assert {event.payload.prescription_id for _, event in result.events} == {f"{kind}/g1"}
    assert [line.detail for line in result.passed_over if line.source_ref == f"{kind}/g1"] == [
        f"{_ORDER_FIELDS[kind]} names MedicationRequest/r1, which is not imported as a "
        f"prescription ({why}): the record is read as a course of its own, not as news of that "
        "order"
    ]
    checked = folded(penicillin_allergy("Patient/p1"), not_prescribed, given)
    assert raised(checked, DRUG_ALLERGY) == [("allergy:a1", f"medication:{kind}/g1")]
    assert {alert.severity.value for alert in drug_allergy_alerts(checked)} == {"critical"}


def test_a_dispense_under_a_proposal_is_one_fill_checked_once() -> None:
    """A fill named by no prescription is raised, then resolved: it no longer stays active."""
    result = run(request("r1", "proposal"), _given("MedicationDispense", "2024-05-03"))
    assert [type(event.payload) for _, event in result.events] == [
        MedicationPrescribed,
        MedicationStopped,
    ]
