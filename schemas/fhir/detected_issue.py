"""A UaC alert lifecycle record as a FHIR R4 DetectedIssue resource (a JSON-ready dict). Pure.

Decisions
---------
- `id` is the alert_id (stable across the lifecycle); `identifier` carries it as a urn:uuid.
- The tenant: `meta.tag` (system `urn:uac:tenant`, code the tenant id) and the patient's
  `identifier` (system `urn:uac:tenant:<tenant>`, value the subject id) beside its reference
  `Patient/<subject>`: a subject id is unique within its tenant only.
- `status` (R4 binds DetectedIssue.status to observation-status): `raised` -> `final` (the
  rule's finding is complete); `acknowledged` / `overridden` -> `amended` (a final issue to which
  a mitigation was added); `resolved` -> `cancelled` (the issue no longer applies because its
  cause went away, e.g. the allergy was refuted or the drug stopped). `entered-in-error` is
  never used: a resolved alert was not raised in error.
- `code` (v3 ActCode): drug-allergy alerts -> `ALGY` "Allergy Alert" (ActCode has no `ALLGY`),
  duplicate therapy -> `DUPTHPY` "Duplicate Therapy Alert"; other rules carry text only.
- `severity`: critical -> high, warning -> moderate, info -> low.
- `identifiedDateTime`: the alert record's `occurred_at`, or `identified_at` when the caller
  knows when the alert was first raised (for a lifecycle record other than `raised`).
- `implicated`: `AllergyIntolerance/<allergy_id>` and `MedicationRequest/<prescription_id>` from
  the alert's cause (`allergy:<id>`, `medication:<id>`), with the allergen and drug as display
  (both drugs of a duplicate therapy); a prescription imported from a MedicationStatement,
  Immunization, MedicationAdministration or MedicationDispense of its own is
  `<ResourceType>/<id>` already and is referenced as it is.
- `evidence`: one entry per UaC evidence item, its role as code text and a reference to the
  implicated resource, the UaC event id in the display (the lineage back to the event log).
- `mitigation`: for `acknowledged` (text only: what was done is not known) and `overridden`
  (v3 ActCode `1` "Therapy Appropriate": the clinician judged the therapy appropriate), with
  the reason and the time of the acknowledgement.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from schemas.alerts import Alert, AlertStatus, Evidence, Severity

ACT_CODE: Final = "http://terminology.hl7.org/CodeSystem/v3-ActCode"
TENANT_SYSTEM: Final = "urn:uac:tenant"
"""The tenant of an alert: the code of its `meta.tag` in this system, and the identifier system
of its patient (`urn:uac:tenant:<tenant>`), so the same subject id in two tenants stays two
people in a Bundle that holds both."""
URI: Final = "urn:ietf:rfc:3986"

STATUS: Final = {
    AlertStatus.RAISED: "final",
    AlertStatus.ACKNOWLEDGED: "amended",
    AlertStatus.OVERRIDDEN: "amended",
    AlertStatus.RESOLVED: "cancelled",
}
SEVERITY: Final = {Severity.CRITICAL: "high", Severity.WARNING: "moderate", Severity.INFO: "low"}
ISSUE_CODES: Final = {
    "drug-allergy-conflict": ("ALGY", "Allergy Alert"),
    "duplicate-therapy": ("DUPTHPY", "Duplicate Therapy Alert"),
}
THERAPY_APPROPRIATE: Final = ("1", "Therapy Appropriate")
RESOURCE_OF_CLAIM: Final = {
    "allergy": "AllergyIntolerance",
    "allergy_status": "AllergyIntolerance",
    "medication": "MedicationRequest",
}
"""UaC claim kind / evidence role -> the FHIR resource type the claim was imported from."""
QUALIFIED_CLAIMS: Final = (
    "MedicationStatement/",
    "Immunization/",
    "MedicationAdministration/",
    "MedicationDispense/",
)
"""Claim ids that already name their resource (a prescription imported from a
MedicationStatement is `MedicationStatement/<id>`), referenced as they are."""


def detected_issue(alert: Alert, identified_at: datetime | None = None) -> dict[str, Any]:
    """The DetectedIssue for one alert lifecycle record."""
    issue: dict[str, Any] = {
        "resourceType": "DetectedIssue",
        "id": str(alert.alert_id),
        "identifier": [{"system": URI, "value": f"urn:uuid:{alert.alert_id}"}],
        "status": STATUS[alert.status],
        "code": _issue_code(alert),
        "severity": SEVERITY[alert.severity],
        "meta": {"tag": [{"system": TENANT_SYSTEM, "code": alert.tenant_id}]},
        "patient": {
            "reference": f"Patient/{alert.subject_id}",
            "identifier": {
                "system": f"{TENANT_SYSTEM}:{alert.tenant_id}",
                "value": alert.subject_id,
            },
        },
        "identifiedDateTime": fhir_instant(identified_at or alert.occurred_at),
        "author": {"display": f"UaC rule {alert.rule_id} v{alert.rule_version}"},
        "implicated": _implicated(alert),
        "evidence": [_evidence(item) for item in alert.evidence],
        "detail": _detail(alert),
    }
    mitigation = _mitigation(alert)
    if mitigation is not None:
        issue["mitigation"] = [mitigation]
    return {key: value for key, value in issue.items() if value != []}


def fhir_instant(moment: datetime) -> str:
    """A FHIR instant in UTC with milliseconds (what UaC keeps)."""
    utc = moment.astimezone(UTC)
    return f"{utc:%Y-%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z"


def _issue_code(alert: Alert) -> dict[str, Any]:
    code: dict[str, Any] = {"text": alert.title}
    known = ISSUE_CODES.get(alert.rule_id)
    if known is not None:
        code["coding"] = [{"system": ACT_CODE, "code": known[0], "display": known[1]}]
    return code


def _implicated(alert: Alert) -> list[dict[str, str]]:
    displays = _displays(alert)
    references = []
    for cause in alert.cause:
        kind, _, claim_id = cause.partition(":")
        resource_type = RESOURCE_OF_CLAIM.get(kind)
        if resource_type is not None:
            reference = {"reference": _reference(resource_type, claim_id)}
            display = displays.get(cause)
            references.append(reference | ({"display": display} if display else {}))
    return references


def _reference(resource_type: str, claim_id: str) -> str:
    return claim_id if claim_id.startswith(QUALIFIED_CLAIMS) else f"{resource_type}/{claim_id}"


def _displays(alert: Alert) -> dict[str, str]:
    """Human names of the implicated claims: the allergen and the drug when known."""
    displays = {f"{e.role}:{e.claim_id}": e.description for e in alert.evidence}
    finding = alert.drug_allergy
    if finding is not None:
        displays[f"allergy:{finding.allergy_id}"] = finding.allergen
        displays[f"medication:{finding.prescription_id}"] = finding.drug
    therapy = alert.duplicate_therapy
    if therapy is not None:
        for prescription_id, drug in zip(therapy.prescription_ids, therapy.drugs, strict=False):
            displays[f"medication:{prescription_id}"] = drug
    return displays


def _evidence(item: Evidence) -> dict[str, Any]:
    detail: dict[str, str] = {"display": f"{item.description} (UaC event {item.event_id})"}
    resource_type = RESOURCE_OF_CLAIM.get(item.role)
    if resource_type is not None:
        detail = {"reference": _reference(resource_type, item.claim_id)} | detail
    return {"code": [{"text": item.role}], "detail": [detail]}


def _detail(alert: Alert) -> str:
    detail = f"{alert.title}. {alert.detail}"
    if alert.status is AlertStatus.RESOLVED and alert.reason:
        return f"{detail} Resolved: {alert.reason}"
    return detail


def _mitigation(alert: Alert) -> dict[str, Any] | None:
    if alert.status not in (AlertStatus.ACKNOWLEDGED, AlertStatus.OVERRIDDEN):
        return None
    reason = alert.reason or "no reason given"
    action: dict[str, Any] = {"text": f"{alert.status.value}: {reason}"}
    if alert.status is AlertStatus.OVERRIDDEN:
        code, display = THERAPY_APPROPRIATE
        action["coding"] = [{"system": ACT_CODE, "code": code, "display": display}]
    return {"action": action, "date": fhir_instant(alert.occurred_at)}


def detected_issue_bundle(alerts: Sequence[Alert]) -> dict[str, Any]:
    """Alerts as a FHIR `collection` Bundle of DetectedIssue resources, one per lifecycle record
    (entry fullUrl `urn:uuid:<lifecycle_id>`; the DetectedIssue id is the alert id)."""
    return {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [
            {"fullUrl": f"urn:uuid:{alert.lifecycle_id}", "resource": detected_issue(alert)}
            for alert in alerts
        ],
    }
