"""A UaC alert lifecycle record as a FHIR R4 DetectedIssue resource (a JSON-ready dict). Pure.

Decisions
---------
- `id` is the alert_id (stable across the lifecycle); `identifier` carries it as a urn:uuid.
- The tenant: `meta.tag` (system `urn:uac:tenant`, code the tenant id) and the patient's
  `identifier` (system `urn:uac:tenant:<tenant>`, value the subject id) beside its reference
  `Patient/<subject>`: a subject id is unique within its tenant only. A subject id that is not
  a FHIR id (`[A-Za-z0-9-.]{1,64}`: `pat_42@clinic`, 70 characters) gets no literal reference,
  only the identifier (a logical reference), so the resource stays valid R4.
- `status` (R4 binds DetectedIssue.status to observation-status): `raised` -> `final` (the
  rule's finding is complete); `acknowledged` / `overridden` -> `amended` (a final issue to which
  a mitigation was added); `resolved` -> `cancelled` (the issue no longer applies because its
  cause went away, e.g. the allergy was refuted or the drug stopped). `entered-in-error` is
  never used: a resolved alert was not raised in error.
- `code` (v3 ActCode): drug-allergy alerts -> `ALGY` "Allergy Alert" (ActCode has no `ALLGY`),
  duplicate therapy -> `DUPTHPY` "Duplicate Therapy Alert"; other rules carry text only.
- `severity`: critical -> high, warning -> moderate, info -> low.
- `identifiedDateTime`: when the alert was first raised (`identified_at`, which a Bundle of
  lifecycle records finds for itself), else the record's `occurred_at`: a resolution or an
  acknowledgement does not move it.
- `implicated`: the alert's causing claims (`allergy:<id>`, `medication:<id>`) as logical
  references (R4 Reference `type` + `identifier`, no `reference`): `type` the resource the
  claim stands for (`AllergyIntolerance`, `MedicationRequest`; a prescription imported from a
  MedicationStatement, Immunization, MedicationAdministration or MedicationDispense of its own
  has the claim id `<ResourceType>/<id>` and that type), `identifier.system`
  `urn:uac:tenant:<tenant>:subject:<subject>:<kind>` (`kind` the claim kind of the cause:
  `allergy`, `medication`), `identifier.value` the claim id, with the allergen and drug as
  display (both drugs of a duplicate therapy). Claim ids are unique per tenant and subject
  only, and in a Bundle a literal reference resolves to one resource: `MedicationRequest/r1`
  would name every subject's order `r1` as one, so no claim is referenced as
  `<ResourceType>/<id>`.
- `evidence`: one entry per UaC evidence item, its role as code text and, for a claim role
  (`allergy`, `allergy_status`, `medication`), the same logical reference to its claim, the UaC
  event id in the display (the lineage back to the event log).
- `mitigation`: for `acknowledged` (text only: what was done is not known) and `overridden`
  (v3 ActCode `1` "Therapy Appropriate": the clinician judged the therapy appropriate), with
  the reason and the time of the acknowledgement.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final
from uuid import UUID

from schemas.alerts import Alert, AlertStatus, Evidence
from schemas.severity import Severity

ACT_CODE: Final = "http://terminology.hl7.org/CodeSystem/v3-ActCode"
TENANT_SYSTEM: Final = "urn:uac:tenant"
"""The tenant of an alert: the code of its `meta.tag` in this system, and the identifier system
of its patient (`urn:uac:tenant:<tenant>`), so the same subject id in two tenants stays two
people in a Bundle that holds both."""
URI: Final = "urn:ietf:rfc:3986"
FHIR_ID: Final = re.compile(r"[A-Za-z0-9\-.]{1,64}")
"""What FHIR R4 allows as a resource id (the `id` datatype)."""

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
RESOURCE_OF_CLAIM: Final = {"allergy": "AllergyIntolerance", "medication": "MedicationRequest"}
"""UaC claim kind -> the FHIR resource type the claim stands for."""
CLAIM_OF_ROLE: Final = {
    "allergy": "allergy",
    "allergy_status": "allergy",
    "medication": "medication",
    "medication_stop": "medication",
}
"""Evidence role -> the kind of the claim its `claim_id` names (other roles name no claim that
has a FHIR resource)."""
QUALIFIED_CLAIMS: Final = (
    "MedicationStatement/",
    "Immunization/",
    "MedicationAdministration/",
    "MedicationDispense/",
)
"""Claim ids that name their resource type (a prescription imported from a MedicationStatement
is `MedicationStatement/<id>`): the reference has that type."""


def claim_system(tenant_id: str, subject_id: str, kind: str) -> str:
    """The identifier system of one subject's claims of one kind: claim ids are unique per
    tenant, subject and kind only. An event's tenant and subject ids hold no `:` and no
    whitespace, so the system is a FHIR uri and names exactly one tenant, subject and kind."""
    return f"{TENANT_SYSTEM}:{tenant_id}:subject:{subject_id}:{kind}"


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
        "patient": _patient(alert),
        "identifiedDateTime": fhir_instant(identified_at or alert.occurred_at),
        "author": {"display": f"UaC rule {alert.rule_id} v{alert.rule_version}"},
        "implicated": _implicated(alert),
        "evidence": [_evidence(alert, item) for item in alert.evidence],
        "detail": _detail(alert),
    }
    mitigation = _mitigation(alert)
    if mitigation is not None:
        issue["mitigation"] = [mitigation]
    return {key: value for key, value in issue.items() if value != []}


def _patient(alert: Alert) -> dict[str, Any]:
    identifier = {"system": f"{TENANT_SYSTEM}:{alert.tenant_id}", "value": alert.subject_id}
    if FHIR_ID.fullmatch(alert.subject_id) is None:
        return {"identifier": identifier}
    return {"reference": f"Patient/{alert.subject_id}", "identifier": identifier}


def first_raised(
    alerts: Sequence[Alert], found: dict[UUID, datetime] | None = None
) -> dict[UUID, datetime]:
    """When each alert was first raised, among these lifecycle records and the times already
    `found` (updated in place and returned)."""
    found = {} if found is None else found
    for alert in alerts:
        if alert.status is AlertStatus.RAISED:
            known = found.get(alert.alert_id)
            found[alert.alert_id] = (
                alert.occurred_at if known is None else min(known, alert.occurred_at)
            )
    return found


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


def _implicated(alert: Alert) -> list[dict[str, Any]]:
    displays = _displays(alert)
    references = []
    for cause in alert.cause:
        kind, _, claim_id = cause.partition(":")
        if kind in RESOURCE_OF_CLAIM:
            reference = _claim_reference(alert, kind, claim_id)
            display = displays.get(cause)
            references.append(reference | ({"display": display} if display else {}))
    return references


def _claim_reference(alert: Alert, kind: str, claim_id: str) -> dict[str, Any]:
    """A logical reference to one claim of the alert's subject: never `<ResourceType>/<id>`,
    which in a Bundle resolves to one resource whatever subject it belongs to."""
    qualified = claim_id.startswith(QUALIFIED_CLAIMS)
    resource_type = claim_id.partition("/")[0] if qualified else RESOURCE_OF_CLAIM[kind]
    system = claim_system(alert.tenant_id, alert.subject_id, kind)
    return {"type": resource_type, "identifier": {"system": system, "value": claim_id}}


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


def _evidence(alert: Alert, item: Evidence) -> dict[str, Any]:
    detail: dict[str, Any] = {"display": f"{item.description} (UaC event {item.event_id})"}
    kind = CLAIM_OF_ROLE.get(item.role)
    if kind is not None:
        detail = _claim_reference(alert, kind, item.claim_id) | detail
    return {"code": [{"text": item.role}], "detail": [detail]}


def _detail(alert: Alert) -> str:
    detail = f"{alert.title}. {alert.detail}"
    if alert.status is AlertStatus.RESOLVED:
        because = f": {alert.reason}" if alert.reason else "."
        return f"{detail} Resolved at {fhir_instant(alert.occurred_at)}{because}"
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
    identified = first_raised(alerts)
    return {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [
            {
                "fullUrl": f"urn:uuid:{alert.lifecycle_id}",
                "resource": detected_issue(alert, identified.get(alert.alert_id)),
            }
            for alert in alerts
        ],
    }
