"""Alerts rendered as FHIR R4 DetectedIssue resources, checked against the official examples."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID, uuid5

import pytest

from schemas.alerts import (
    Alert,
    AlertStatus,
    DrugAllergyFinding,
    DuplicateTherapyFinding,
    Evidence,
)
from schemas.fhir.detected_issue import detected_issue, detected_issue_bundle
from schemas.fhir.resource_types import R4_RESOURCE_TYPES
from schemas.severity import Severity

EXAMPLES = Path(__file__).resolve().parents[2] / "fixtures" / "fhir" / "fhir-r4-examples"
ACT_CODE = "http://terminology.hl7.org/CodeSystem/v3-ActCode"
RAISED_AT = datetime(2015, 1, 15, tzinfo=UTC)
LATER = datetime(2015, 1, 16, 8, 30, 0, 123000, tzinfo=UTC)
ALERT_ID = UUID("8a4e7a62-0f8b-5d4a-9f0e-2f4f5d6c7b8a")
FHIR_DATE_TIME = re.compile(
    r"\d{4}(-\d{2}(-\d{2}(T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2}))?)?)?"
)


def claim(resource_type: str, system: str, value: str, **display: str) -> dict[str, Any]:
    """A logical reference to a claim, as an implicated resource or an evidence detail."""
    return {"type": resource_type, "identifier": {"system": system, "value": value}} | display


ALLERGIES = "urn:uac:tenant:clinic-a:subject:pat1:allergy"
MEDICATIONS = "urn:uac:tenant:clinic-a:subject:pat1:medication"


def example(name: str) -> dict[str, Any]:
    resource: dict[str, Any] = json.loads((EXAMPLES / f"{name}.json").read_text(encoding="utf-8"))
    return resource


def penicillin_alert(**fields: Any) -> Alert:
    """The Zosyn-against-penicillin alert, as the drug-allergy rule raises it."""
    values: dict[str, Any] = {
        "lifecycle_id": uuid5(ALERT_ID, "raised"),
        "alert_id": ALERT_ID,
        "tenant_id": "clinic-a",
        "subject_id": "pat1",
        "rule_id": "drug-allergy-conflict",
        "rule_version": 1,
        "status": AlertStatus.RAISED,
        "severity": Severity.CRITICAL,
        "title": "Zosyn (piperacillin/tazobactam) 4.5gm injection conflicts with the recorded "
        "Penicillin G allergy",
        "detail": "same_class: piperacillin and the recorded allergen penicillin g both belong "
        "to the penicillins (source: class membership: penicillins)",
        "cause": ("allergy:medication", "medication:medrx0319"),
        "evidence": (
            Evidence(
                event_id="4f6f6c4e-1b1a-5c1e-9a55-0c1d8e3f0a01",
                claim_id="medication",
                role="allergy",
                description="allergy to Penicillin G",
            ),
            Evidence(
                event_id="4f6f6c4e-1b1a-5c1e-9a55-0c1d8e3f0a02",
                claim_id="medrx0319",
                role="medication",
                description="prescribed Zosyn (piperacillin/tazobactam) 4.5gm injection",
            ),
        ),
        "drug_allergy": DrugAllergyFinding(
            allergy_id="medication",
            allergen="Penicillin G",
            prescription_id="medrx0319",
            drug="Zosyn (piperacillin/tazobactam) 4.5gm injection",
            ingredients=("piperacillin", "tazobactam"),
            matched=("piperacillin",),
            level="same_class",
            reason="piperacillin and the recorded allergen penicillin g both belong to the "
            "penicillins",
            source="class membership: penicillins",
            knowledge_version="uac-bundled-2026.11",
        ),
        "trigger_event_id": "4f6f6c4e-1b1a-5c1e-9a55-0c1d8e3f0a02",
        "occurred_at": RAISED_AT,
    }
    return Alert(**(values | fields))


def duplicate_therapy_alert() -> Alert:
    return penicillin_alert(
        rule_id="duplicate-therapy",
        severity=Severity.WARNING,
        title="Duplicate therapy: lisinopril 10 MG Oral Tablet and lisinopril 10 MG Oral Tablet",
        detail="both active prescriptions share the ingredient lisinopril",
        cause=("medication:rx-1", "medication:rx-2"),
        evidence=(
            Evidence(event_id="e1", claim_id="rx-1", role="medication", description="prescribed a"),
            Evidence(event_id="e2", claim_id="rx-2", role="medication", description="prescribed b"),
        ),
        drug_allergy=None,
    )


RAISED = penicillin_alert()
RESOLVED = penicillin_alert(
    status=AlertStatus.RESOLVED,
    occurred_at=LATER,
    reason="AllergyStatusChanged 0b0e9a7e removed the cause",
)
OVERRIDDEN = penicillin_alert(
    status=AlertStatus.OVERRIDDEN,
    occurred_at=LATER,
    reason="tolerated piperacillin in 2014 under observation",
)
ACKNOWLEDGED = penicillin_alert(status=AlertStatus.ACKNOWLEDGED, occurred_at=LATER)


@pytest.mark.parametrize(
    ("alert", "status", "severity", "identified"),
    [
        pytest.param(
            RAISED,
            "final",
            "high",
            "2015-01-15T00:00:00.000Z",
            id="given a raised critical alert then a final high-severity issue",
        ),
        pytest.param(
            RESOLVED,
            "cancelled",
            "high",
            "2015-01-16T08:30:00.123Z",
            id="given a resolved alert then a cancelled issue",
        ),
        pytest.param(
            OVERRIDDEN,
            "amended",
            "high",
            "2015-01-16T08:30:00.123Z",
            id="given an overridden alert then an amended issue",
        ),
        pytest.param(
            ACKNOWLEDGED,
            "amended",
            "high",
            "2015-01-16T08:30:00.123Z",
            id="given an acknowledged alert then an amended issue",
        ),
        pytest.param(
            penicillin_alert(severity=Severity.WARNING),
            "final",
            "moderate",
            "2015-01-15T00:00:00.000Z",
            id="given a warning then moderate severity",
        ),
        pytest.param(
            penicillin_alert(severity=Severity.INFO),
            "final",
            "low",
            "2015-01-15T00:00:00.000Z",
            id="given info then low severity",
        ),
    ],
)
def test_status_severity_and_time(
    alert: Alert, status: str, severity: str, identified: str
) -> None:
    issue = detected_issue(alert)
    assert (issue["status"], issue["severity"], issue["identifiedDateTime"]) == (
        status,
        severity,
        identified,
    )


def test_given_a_raised_drug_allergy_alert_then_the_issue_names_patient_code_and_implicated() -> (
    None
):
    issue = detected_issue(RAISED)
    assert issue["resourceType"] == "DetectedIssue"
    assert issue["id"] == str(ALERT_ID)
    assert issue["identifier"] == [{"system": "urn:ietf:rfc:3986", "value": f"urn:uuid:{ALERT_ID}"}]
    assert issue["patient"] == {
        "reference": "Patient/pat1",
        "identifier": {"system": f"urn:uac:tenant:{RAISED.tenant_id}", "value": "pat1"},
    }
    assert issue["meta"] == {"tag": [{"system": "urn:uac:tenant", "code": RAISED.tenant_id}]}
    assert issue["code"]["coding"] == [
        {"system": ACT_CODE, "code": "ALGY", "display": "Allergy Alert"}
    ]
    assert issue["code"]["text"] == RAISED.title
    assert issue["implicated"] == [
        {
            "type": "AllergyIntolerance",
            "identifier": {
                "system": "urn:uac:tenant:clinic-a:subject:pat1:allergy",
                "value": "medication",
            },
            "display": "Penicillin G",
        },
        {
            "type": "MedicationRequest",
            "identifier": {
                "system": "urn:uac:tenant:clinic-a:subject:pat1:medication",
                "value": "medrx0319",
            },
            "display": "Zosyn (piperacillin/tazobactam) 4.5gm injection",
        },
    ]
    assert issue["author"] == {"display": "UaC rule drug-allergy-conflict v1"}
    assert RAISED.detail in issue["detail"]
    assert "mitigation" not in issue


def test_given_evidence_then_each_item_references_its_claim_and_names_the_uac_event() -> None:
    evidence = detected_issue(RAISED)["evidence"]
    assert evidence == [
        {
            "code": [{"text": "allergy"}],
            "detail": [
                claim(
                    "AllergyIntolerance",
                    ALLERGIES,
                    "medication",
                    display="allergy to Penicillin G "
                    "(UaC event 4f6f6c4e-1b1a-5c1e-9a55-0c1d8e3f0a01)",
                )
            ],
        },
        {
            "code": [{"text": "medication"}],
            "detail": [
                claim(
                    "MedicationRequest",
                    MEDICATIONS,
                    "medrx0319",
                    display="prescribed Zosyn (piperacillin/tazobactam) 4.5gm injection "
                    "(UaC event 4f6f6c4e-1b1a-5c1e-9a55-0c1d8e3f0a02)",
                )
            ],
        },
    ]


def test_given_a_change_of_the_allergy_status_then_its_evidence_references_the_allergy() -> None:
    status = Evidence(event_id="e3", claim_id="medication", role="allergy_status", description="x")
    alert = penicillin_alert(evidence=(*RAISED.evidence, status))
    assert detected_issue(alert)["evidence"][-1]["detail"] == [
        claim("AllergyIntolerance", ALLERGIES, "medication", display="x (UaC event e3)")
    ]


def test_given_an_overridden_alert_then_a_therapy_appropriate_mitigation_with_the_reason() -> None:
    assert detected_issue(OVERRIDDEN)["mitigation"] == [
        {
            "action": {
                "text": "overridden: tolerated piperacillin in 2014 under observation",
                "coding": [{"system": ACT_CODE, "code": "1", "display": "Therapy Appropriate"}],
            },
            "date": "2015-01-16T08:30:00.123Z",
        }
    ]


def test_given_an_acknowledged_alert_without_reason_then_a_text_only_mitigation() -> None:
    assert detected_issue(ACKNOWLEDGED)["mitigation"] == [
        {"action": {"text": "acknowledged: no reason given"}, "date": "2015-01-16T08:30:00.123Z"}
    ]


def test_given_a_resolved_alert_then_the_detail_says_when_and_why_and_no_mitigation() -> None:
    issue = detected_issue(RESOLVED)
    assert issue["detail"].endswith(
        "Resolved at 2015-01-16T08:30:00.123Z: AllergyStatusChanged 0b0e9a7e removed the cause"
    )
    assert "mitigation" not in issue


def test_given_the_time_it_was_raised_then_a_lifecycle_record_keeps_that_identified_time() -> None:
    issue = detected_issue(OVERRIDDEN, identified_at=RAISED_AT)
    assert issue["identifiedDateTime"] == "2015-01-15T00:00:00.000Z"
    assert issue["mitigation"][0]["date"] == "2015-01-16T08:30:00.123Z"


def test_given_a_duplicate_therapy_alert_then_dupthpy_and_both_requests_implicated() -> None:
    issue = detected_issue(duplicate_therapy_alert())
    assert issue["code"]["coding"] == [
        {"system": ACT_CODE, "code": "DUPTHPY", "display": "Duplicate Therapy Alert"}
    ]
    assert issue["severity"] == "moderate"
    assert issue["implicated"] == [
        claim("MedicationRequest", MEDICATIONS, "rx-1", display="prescribed a"),
        claim("MedicationRequest", MEDICATIONS, "rx-2", display="prescribed b"),
    ]


def test_given_a_duplicate_therapy_finding_then_the_implicated_requests_show_the_drugs() -> None:
    finding = DuplicateTherapyFinding(
        prescription_ids=("rx-1", "rx-2"),
        drugs=("lisinopril 10 MG Oral Tablet", "Zestril"),
        shared_by="ingredient",
        shared=("lisinopril",),
        knowledge_version="uac-bundled-2026.12.2",
    )
    alert = duplicate_therapy_alert().model_copy(update={"duplicate_therapy": finding})
    assert detected_issue(alert)["implicated"] == [
        claim("MedicationRequest", MEDICATIONS, "rx-1", display="lisinopril 10 MG Oral Tablet"),
        claim("MedicationRequest", MEDICATIONS, "rx-2", display="Zestril"),
    ]


def test_given_a_rule_without_an_act_code_then_the_code_is_text_only() -> None:
    alert = penicillin_alert(
        rule_id="claim-needs-confirmation",
        cause=("fact:e1", "fact:e2"),
        evidence=(),
        drug_allergy=None,
    )
    issue = detected_issue(alert)
    assert issue["code"] == {"text": alert.title}
    assert "implicated" not in issue
    assert "evidence" not in issue


def test_given_a_raised_allergy_alert_then_the_status_of_the_official_allergy_example() -> None:
    assert detected_issue(RAISED)["status"] == example("DetectedIssue-allergy")["status"]


def _shape(value: Any) -> Any:
    """The structure of a JSON value: keys and value kinds, not the values."""
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return type(value).__name__


@pytest.mark.parametrize(
    "alert",
    [
        pytest.param(RAISED, id="given a raised alert then the official example's shape"),
        pytest.param(RESOLVED, id="given a resolved alert then the official example's shape"),
        pytest.param(OVERRIDDEN, id="given an overridden alert then the official example's shape"),
    ],
)
def test_shape_matches_the_official_examples(alert: Alert) -> None:
    issue = detected_issue(alert)
    ddi, duplicate = example("DetectedIssue-ddi"), example("DetectedIssue-duplicate")
    shared = {"resourceType", "id", "status", "code", "severity", "identifiedDateTime"}
    shared |= {"author", "implicated", "detail", "patient"}
    assert shared <= ddi.keys() | duplicate.keys()
    assert shared <= issue.keys()
    assert _shape(issue["code"]["coding"]) == _shape(ddi["code"]["coding"])
    assert issue["code"]["coding"][0]["system"] == ddi["code"]["coding"][0]["system"]
    assert issue["severity"] in {"high", "moderate", "low"}
    assert _shape(issue["patient"]["reference"]) == _shape(duplicate["patient"]["reference"])
    for implicated in issue["implicated"]:
        assert implicated.keys() <= {"reference", "type", "identifier", "display"}
        assert implicated["type"] in R4_RESOURCE_TYPES
        assert _shape(implicated["identifier"]) == {"system": "str", "value": "str"}
        assert _shape(implicated["display"]) == _shape(ddi["implicated"][0]["display"])
    assert FHIR_DATE_TIME.fullmatch(issue["identifiedDateTime"])
    assert isinstance(issue["detail"], str)
    if "mitigation" in issue:
        (mitigation,) = issue["mitigation"]
        official = ddi["mitigation"][0]
        assert mitigation.keys() <= official.keys()
        assert _shape(mitigation["action"]) == _shape(official["action"])
        assert FHIR_DATE_TIME.fullmatch(mitigation["date"])
    json.dumps(issue, allow_nan=False)


def test_given_one_subject_id_in_two_tenants_then_two_patients_told_apart_by_their_tenant() -> None:
    other = RAISED.model_copy(update={"tenant_id": "clinic-b"})
    first, second = detected_issue(RAISED)["patient"], detected_issue(other)["patient"]
    assert first["reference"] == second["reference"] == "Patient/pat1"
    assert first["identifier"] != second["identifier"]
    assert detected_issue(other)["meta"]["tag"][0]["code"] == "clinic-b"


def test_given_two_subjects_with_one_prescription_id_then_one_bundle_implicates_two_orders() -> (
    None
):
    other = penicillin_alert(subject_id="pat2", alert_id=uuid5(ALERT_ID, "pat2"))
    other_tenant = RAISED.model_copy(update={"tenant_id": "clinic-b"})
    bundle = detected_issue_bundle([RAISED, other, other_tenant])
    orders = [entry["resource"]["implicated"][1] for entry in bundle["entry"]]
    assert [order["identifier"] for order in orders] == [
        {"system": "urn:uac:tenant:clinic-a:subject:pat1:medication", "value": "medrx0319"},
        {"system": "urn:uac:tenant:clinic-a:subject:pat2:medication", "value": "medrx0319"},
        {"system": "urn:uac:tenant:clinic-b:subject:pat1:medication", "value": "medrx0319"},
    ]
    assert {order["type"] for order in orders} == {"MedicationRequest"}
    claims = [
        detail
        for entry in bundle["entry"]
        for detail in [
            *entry["resource"]["implicated"],
            *(d for e in entry["resource"]["evidence"] for d in e["detail"]),
        ]
    ]
    assert not [detail for detail in claims if "reference" in detail]


@pytest.mark.parametrize("subject", ["pat_42@clinic", "x" * 65])
def test_given_a_subject_id_that_is_no_fhir_id_then_the_patient_is_named_by_identifier_only(
    subject: str,
) -> None:
    issue = detected_issue(penicillin_alert(subject_id=subject))
    assert issue["patient"] == {
        "identifier": {"system": "urn:uac:tenant:clinic-a", "value": subject}
    }


def test_given_a_bundle_of_a_lifecycle_then_every_record_keeps_the_time_it_was_first_raised() -> (
    None
):
    raised = penicillin_alert()
    resolved = penicillin_alert(
        lifecycle_id=uuid5(ALERT_ID, "resolved"), status=AlertStatus.RESOLVED, occurred_at=LATER
    )
    bundle = detected_issue_bundle([raised, resolved])
    times = [entry["resource"]["identifiedDateTime"] for entry in bundle["entry"]]
    assert times == ["2015-01-15T00:00:00.000Z", "2015-01-15T00:00:00.000Z"]
