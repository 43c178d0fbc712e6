"""Clinical scenarios end to end, without a broker: FHIR files -> adapter -> gate + fold + rules.

Tenant `clinic-a`, actor `fhir-import`, the gate policy of `deploy/config/tenants.json`, the
bundled drug knowledge. The data is the CC0 Synthea 10-patient set and the official FHIR R4
examples (see tests/fixtures/fhir/SOURCE.md).
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from itertools import permutations
from pathlib import Path
from typing import Any

import pytest

from projections.as_of import state_as_of
from projections.document import state_hash
from projections.gate import GateContext
from projections.queries import active_allergies, active_medications
from rules.batch import SubjectResult, Submitted, advance_clocks, replay_batch
from rules.engine import default_rules
from rules.knowledge.bundled import load_bundled_knowledge
from schemas.alerts import Alert, AlertStatus
from schemas.codec import event_codec
from schemas.events import AllergyRecorded, Event, EventType, VerificationStatus
from schemas.fhir.detected_issue import detected_issue
from schemas.fhir.mapping import ImportContext, combine, import_fhir, unpack
from schemas.reasons import ReasonCode
from schemas.severity import Severity
from streams.fhir_files import read_fhir_files
from streams.tenants import load_gate_policy
from tests.factories import make_event

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "fhir"
EXAMPLES = FIXTURES / "fhir-r4-examples"
SYNTHEA = FIXTURES / "synthea-10-patients"
TENANT, ACTOR = "clinic-a", "fhir-import"
FALLBACK = datetime(2025, 9, 17, tzinfo=UTC)
NOW = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = load_gate_policy(ROOT / "deploy" / "config" / "tenants.json")
RULES = default_rules(load_bundled_knowledge())
DRUG_ALLERGY = "drug-allergy-conflict"

ASPIRIN_PATIENT = "cbc86e51-9eca-3855-76ec-c058f72c5761"
IBUPROFEN_ORDER = "f6c2ca05-8fb0-afd9-b3dd-c00a74dce8b9"
SULFA_PATIENT = "a5cb8ce9-cec6-6b23-0990-cbaf753578a4"
SULFA_PATIENT_DRUGS = {
    "fcf60b66-797b-90bb-0542-310a54fb521b": "Amoxicillin 250 MG / Clavulanate 125 MG Oral Tablet",
    "c170b109-9153-50f9-c2ec-198b09534c2e": "Naproxen sodium 220 MG Oral Tablet",
    "b51efbe9-4db5-fc00-3a9e-20e0d55c15ae": "ferrous sulfate 325 MG Oral Tablet",
}


def context_for(item: Submitted, owners: dict[str, str]) -> GateContext:
    return GateContext(now=NOW, policy=POLICY, encoded_size=item.encoded_size, claim_owners=owners)


def fold(submitted: Sequence[Submitted]) -> dict[str, SubjectResult]:
    results = replay_batch(submitted, context_for, RULES)
    rejected = [
        (item.origin, r.detail) for result in results.values() for item, r in result.rejections
    ]
    assert rejected == []
    return results


def submitted_from(
    resources: Sequence[dict[str, Any]], extra: Sequence[Event] = ()
) -> list[Submitted]:
    """Import resources (origins `scenario#<n>`) and append hand-made events."""
    context = ImportContext(tenant_id=TENANT, actor=ACTOR, fallback_time=FALLBACK)
    imported = import_fhir(
        combine(unpack(r, f"scenario#{n}") for n, r in enumerate(resources)), context
    )
    assert imported.errors == []
    codec = event_codec()
    pairs = [*imported.events, *((f"extra#{n}", e) for n, e in enumerate(extra))]
    return [Submitted(origin, event, len(codec.encode(event))) for origin, event in pairs]


def synthea_submitted() -> list[Submitted]:
    submitted, errors, _, _ = read_fhir_files(
        sorted(SYNTHEA.glob("*.ndjson")), tenant_id=TENANT, actor=ACTOR, fallback_time=FALLBACK
    )
    assert errors == []
    return submitted


def example(name: str) -> dict[str, Any]:
    resource: dict[str, Any] = json.loads((EXAMPLES / f"{name}.json").read_text(encoding="utf-8"))
    return resource


def for_patient(resource: dict[str, Any], patient: str, **fields: Any) -> dict[str, Any]:
    """The resource re-pointed at `Patient/<patient>`, with top-level fields replaced."""
    result = copy.deepcopy(resource) | fields
    field = "patient" if result["resourceType"] == "AllergyIntolerance" else "subject"
    result[field] = {"reference": f"Patient/{patient}"}
    return result


def drug_allergy_alerts(result: SubjectResult, prescription_id: str | None = None) -> list[Alert]:
    return [
        alert
        for alert in result.alerts
        if alert.rule_id == DRUG_ALLERGY
        and alert.drug_allergy is not None
        and (prescription_id is None or alert.drug_allergy.prescription_id == prescription_id)
    ]


def subject(results: dict[str, SubjectResult], patient: str) -> SubjectResult:
    return results[f"{TENANT}:{patient}"]


@pytest.fixture(scope="module")
def synthea_results() -> dict[str, SubjectResult]:
    """The folded Synthea set."""
    return replay_batch(synthea_submitted(), context_for, RULES)


# a. NSAID cross-reactivity in Synthea


def test_given_the_synthea_aspirin_allergy_when_ibuprofen_is_prescribed_then_a_critical_nsaid_alert(
    synthea_results: dict[str, SubjectResult],
) -> None:
    result = subject(synthea_results, ASPIRIN_PATIENT)
    assert "Aspirin" in [view.substance for view in active_allergies(result.state)]
    raised = [
        a for a in drug_allergy_alerts(result, IBUPROFEN_ORDER) if a.status is AlertStatus.RAISED
    ]
    assert len(raised) == 1
    (alert,) = raised
    assert alert.drug_allergy is not None
    assert (alert.severity, alert.drug_allergy.allergen, alert.drug_allergy.level) == (
        Severity.CRITICAL,
        "Aspirin",
        "same_class",
    )
    assert alert.drug_allergy.matched == ("ibuprofen",)
    assert "NSAID" in alert.drug_allergy.reason
    assert alert.occurred_at.year == 2018


# b. "sulfa" is not every S


def test_given_the_synthea_sulfamethoxazole_allergy_then_no_alert_for_amoxicillin_naproxen_or_iron(
    synthea_results: dict[str, SubjectResult],
) -> None:
    result = subject(synthea_results, SULFA_PATIENT)
    allergies = [view.substance for view in active_allergies(result.state)]
    assert "Sulfamethoxazole / Trimethoprim" in allergies
    prescribed = {view.prescription_id: view.drug for view in result.state.medication_views()}
    assert {rx: prescribed[rx] for rx in SULFA_PATIENT_DRUGS} == SULFA_PATIENT_DRUGS
    assert drug_allergy_alerts(result) == []


# c. The official penicillin allergy against three antibiotic orders


PENICILLIN = for_patient(example("AllergyIntolerance-medication"), "pat1")
ZOSYN = example("MedicationRequest-medrx0319")
CEFTRIAXONE = for_patient(example("MedicationRequest-medrx0332"), "pat1")
AZITHROMYCIN = example("MedicationRequest-medrx0302")


@pytest.fixture(scope="module")
def penicillin_results() -> SubjectResult:
    results = fold(submitted_from([PENICILLIN, ZOSYN, CEFTRIAXONE, AZITHROMYCIN]))
    return subject(results, "pat1")


def test_given_a_penicillin_g_allergy_then_the_zosyn_order_raises_a_critical_alert(
    penicillin_results: SubjectResult,
) -> None:
    raised = [
        a
        for a in drug_allergy_alerts(penicillin_results, "medrx0319")
        if a.status is AlertStatus.RAISED
    ]
    assert [(a.severity, a.drug_allergy.level if a.drug_allergy else None) for a in raised] == [
        (Severity.CRITICAL, "same_class")
    ]
    assert raised[0].drug_allergy is not None
    assert raised[0].drug_allergy.matched == ("piperacillin",)


def test_given_the_completed_zosyn_order_then_its_alert_is_raised_once_and_resolved(
    penicillin_results: SubjectResult,
) -> None:
    records = drug_allergy_alerts(penicillin_results, "medrx0319")
    assert [a.status for a in records] == [AlertStatus.RAISED, AlertStatus.RESOLVED]
    assert len({a.alert_id for a in records}) == 1


def test_given_a_penicillin_g_allergy_then_ceftriaxone_is_at_most_info(
    penicillin_results: SubjectResult,
) -> None:
    records = drug_allergy_alerts(penicillin_results, "medrx0332")
    assert records
    assert {a.severity for a in records} == {Severity.INFO}
    assert {a.drug_allergy.level for a in records if a.drug_allergy} == {"low_risk"}


def test_given_a_penicillin_g_allergy_then_azithromycin_raises_nothing(
    penicillin_results: SubjectResult,
) -> None:
    assert drug_allergy_alerts(penicillin_results, "medrx0302") == []
    assert "medrx0302" in {v.prescription_id for v in penicillin_results.state.medication_views()}


# d. "No known allergy" is not an allergy


@pytest.mark.parametrize(
    ("statement", "patient"),
    [
        pytest.param(
            "AllergyIntolerance-nka",
            "mom",
            id="given NKA and a Zosyn order then no allergy, no alert",
        ),
        pytest.param(
            "AllergyIntolerance-nkda",
            "mom",
            id="given NKDA and a Zosyn order then no allergy, no alert",
        ),
        pytest.param(
            "AllergyIntolerance-nkla",
            "example",
            id="given NKLA and a Zosyn order then no allergy, no alert",
        ),
    ],
)
def test_no_known_allergy_statements_raise_nothing(statement: str, patient: str) -> None:
    orders = [for_patient(ZOSYN, patient, status="active"), for_patient(AZITHROMYCIN, patient)]
    results = fold(submitted_from([example(statement), *orders]))
    result = subject(results, patient)
    assert [view.negated for view in result.state.allergy_views()] == [True]
    assert active_allergies(result.state) == []
    assert result.alerts == []


@pytest.mark.parametrize(
    ("statement", "allergy", "contradiction"),
    [
        pytest.param("AllergyIntolerance-nkda", PENICILLIN, True, id="NKDA beside penicillin G"),
        pytest.param(
            "AllergyIntolerance-nka",
            for_patient(example("AllergyIntolerance-example"), "pat1"),
            True,
            id="NKA beside the cashew nut allergy",
        ),
        pytest.param("AllergyIntolerance-nkla", PENICILLIN, False, id="NKLA beside penicillin G"),
    ],
)
def test_a_no_known_allergy_statement_beside_an_allergy_it_covers_asks_for_a_correction(
    statement: str, allergy: dict[str, Any], contradiction: bool
) -> None:
    for resources in permutations([for_patient(example(statement), "pat1"), allergy]):
        result = subject(fold(submitted_from(resources)), "pat1")
        listed = [a for a in result.alerts if a.rule_id == "allergy-list-contradiction"]
        assert [(a.status, a.severity) for a in listed] == [
            (AlertStatus.RAISED, Severity.WARNING)
        ] * contradiction
        issues = [detected_issue(alert) for alert in listed]
        assert all(len(issue["implicated"]) == 2 for issue in issues)


# e. A later refutation resolves the alert


ACTIVE_ZOSYN = for_patient(ZOSYN, "pat1", status="active")
REFUTED_AT = "2016-01-01T00:00:00Z"


def _refuted_reimport() -> list[dict[str, Any]]:
    refuted = copy.deepcopy(PENICILLIN) | {
        "verificationStatus": {"coding": [{"code": "refuted"}]},
        "meta": {"lastUpdated": REFUTED_AT},
    }
    return [refuted]


def _status_change() -> list[Event]:
    return [
        make_event(
            "AllergyStatusChanged",
            "penicillin-refuted",
            at=datetime(2016, 1, 1, tzinfo=UTC),
            subject="pat1",
            payload={"allergy_id": "medication", "verification_status": "refuted"},
        )
    ]


@pytest.mark.parametrize(
    ("resources", "extra"),
    [
        pytest.param(
            _refuted_reimport(),
            [],
            id="given a re-import with verificationStatus refuted and a later lastUpdated "
            "then the critical alert is resolved",
        ),
        pytest.param(
            [],
            _status_change(),
            id="given an AllergyStatusChanged to refuted then the critical alert is resolved",
        ),
    ],
)
def test_a_later_refutation_resolves_the_alert(
    resources: list[dict[str, Any]], extra: list[Event]
) -> None:
    result = subject(fold(submitted_from([PENICILLIN, ACTIVE_ZOSYN, *resources], extra)), "pat1")
    records = drug_allergy_alerts(result, "medrx0319")
    assert [(a.status, a.severity) for a in records] == [
        (AlertStatus.RAISED, Severity.CRITICAL),
        (AlertStatus.RESOLVED, Severity.CRITICAL),
    ]
    raised, resolved = records
    assert resolved.alert_id == raised.alert_id
    assert resolved.occurred_at == datetime(2016, 1, 1, tzinfo=UTC)
    assert active_allergies(result.state) == []


def test_given_a_refutation_exported_without_meta_then_one_version_is_refused_in_any_order() -> (
    None
):
    """Same id, same recordedDate, no `meta`: nothing says which version is newer, so one holds
    and the other is refused with a reason that names what would order them; which one does
    not depend on the order of the file."""
    refuted = copy.deepcopy(PENICILLIN) | {"verificationStatus": {"coding": [{"code": "refuted"}]}}
    results = [
        subject(replay_batch(submitted_from(resources), context_for, RULES), "pat1")
        for resources in ([PENICILLIN, ACTIVE_ZOSYN, refuted], [refuted, ACTIVE_ZOSYN, PENICILLIN])
    ]
    for result in results:
        ((_, rejection),) = result.rejections
        assert rejection.reasons == (ReasonCode.EVENT_ID_REUSED,)
        assert "meta.lastUpdated" in rejection.detail
    first, second = results
    assert state_hash(first.state) == state_hash(second.state)
    assert first.alerts == second.alerts


def _versions(allergy_id: str, statuses: list[str], meta: str) -> list[dict[str, Any]]:
    """Versions 1, 2, ... of one allergy with these clinical statuses, carrying their version
    as `meta` says: `versionId` alone, or one `lastUpdated` for all with the versionId, or
    (`history`) only in a history Bundle's entry responses."""
    versions = [
        for_patient(PENICILLIN, "pat1", id=allergy_id)
        | {"clinicalStatus": {"coding": [{"code": status}]}}
        for status in statuses
    ]
    for number, version in enumerate(versions, start=1):
        version.pop("meta", None)
        if meta == "versionId":
            version["meta"] = {"versionId": str(number)}
        if meta == "same lastUpdated":
            version["meta"] = {"versionId": str(number), "lastUpdated": "2016-05-01T10:00:00Z"}
    if meta != "history":
        return versions
    entries = [
        {
            "resource": version,
            "response": {
                "status": "200",
                "etag": f'W/"{number}"',
                "lastModified": f"2016-05-0{number}T10:00:00Z",
            },
        }
        for number, version in enumerate(versions, start=1)
    ]
    return [{"resourceType": "Bundle", "type": "history", "entry": entries[::-1]}]


@pytest.mark.parametrize("meta", ["versionId", "same lastUpdated", "history"])
@pytest.mark.parametrize("newest_first", [False, True], ids=["oldest first", "newest first"])
def test_given_versions_without_distinct_times_then_the_highest_version_holds(
    meta: str, newest_first: bool
) -> None:
    """Which version of an allergy holds must not depend on its id or the order of the file
    when its versions carry no distinct lastUpdated: the version number orders them (in a
    history Bundle, the entries' etags and lastModified times)."""
    for allergy_id in ("a1", "a2", "a3", "a4", "a5", "a6"):
        reactivated = _versions(allergy_id, ["inactive", "active"], meta)
        resolved = _versions(allergy_id, ["active", "resolved"], meta)
        if newest_first:
            reactivated, resolved = reactivated[::-1], resolved[::-1]
        alerting = subject(fold(submitted_from([*reactivated, ACTIVE_ZOSYN])), "pat1")
        assert [a.severity for a in drug_allergy_alerts(alerting)] == [Severity.CRITICAL]
        quiet = subject(fold(submitted_from([*resolved, ACTIVE_ZOSYN])), "pat1")
        assert active_allergies(quiet.state) == []
        last_status = {a.alert_id: a.status for a in drug_allergy_alerts(quiet)}
        assert AlertStatus.RAISED not in last_status.values()


def _penicillin_version(verification: str, **meta: str) -> dict[str, Any]:
    """The penicillin allergy with this verification status and exactly this `meta`."""
    version = {key: value for key, value in PENICILLIN.items() if key != "meta"}
    return version | {"verificationStatus": {"coding": [{"code": verification}]}, "meta": meta}


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param("MTU5NjQ0", "MTYwMDAw", id="given base64 versionIds"),
        pytest.param("abc", "abd", id="given versionIds of letters"),
        pytest.param("1", "b", id="given a number and a versionId that is not one"),
        pytest.param("1000", "1001", id="given numbers past the places numbered versions take"),
        pytest.param("999", "5000", id="given the last place and a number past it"),
    ],
)
@pytest.mark.parametrize("newest_first", [False, True], ids=["in file order", "reversed"])
def test_given_different_versions_that_nothing_orders_then_errors_never_an_arbitrary_pick(
    first: str, second: str, newest_first: bool
) -> None:
    """Confirmed and refuted under versionIds that are not numbers, with no lastUpdated: which
    holds was decided by whichever event id sorted first."""
    versions = [
        _penicillin_version("confirmed", versionId=first),
        _penicillin_version("refuted", versionId=second),
    ]
    if newest_first:
        versions.reverse()
    context = ImportContext(tenant_id=TENANT, actor=ACTOR, fallback_time=FALLBACK)
    imported = import_fhir(
        combine(unpack(r, f"scenario#{n}") for n, r in enumerate(versions)), context
    )
    assert imported.events == []
    assert [error.reason for error in imported.errors] == ["invalid_value", "invalid_value"]
    for error in imported.errors:
        assert error.message.startswith(
            f"AllergyIntolerance/{PENICILLIN['id']}: versions of this record with meta.versionId"
        )
        assert "nothing says which version is newer" in error.message


@pytest.mark.parametrize(
    ("versions", "holds"),
    [
        pytest.param(
            [
                _penicillin_version("refuted", versionId="abd", lastUpdated="2016-05-02T10:00:00Z"),
                _penicillin_version(
                    "confirmed", versionId="abc", lastUpdated="2016-05-01T10:00:00Z"
                ),
            ],
            VerificationStatus.REFUTED,
            id="given versionIds that are not numbers and distinct lastUpdated then the later",
        ),
        pytest.param(
            [
                _penicillin_version("confirmed", versionId="abc"),
                _penicillin_version("confirmed", versionId="abd"),
            ],
            VerificationStatus.CONFIRMED,
            id="given one content under two versionIds that are not numbers then no error",
        ),
    ],
)
def test_given_versions_that_their_times_or_contents_settle_then_no_error(
    versions: list[dict[str, Any]], holds: VerificationStatus
) -> None:
    result = subject(fold(submitted_from(versions)), "pat1")
    [allergy] = result.state.allergy_views()
    assert allergy.verification_status is holds


def _message(sent: str, verification: str) -> dict[str, Any]:
    """A transaction an interface engine sends: the allergy without id or meta, a fresh
    urn:uuid, and a conditional update by its business identifier."""
    allergy = {
        key: value for key, value in PENICILLIN.items() if key not in ("id", "meta", "identifier")
    }
    allergy["identifier"] = [{"system": "urn:hospital:allergy", "value": "123"}]
    allergy["verificationStatus"] = {"coding": [{"code": verification}]}
    entry = {
        "fullUrl": f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, sent)}",
        "resource": allergy,
        "request": {
            "method": "PUT",
            "url": "AllergyIntolerance?identifier=urn:hospital:allergy|123",
        },
    }
    return {"resourceType": "Bundle", "type": "transaction", "timestamp": sent, "entry": [entry]}


@pytest.mark.parametrize("newest_first", [False, True], ids=["oldest first", "newest first"])
def test_given_conditional_updates_with_fresh_uuids_then_one_allergy_and_the_later_message_holds(
    newest_first: bool,
) -> None:
    messages = [
        _message("2021-01-01T00:00:00Z", "confirmed"),
        _message("2022-01-01T00:00:00Z", "entered-in-error"),
    ]
    if newest_first:
        messages.reverse()
    result = subject(fold(submitted_from([*messages, ACTIVE_ZOSYN])), "pat1")
    [allergy] = result.state.allergy_views()
    assert allergy.allergy_id == "urn:hospital:allergy|123"
    assert allergy.verification_status is VerificationStatus.ENTERED_IN_ERROR
    last_status = {a.alert_id: a.status for a in drug_allergy_alerts(result)}
    assert AlertStatus.RAISED not in last_status.values()


@pytest.mark.parametrize("newest_first", [False, True], ids=["oldest first", "newest first"])
def test_given_a_refutation_undone_by_a_newer_version_then_the_alert_is_raised_again(
    newest_first: bool,
) -> None:
    """Three versions of one AllergyIntolerance: confirmed, refuted (2016), confirmed again
    (2017, still dated by its recordedDate). The newest version holds, in any file order."""
    confirmed_again = copy.deepcopy(PENICILLIN) | {
        "verificationStatus": {"coding": [{"code": "confirmed"}]},
        "meta": {"lastUpdated": "2017-01-01T00:00:00Z"},
    }
    versions = [PENICILLIN, *_refuted_reimport(), confirmed_again]
    ordered = versions[::-1] if newest_first else versions
    result = subject(fold(submitted_from([*ordered, ACTIVE_ZOSYN])), "pat1")
    records = drug_allergy_alerts(result, "medrx0319")
    assert records[-1].status is AlertStatus.RAISED
    assert records[-1].severity is Severity.CRITICAL
    assert [view.allergy_id for view in active_allergies(result.state)] == ["medication"]


def test_given_a_zosyn_order_entered_in_error_then_no_alert_is_ever_raised() -> None:
    in_error = for_patient(ZOSYN, "pat1", status="entered-in-error")
    result = subject(fold(submitted_from([PENICILLIN, in_error])), "pat1")
    assert drug_allergy_alerts(result) == []
    assert result.state.medication_views() == []


def test_given_an_active_zosyn_order_later_entered_in_error_then_its_alert_is_resolved() -> None:
    active = ACTIVE_ZOSYN | {"meta": {"versionId": "1", "lastUpdated": "2015-01-15T00:00:00Z"}}
    in_error = for_patient(ZOSYN, "pat1", status="entered-in-error") | {
        "meta": {"versionId": "2", "lastUpdated": "2015-02-01T00:00:00Z"}
    }
    result = subject(fold(submitted_from([PENICILLIN, active, in_error])), "pat1")
    records = drug_allergy_alerts(result, "medrx0319")
    assert [a.status for a in records] == [AlertStatus.RAISED, AlertStatus.RESOLVED]
    assert records[1].occurred_at == datetime(2015, 2, 1, tzinfo=UTC)
    assert [v.stop_reason for v in result.state.medication_views()] == ["entered-in-error"]
    events, before = list(result.state.events.values()), datetime(2015, 1, 20, tzinfo=UTC)
    assert active_medications(state_as_of(events, before)) == []
    as_it_stood = state_as_of(events, before, known_at=before)
    assert [view.prescription_id for view in active_medications(as_it_stood)] == ["medrx0319"]


def test_given_the_zosyn_order_replaced_by_azithromycin_then_its_alert_is_resolved_at_the_change() -> (
    None
):
    replacement = AZITHROMYCIN | {
        "authoredOn": "2015-01-20",
        "priorPrescription": {"reference": "MedicationRequest/medrx0319"},
    }
    result = subject(fold(submitted_from([PENICILLIN, ACTIVE_ZOSYN, replacement])), "pat1")
    records = drug_allergy_alerts(result, "medrx0319")
    assert [a.status for a in records] == [AlertStatus.RAISED, AlertStatus.RESOLVED]
    assert records[1].occurred_at == datetime(2015, 1, 20, tzinfo=UTC)
    assert [view.prescription_id for view in active_medications(result.state)] == ["medrx0302"]


# f. Medication statements (a patient summary's medication list) are checked like orders


AMOXICILLIN_TAKEN = {
    "resourceType": "MedicationStatement",
    "id": "ms-amox",
    "status": "active",
    "medicationCodeableConcept": {"text": "Amoxicillin 500 mg capsule"},
    "subject": {"reference": "Patient/pat1"},
    "effectiveDateTime": "2016-03-01",
}


def test_given_a_penicillin_allergy_and_a_statement_of_amoxicillin_taken_then_a_critical_alert() -> (
    None
):
    result = subject(fold(submitted_from([PENICILLIN, AMOXICILLIN_TAKEN])), "pat1")
    (alert,) = drug_allergy_alerts(result, "MedicationStatement/ms-amox")
    assert alert.drug_allergy is not None
    assert (alert.status, alert.severity, alert.drug_allergy.matched) == (
        AlertStatus.RAISED,
        Severity.CRITICAL,
        ("amoxicillin",),
    )
    issue = detected_issue(alert)
    statement = {
        "type": "MedicationStatement",
        "identifier": {
            "system": f"urn:uac:tenant:{TENANT}:subject:pat1:medication",
            "value": "MedicationStatement/ms-amox",
        },
    }
    implicated = [{k: item[k] for k in ("type", "identifier")} for item in issue["implicated"]]
    assert statement in implicated
    evidence = [{k: d.get(k) for k in statement} for e in issue["evidence"] for d in e["detail"]]
    assert statement in evidence


def test_given_a_statement_of_a_use_planned_after_its_bundle_then_it_is_checked_from_then() -> None:
    """An active statement whose use starts after NOW, with no dateAsserted: dated at its start,
    the gate refused it as occurring in the future (`occurred_in_future`) and the amoxicillin
    was never checked. It is dated at its Bundle's time, as an order with a future start is
    dated when it was written."""
    planned = AMOXICILLIN_TAKEN | {"effectivePeriod": {"start": "2027-06-01"}}
    del planned["effectiveDateTime"]
    document = {
        "resourceType": "Bundle",
        "type": "collection",
        "timestamp": "2016-01-01T00:00:00Z",
        "entry": [{"resource": PENICILLIN}, {"resource": planned}],
    }
    result = subject(fold(submitted_from([document])), "pat1")
    (alert,) = drug_allergy_alerts(result, "MedicationStatement/ms-amox")
    assert (alert.status, alert.severity) == (AlertStatus.RAISED, Severity.CRITICAL)
    (prescribed,) = [
        event
        for event in result.state.events.values()
        if event.source_ref == "MedicationStatement/ms-amox"
    ]
    assert prescribed.occurred_at == datetime(2016, 1, 1, tzinfo=UTC)


def test_given_a_statement_that_the_zosyn_order_was_completed_then_no_duplicate_and_resolved() -> (
    None
):
    statement = {
        "resourceType": "MedicationStatement",
        "id": "ms-zosyn",
        "status": "completed",
        "basedOn": [{"reference": "MedicationRequest/medrx0319"}],
        "medicationCodeableConcept": {"text": "Zosyn 4.5 g"},
        "subject": {"reference": "Patient/pat1"},
        "effectivePeriod": {"start": "2015-01-15", "end": "2015-01-25"},
    }
    result = subject(fold(submitted_from([PENICILLIN, ACTIVE_ZOSYN, statement])), "pat1")
    assert [a.rule_id for a in result.alerts if a.rule_id != DRUG_ALLERGY] == []
    records = drug_allergy_alerts(result, "medrx0319")
    assert [a.status for a in records] == [AlertStatus.RAISED, AlertStatus.RESOLVED]
    assert [v.prescription_id for v in result.state.medication_views()] == ["medrx0319"]


def test_given_the_same_files_imported_twice_then_the_gate_drops_every_repeat() -> None:
    once = submitted_from([PENICILLIN, ZOSYN])
    results = replay_batch([*once, *submitted_from([PENICILLIN, ZOSYN])], context_for, RULES)
    result = subject(results, "pat1")
    assert len(result.rejections) == len(once)
    assert {r.reasons[0].value for _, r in result.rejections} == {"duplicate_event_id"}
    assert len(drug_allergy_alerts(result, "medrx0319")) == 2


# f2. A course still under way that plans its end is not current after it


def _bounded(*ends: str | None) -> dict[str, Any]:
    """An active amoxicillin order from 2016-03-01, one dosage instruction per end (None: a
    dosage with no end)."""
    dosages = [
        {"text": "500 mg three times daily"}
        | (
            {"timing": {"repeat": {"boundsPeriod": {"start": "2016-03-01", "end": end}}}}
            if end
            else {}
        )
        for end in ends
    ]
    return {
        "resourceType": "MedicationRequest",
        "id": "rx-course",
        "status": "active",
        "intent": "order",
        "subject": {"reference": "Patient/pat1"},
        "medicationCodeableConcept": {"text": "Amoxicillin 500 mg capsule"},
        "authoredOn": "2016-03-01",
        "dosageInstruction": dosages,
    }


def _lasting(duration: dict[str, Any]) -> dict[str, Any]:
    """The active amoxicillin order of `_bounded`, its one dosage bounded by a duration."""
    return _bounded(None) | {
        "dosageInstruction": [
            {"text": "500 mg three times daily", "timing": {"repeat": {"boundsDuration": duration}}}
        ]
    }


SEVEN_DAYS = {"value": 7, "unit": "days", "system": "http://unitsofmeasure.org", "code": "d"}


STATEMENT_WITH_END = AMOXICILLIN_TAKEN | {
    "effectiveDateTime": None,
    "effectivePeriod": {"start": "2016-03-01", "end": "2016-03-08"},
}


def _judged_at(resource: dict[str, Any], moment: datetime) -> SubjectResult:
    """The course beside the penicillin allergy, its subject's time then moved to `moment` as
    the worker's clock (or `uac replay --as-of`) does."""
    results = fold(submitted_from([PENICILLIN, resource]))
    advance_clocks(results, moment, context_for, RULES)
    return subject(results, "pat1")


DURING = datetime(2016, 3, 5, tzinfo=UTC)
AFTER = datetime(2016, 4, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("resource", "prescription_id", "moment", "statuses"),
    [
        pytest.param(_bounded("2016-03-08"), "rx-course", DURING, ["raised"], id="during"),
        pytest.param(
            _bounded("2016-03-08"), "rx-course", AFTER, ["raised", "resolved"], id="after its end"
        ),
        pytest.param(
            _bounded("2016-03-04", "2016-03-08"),
            "rx-course",
            DURING,
            ["raised"],
            id="before the latest of its dosage ends",
        ),
        pytest.param(
            _bounded("2016-03-08", None),
            "rx-course",
            AFTER,
            ["raised"],
            id="one dosage without an end goes on",
        ),
        pytest.param(_bounded(), "rx-course", AFTER, ["raised"], id="no dosage bounds"),
        pytest.param(
            _lasting(SEVEN_DAYS), "rx-course", DURING, ["raised"], id="during its 7-day duration"
        ),
        pytest.param(
            _lasting(SEVEN_DAYS),
            "rx-course",
            datetime(2016, 3, 8, tzinfo=UTC),
            ["raised", "resolved"],
            id="7 days after the order for a 7-day duration",
        ),
        pytest.param(
            _lasting({"value": 2, "unit": "weeks"}),
            "rx-course",
            datetime(2016, 3, 15, tzinfo=UTC),
            ["raised", "resolved"],
            id="a 2-week duration in unit text, at its end",
        ),
        pytest.param(
            STATEMENT_WITH_END,
            "MedicationStatement/ms-amox",
            AFTER,
            ["raised", "resolved"],
            id="an active statement after its effective period",
        ),
    ],
)
def test_given_an_active_course_with_a_planned_end_then_its_alert_is_resolved_only_after_it(
    resource: dict[str, Any], prescription_id: str, moment: datetime, statuses: list[str]
) -> None:
    result = _judged_at(resource, moment)
    records = drug_allergy_alerts(result, prescription_id)
    assert [a.status.value for a in records] == statuses
    assert len({a.alert_id for a in records}) == 1
    still_active = prescription_id in {m.prescription_id for m in active_medications(result.state)}
    assert still_active == (statuses == ["raised"])


def _recorded_on(day: str) -> dict[str, Any]:
    """The penicillin allergy, recorded (and known) from `day` only."""
    return PENICILLIN | {"recordedDate": day, "onsetDateTime": day}


def _statement_ending(end: str) -> dict[str, Any]:
    return STATEMENT_WITH_END | {"effectivePeriod": {"start": "2016-03-01", "end": end}}


@pytest.mark.parametrize(
    ("course", "prescription_id", "recorded", "over"),
    [
        pytest.param(
            _bounded("2016-03-08"),
            "rx-course",
            "2016-03-08T20:00:00Z",
            datetime(2016, 3, 9, tzinfo=UTC),
            id="given bounds ending on a day and an allergy recorded that evening then an alert",
        ),
        pytest.param(
            _bounded("2016-03"),
            "rx-course",
            "2016-03-20",
            datetime(2016, 4, 1, tzinfo=UTC),
            id="given bounds ending in a month and an allergy recorded in it then an alert",
        ),
        pytest.param(
            _bounded("2016"),
            "rx-course",
            "2016-12-31",
            datetime(2017, 1, 1, tzinfo=UTC),
            id="given bounds ending in a year and an allergy recorded on its last day then an alert",
        ),
        pytest.param(
            _statement_ending("2016-03"),
            "MedicationStatement/ms-amox",
            "2016-03-20",
            datetime(2016, 4, 1, tzinfo=UTC),
            id="given a statement taken until a month and an allergy recorded in it then an alert",
        ),
    ],
)
def test_given_a_course_ending_on_a_date_then_it_runs_through_that_whole_day_month_or_year(
    course: dict[str, Any], prescription_id: str, recorded: str, over: datetime
) -> None:
    """FHIR: a Period.end of reduced precision includes the whole day, month or year it names;
    read as its first instant, a course until March was over on March 1."""
    results = fold(submitted_from([_recorded_on(recorded), course]))
    advance_clocks(results, over - timedelta(seconds=1), context_for, RULES)
    records = drug_allergy_alerts(subject(results, "pat1"), prescription_id)
    assert [a.status.value for a in records] == ["raised"]
    advance_clocks(results, over, context_for, RULES)
    records = drug_allergy_alerts(subject(results, "pat1"), prescription_id)
    assert [a.status.value for a in records] == ["raised", "resolved"]


def test_given_a_planned_end_that_cannot_be_read_then_the_course_is_open_ended_and_reported() -> (
    None
):
    unreadable = _bounded("2016-03-08")
    unreadable["dosageInstruction"][0]["timing"]["repeat"]["boundsPeriod"]["end"] = "next week"
    context = ImportContext(tenant_id=TENANT, actor=ACTOR, fallback_time=FALLBACK)
    imported = import_fhir(unpack(unreadable, "scenario#0"), context)
    assert imported.errors == []
    (prescribed,) = [event for _, event in imported.events]
    assert prescribed.valid_until is None
    assert [part.message for part in imported.passed_over] == [
        "MedicationRequest/rx-course: dosageInstruction[0].timing.repeat.boundsPeriod.end"
        " 'next week' is not a FHIR date or dateTime (imported without it)"
    ]
    assert drug_allergy_alerts(_judged_at(unreadable, AFTER), "rx-course")[-1].status.value == (
        "raised"
    )


SEVEN_DAYS_FROM_MARCH_1 = {
    "dosageInstruction": [
        {
            "timing": {
                "repeat": {"boundsPeriod": {"start": "2016-03-01"}, "boundsDuration": SEVEN_DAYS}
            }
        }
    ]
}


def _ordered_after_its_bounds(order: dict[str, Any]) -> dict[str, Any]:
    """The order, written a year after the bounds of its dosage (a year typed wrong)."""
    return order | {"authoredOn": "2017-03-01"}


@pytest.mark.parametrize(
    ("course", "prescription_id", "passed_over"),
    [
        pytest.param(
            _ordered_after_its_bounds(_bounded("2016-03-08")),
            "rx-course",
            "MedicationRequest/rx-course: dosageInstruction[0].timing.repeat.boundsPeriod.end "
            "ends the course at 2016-03-09T00:00:00+00:00, not after it starts "
            "(2017-03-01T00:00:00+00:00)",
            id="given bounds ending before the order then reported and open-ended",
        ),
        pytest.param(
            _ordered_after_its_bounds(_bounded(None) | SEVEN_DAYS_FROM_MARCH_1),
            "rx-course",
            "MedicationRequest/rx-course: dosageInstruction[0].timing.repeat.boundsDuration "
            "ends the course at 2016-03-08T00:00:00+00:00, not after it starts "
            "(2017-03-01T00:00:00+00:00)",
            id="given a duration from a start before the order then reported and open-ended",
        ),
        pytest.param(
            AMOXICILLIN_TAKEN
            | {
                "effectiveDateTime": None,
                "effectivePeriod": {"end": "2016-02-10"},
                "dateAsserted": "2016-03-01",
            },
            "MedicationStatement/ms-amox",
            "MedicationStatement/ms-amox: effectivePeriod.end ends the course at "
            "2016-02-11T00:00:00+00:00, not after it starts (2016-03-01T00:00:00+00:00)",
            id="given a statement taken until before it began then reported and open-ended",
        ),
    ],
)
def test_given_a_planned_end_before_the_course_starts_then_it_stays_checked_and_is_reported(
    course: dict[str, Any], prescription_id: str, passed_over: str
) -> None:
    """An end before the start ends nothing: left out silently, the course ran for ever
    without a word; now it is reported, and the course is checked until it is stopped (the
    safe reading: its alerts stay open rather than end before it began)."""
    context = ImportContext(tenant_id=TENANT, actor=ACTOR, fallback_time=FALLBACK)
    imported = import_fhir(unpack(course, "scenario#0"), context)
    assert imported.errors == []
    (prescribed,) = [event for _, event in imported.events]
    assert prescribed.valid_until is None
    assert [part.message for part in imported.passed_over] == [
        f"{passed_over}: it is checked until it is stopped (imported without it)"
    ]
    later = datetime(2018, 1, 1, tzinfo=UTC)
    records = drug_allergy_alerts(_judged_at(course, later), prescription_id)
    assert [a.status.value for a in records] == ["raised"]


@pytest.mark.parametrize(
    ("duration", "problem"),
    [
        pytest.param(
            {"value": 7, "unit": "tablets"},
            "boundsDuration.code 'tablets' is not a unit of time (s, min, h, d, wk, mo, a)",
            id="given a unit that is not a time",
        ),
        pytest.param(
            {"value": 9000, "code": "a"},
            "boundsDuration ends after the year 9999",
            id="given a duration that ends after the calendar",
        ),
    ],
)
def test_given_a_duration_that_cannot_be_read_then_the_course_is_open_ended_and_reported(
    duration: dict[str, Any], problem: str
) -> None:
    context = ImportContext(tenant_id=TENANT, actor=ACTOR, fallback_time=FALLBACK)
    imported = import_fhir(unpack(_lasting(duration), "s#0"), context)
    (prescribed,) = [event for _, event in imported.events]
    assert (imported.errors, prescribed.valid_until) == ([], None)
    assert [part.message for part in imported.passed_over] == [
        f"MedicationRequest/rx-course: dosageInstruction[0].timing.repeat.{problem}"
        " (imported without it)"
    ]


def test_given_a_completed_order_with_a_duration_then_stopped_when_the_duration_ends() -> None:
    completed = _lasting(SEVEN_DAYS) | {"status": "completed"}
    result = subject(fold(submitted_from([PENICILLIN, completed])), "pat1")
    records = drug_allergy_alerts(result, "rx-course")
    assert [(a.status.value, a.occurred_at) for a in records] == [
        ("raised", datetime(2016, 3, 1, tzinfo=UTC)),
        ("resolved", datetime(2016, 3, 8, tzinfo=UTC)),
    ]


# g. Drugs given: administrations, dispenses and vaccinations


def test_given_an_administration_and_a_dispense_of_the_zosyn_order_then_one_alert_no_duplicate() -> (
    None
):
    piperacillin = {"text": "piperacillin 4 g / tazobactam 0.5 g injection"}
    given = for_patient(
        example("MedicationAdministration-medadmin0304"),
        "pat1",
        medicationCodeableConcept=piperacillin,
    )
    del given["medicationReference"]
    dispensed = for_patient(example("MedicationDispense-meddisp0304"), "pat1")
    result = subject(fold(submitted_from([PENICILLIN, ACTIVE_ZOSYN, given, dispensed])), "pat1")
    assert [a.rule_id for a in result.alerts if a.rule_id != DRUG_ALLERGY] == []
    records = drug_allergy_alerts(result, "medrx0319")
    assert len({a.alert_id for a in records}) == 1
    assert [a.status for a in records if a.status is AlertStatus.RAISED] == [AlertStatus.RAISED]
    assert [v.prescription_id for v in result.state.medication_views()] == ["medrx0319"]


def test_given_an_amoxicillin_dose_given_without_an_order_then_a_critical_alert_checked_once() -> (
    None
):
    dose = {
        "resourceType": "MedicationAdministration",
        "id": "adm-amox",
        "status": "completed",
        "medicationCodeableConcept": {"text": "Amoxicillin 500 mg capsule"},
        "subject": {"reference": "Patient/pat1"},
        "effectiveDateTime": "2016-03-01T08:00:00Z",
    }
    result = subject(fold(submitted_from([PENICILLIN, dose])), "pat1")
    records = drug_allergy_alerts(result, "MedicationAdministration/adm-amox")
    assert [(a.status, a.severity) for a in records] == [
        (AlertStatus.RAISED, Severity.CRITICAL),
        (AlertStatus.RESOLVED, Severity.CRITICAL),
    ]
    implicated = detected_issue(records[0])["implicated"]
    assert ("MedicationAdministration", "MedicationAdministration/adm-amox") in [
        (item["type"], item["identifier"]["value"]) for item in implicated
    ]


GELATIN = {
    "resourceType": "AllergyIntolerance",
    "id": "gelatin-1",
    "clinicalStatus": {"coding": [{"code": "active"}]},
    "verificationStatus": {"coding": [{"code": "confirmed"}]},
    "type": "allergy",
    "category": ["food"],
    "code": {"text": "Gelatin"},
    "patient": {"reference": "Patient/child-1"},
    "recordedDate": "2019-05-01",
}


def vaccination(identifier: str, cvx: str, display: str, when: str) -> dict[str, Any]:
    return {
        "resourceType": "Immunization",
        "id": identifier,
        "status": "completed",
        "vaccineCode": {
            "coding": [{"system": "http://hl7.org/fhir/sid/cvx", "code": cvx, "display": display}],
            "text": display,
        },
        "patient": {"reference": "Patient/child-1"},
        "occurrenceDateTime": when,
    }


def test_given_a_gelatin_allergy_then_a_varicella_vaccination_alerts_and_a_flu_shot_does_not() -> (
    None
):
    varicella = vaccination("imm-var", "21", "varicella", "2020-02-01T09:00:00Z")
    flu = vaccination("imm-flu", "140", "Influenza, seasonal, injectable", "2020-10-01T09:00:00Z")
    result = subject(fold(submitted_from([GELATIN, varicella, flu])), "child-1")
    alerts = drug_allergy_alerts(result)
    assert [(a.status, a.drug_allergy.level if a.drug_allergy else None) for a in alerts] == [
        (AlertStatus.RAISED, "partial"),
        (AlertStatus.RESOLVED, "partial"),
    ]
    assert {a.drug_allergy.prescription_id for a in alerts if a.drug_allergy} == {
        "Immunization/imm-var"
    }
    implicated = detected_issue(alerts[0])["implicated"]
    assert [(item["type"], item["identifier"]["value"]) for item in implicated] == [
        ("AllergyIntolerance", "gelatin-1"),
        ("Immunization", "Immunization/imm-var"),
    ]


# Files read together form one input set


@pytest.mark.parametrize(
    ("names", "errors", "drugs"),
    [
        pytest.param(
            ["MedicationRequest-medrx002.json", "Medication-med0316.json"],
            [],
            ["Chlorthalidone 50mg tablet (product)"],
            id="given a request and its Medication in two files when read together then resolved",
        ),
        pytest.param(
            ["MedicationRequest-medrx002.json"],
            [("MedicationRequest-medrx002.json", "unresolved_reference")],
            [],
            id="given the request alone then an error with the file as origin, no prescription",
        ),
    ],
)
def test_fhir_files_resolve_references_across_files(
    names: list[str], errors: list[tuple[str, str]], drugs: list[str]
) -> None:
    submitted, line_errors, _, _ = read_fhir_files(
        [EXAMPLES / name for name in names], tenant_id=TENANT, actor=ACTOR, fallback_time=FALLBACK
    )
    assert [(e.origin, e.reason) for e in line_errors] == errors
    assert [getattr(item.event.payload, "drug", None) for item in submitted] == drugs
    assert all(item.encoded_size > 0 for item in submitted)


def test_given_a_line_that_is_not_utf8_when_read_then_an_error_naming_it_and_the_rest_is_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "export.ndjson"
    allergy = json.dumps(PENICILLIN).encode()
    path.write_bytes(b'{"resourceType": "Patient", "id": "p\xff"}\n' + allergy + b"\n")
    submitted, errors, _, _ = read_fhir_files(
        [path], tenant_id=TENANT, actor=ACTOR, fallback_time=FALLBACK
    )
    assert [(e.origin, e.reason) for e in errors] == [("export.ndjson:1", "malformed_json")]
    assert [item.event.type for item in submitted] == [EventType.ALLERGY_RECORDED]


def test_given_a_bundle_saved_with_a_byte_order_mark_then_it_is_read_as_without(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bundle.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(PENICILLIN).encode())
    submitted, errors, _, _ = read_fhir_files(
        [path], tenant_id=TENANT, actor=ACTOR, fallback_time=FALLBACK
    )
    assert errors == []
    assert [item.event.type for item in submitted] == [EventType.ALLERGY_RECORDED]


@pytest.mark.parametrize(
    ("note", "kind"),
    [
        ("Reaction report filed under reference 4111 1111 1111 1111.", "a payment card number"),
        ("Portal password: Tr0ub4dor&3 (given by the patient)", "a credential assignment"),
    ],
)
def test_given_an_allergy_note_that_looks_like_it_holds_a_secret_then_the_allergy_still_alerts(
    tmp_path: Path, note: str, kind: str
) -> None:
    """The gate refuses a whole event with a secret anywhere in it; a secret-looking note must
    not cost the allergy itself. The note is withheld (a marker stays), and it is reported."""
    allergy = PENICILLIN | {"note": [{"text": "Hives."}, {"text": note}]}
    path = tmp_path / "export.ndjson"
    path.write_text(f"{json.dumps(allergy)}\n{json.dumps(for_patient(ZOSYN, 'pat1'))}\n")
    submitted, errors, _, withheld = read_fhir_files(
        [path], tenant_id=TENANT, actor=ACTOR, fallback_time=FALLBACK
    )
    assert errors == []
    result = subject(fold(submitted), "pat1")
    assert result.rejections == []
    assert [a.severity for a in drug_allergy_alerts(result, "medrx0319")][:1] == [Severity.CRITICAL]
    [notice] = withheld
    assert notice.origin == "export.ndjson:1"
    assert notice.source_ref == f"AllergyIntolerance/{PENICILLIN['id']}"
    assert kind in notice.message()
    recorded = next(item.event for item in submitted if item.event.source_ref == notice.source_ref)
    assert isinstance(recorded.payload, AllergyRecorded)
    assert recorded.payload.note == f"[note withheld at import: it looked like it held {kind}]"


@pytest.mark.parametrize(
    "letter", ["Discharge letter: hives after the first dose. ", "青霉素过敏。皮疹。"]
)
def test_given_an_allergy_note_too_large_for_an_event_then_the_allergy_alerts_with_its_start(
    tmp_path: Path, letter: str
) -> None:
    """The gate refuses an event over the size limit; a letter pasted into the note must not
    cost the allergy. The start of the note is kept, the cut is marked and reported."""
    note = (letter * (70_000 // len(letter.encode()))).rstrip()
    allergy = PENICILLIN | {"note": [{"text": note}]}
    path = tmp_path / "export.ndjson"
    path.write_text(
        f"{json.dumps(allergy)}\n{json.dumps(for_patient(ZOSYN, 'pat1'))}\n", encoding="utf-8"
    )
    submitted, errors, _, notes = read_fhir_files(
        [path], tenant_id=TENANT, actor=ACTOR, fallback_time=FALLBACK
    )
    assert errors == []
    result = subject(fold(submitted), "pat1")
    assert result.rejections == []
    assert [a.severity for a in drug_allergy_alerts(result, "medrx0319")][:1] == [Severity.CRITICAL]
    [notice] = notes
    assert notice.source_ref == f"AllergyIntolerance/{PENICILLIN['id']}"
    assert "shortened" in notice.message()
    recorded = next(item for item in submitted if item.event.source_ref == notice.source_ref)
    assert 64_000 < recorded.encoded_size <= POLICY.max_event_bytes == 64 * 1024
    assert isinstance(recorded.event.payload, AllergyRecorded)
    kept, marker = str(recorded.event.payload.note).rsplit(" [", 1)
    assert note.startswith(kept)
    assert f"{len(note) - len(kept):,} of its {len(note):,} characters dropped" in marker


def test_given_json_nested_deeper_than_the_reader_takes_then_an_error_not_a_crash(
    tmp_path: Path,
) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    submitted, errors, _, _ = read_fhir_files(
        [path], tenant_id=TENANT, actor=ACTOR, fallback_time=FALLBACK
    )
    assert submitted == []
    assert [(e.origin, e.reason) for e in errors] == [("deep.json", "malformed_json")]


# h. Coded agents: a Medication known by its ingredients' codes, an allergy by its reaction's

RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"


def test_given_a_local_medication_code_with_rxnorm_coded_ingredients_then_a_critical_alert() -> (
    None
):
    ingredients = [
        {"itemCodeableConcept": {"coding": [{"system": RXNORM, "code": code}]}}
        for code in ("8339", "37617")
    ]
    medication = {
        "resourceType": "Medication",
        "id": "formulary-pt45",
        "code": {"coding": [{"system": "http://hospital.example/formulary", "code": "PT45"}]},
        "ingredient": ingredients,
    }
    order = ACTIVE_ZOSYN | {"contained": [medication]}
    order["medicationReference"] = {"reference": "#formulary-pt45"}
    result = subject(fold(submitted_from([PENICILLIN, order])), "pat1")
    [alert] = drug_allergy_alerts(result, "medrx0319")
    assert alert.drug_allergy is not None
    assert (alert.severity, alert.drug_allergy.level) == (Severity.CRITICAL, "same_class")
    assert alert.drug_allergy.matched == ("piperacillin",)


AMOXICILLIN_CODE = {"coding": [{"system": RXNORM, "code": "723", "display": "Amoxicillin"}]}
SALINE_BAG = "Sodium chloride 0.9% 100 mL infusion"


def _admixture(ingredient: object, *contained: dict[str, Any]) -> dict[str, Any]:
    """A bag of saline with one more ingredient (`Medication/bag`), holding `contained`."""
    return {
        "resourceType": "Medication",
        "id": "bag",
        "code": {"text": SALINE_BAG},
        "contained": list(contained),
        "ingredient": [ingredient, {"itemCodeableConcept": {"text": "sodium chloride"}}],
    }


def _order_of(medication: str, *contained: dict[str, Any]) -> dict[str, Any]:
    return ACTIVE_ZOSYN | {
        "contained": list(contained),
        "medicationReference": {"reference": medication},
    }


ABX_MEDICATION = {"resourceType": "Medication", "id": "abx", "code": AMOXICILLIN_CODE}
ABX_SUBSTANCE = {"resourceType": "Substance", "id": "abx", "code": AMOXICILLIN_CODE}


@pytest.mark.parametrize(
    "resources",
    [
        pytest.param(
            [_admixture({"itemReference": {"reference": "#abx"}}, ABX_MEDICATION)],
            id="given an ingredient that is a Medication the Medication contains",
        ),
        pytest.param(
            [_admixture({"itemReference": {"reference": "#abx"}}, ABX_SUBSTANCE)],
            id="given an ingredient that is a Substance the Medication contains",
        ),
        pytest.param(
            [_admixture({"itemReference": {"reference": "Substance/abx"}}), ABX_SUBSTANCE],
            id="given an ingredient that is a Substance of the input set",
        ),
        pytest.param(
            [_admixture({"item": {"concept": AMOXICILLIN_CODE}})],
            id="given an R5 ingredient item.concept",
        ),
        pytest.param(
            [_admixture({"item": {"reference": {"reference": "Medication/abx"}}}), ABX_MEDICATION],
            id="given an R5 ingredient item.reference to a Medication of the input set",
        ),
    ],
)
def test_given_an_admixture_whose_ingredient_is_a_penicillin_then_a_critical_alert(
    resources: list[dict[str, Any]],
) -> None:
    """An antibiotic added to a bag of saline, named by reference or in R5's form: dropped,
    the bag was judged as saline alone and raised nothing."""
    order = _order_of("Medication/bag")
    result = subject(fold(submitted_from([PENICILLIN, *resources, order])), "pat1")
    [alert] = drug_allergy_alerts(result, "medrx0319")
    assert alert.drug_allergy is not None
    assert (alert.severity, alert.drug_allergy.level) == (Severity.CRITICAL, "same_class")


def test_given_a_contained_admixture_whose_ingredient_is_contained_beside_it_then_an_alert() -> (
    None
):
    bag = _admixture({"itemReference": {"reference": "#abx"}})
    order = _order_of("#bag", bag | {"contained": []}, ABX_MEDICATION)
    result = subject(fold(submitted_from([PENICILLIN, order])), "pat1")
    [alert] = drug_allergy_alerts(result, "medrx0319")
    assert alert.severity is Severity.CRITICAL


@pytest.mark.parametrize(
    ("ingredient", "passed_over"),
    [
        pytest.param(
            {"itemReference": {"reference": "Medication/gone"}},
            "ingredient[0].itemReference Medication/gone is not a Medication or Substance "
            "among the imported resources",
            id="given an ingredient reference the input set does not hold",
        ),
        pytest.param(
            {"item": {"reference": {"reference": "#gone"}}},
            "ingredient[0].item.reference #gone is not a Medication or Substance contained",
            id="given an R5 ingredient reference to nothing contained",
        ),
        pytest.param(
            {"itemCodeableConcept": "amoxicillin"},
            "ingredient[0].itemCodeableConcept is not a JSON object",
            id="given an ingredient concept that is not an object",
        ),
        pytest.param(
            {"item": {}},
            "ingredient[0] has no item (itemCodeableConcept or itemReference)",
            id="given an R5 ingredient item that names nothing",
        ),
        pytest.param(
            "amoxicillin",
            "ingredient[0] is not a JSON object",
            id="given an ingredient that is not an object",
        ),
    ],
)
def test_given_an_ingredient_that_cannot_be_resolved_then_reported_and_judged_unverified(
    ingredient: object, passed_over: str
) -> None:
    """Never "no conflict" for want of what the bag holds: the drug cannot be verified."""
    resources = [PENICILLIN, _admixture(ingredient), _order_of("Medication/bag")]
    context = ImportContext(tenant_id=TENANT, actor=ACTOR, fallback_time=FALLBACK)
    imported = import_fhir(
        combine(unpack(r, f"scenario#{n}") for n, r in enumerate(resources)), context
    )
    assert [part.message for part in imported.passed_over] == [
        f"MedicationRequest/medrx0319: the Medication Medication/bag: {passed_over}: what the "
        "ingredient is cannot be checked (imported without it)"
    ]
    result = subject(fold(submitted_from(resources)), "pat1")
    [alert] = drug_allergy_alerts(result, "medrx0319")
    assert alert.drug_allergy is not None
    assert (alert.severity, alert.drug_allergy.level) == (Severity.WARNING, "unverified")
    assert alert.drug_allergy.drug == f"{SALINE_BAG} (ingredient not resolved)"


def test_given_a_general_allergy_code_whose_reaction_names_the_agent_then_a_critical_alert() -> (
    None
):
    drug_allergy = PENICILLIN | {
        "code": {
            "coding": [{"system": "http://snomed.info/sct", "code": "416098002"}],
            "text": "Drug allergy",
        },
        "reaction": [
            {
                "substance": {"coding": [{"system": RXNORM, "code": "7980"}]},
                "manifestation": [{"text": "Hives"}],
            }
        ],
    }
    result = subject(fold(submitted_from([drug_allergy, ACTIVE_ZOSYN])), "pat1")
    [alert] = drug_allergy_alerts(result, "medrx0319")
    assert alert.drug_allergy is not None
    assert (alert.severity, alert.drug_allergy.level) == (Severity.CRITICAL, "same_class")


# i. The whole Synthea set


def test_given_the_whole_synthea_set_when_imported_then_no_errors_and_every_skip_explained() -> (
    None
):
    submitted, errors, skipped, notes = read_fhir_files(
        sorted(SYNTHEA.glob("*.ndjson")), tenant_id=TENANT, actor=ACTOR, fallback_time=FALLBACK
    )
    assert errors == []
    assert notes == []
    counts: dict[str, int] = {}
    for skip in skipped:
        assert skip.origin
        assert skip.resource_id
        counts[skip.reason] = counts.get(skip.reason, 0) + 1
    assert counts == {
        "unsupported resource type Encounter": 1215,
        "unsupported resource type Condition": 555,
    }
    by_type: dict[EventType, int] = {}
    for item in submitted:
        by_type[item.event.type] = by_type.get(item.event.type, 0) + 1
    assert by_type == {
        EventType.ALLERGY_RECORDED: 11,
        EventType.MEDICATION_PRESCRIBED: 1745 + 161,
        EventType.MEDICATION_STOPPED: 1722 + 161,
        EventType.FACT_ASSERTED: 13,
    }
    assert len({item.event.event_id for item in submitted}) == len(submitted)


def test_given_the_whole_synthea_set_when_folded_then_the_gate_rejects_nothing(
    synthea_results: dict[str, SubjectResult],
) -> None:
    rejected = [item.origin for result in synthea_results.values() for item, _ in result.rejections]
    assert rejected == []


def test_given_the_whole_synthea_set_then_the_only_drug_allergy_alerts_are_the_aspirin_patients(
    synthea_results: dict[str, SubjectResult],
) -> None:
    alerting = {
        (key, a.drug_allergy.drug, a.severity, a.status)
        for key, result in synthea_results.items()
        for a in drug_allergy_alerts(result)
        if a.drug_allergy is not None
    }
    key = f"{TENANT}:{ASPIRIN_PATIENT}"
    assert alerting == {
        (key, "Ibuprofen 200 MG Oral Tablet", Severity.CRITICAL, AlertStatus.RAISED),
        (key, "Ibuprofen 200 MG Oral Tablet", Severity.CRITICAL, AlertStatus.RESOLVED),
        (key, "Acetaminophen 325 MG Oral Tablet", Severity.INFO, AlertStatus.RAISED),
        (key, "Acetaminophen 325 MG Oral Tablet", Severity.INFO, AlertStatus.RESOLVED),
    }


def _bundled(sent: str, *resources: dict[str, Any]) -> dict[str, Any]:
    """A collection Bundle sent at `sent` holding `resources` without their `meta`."""
    entries = [{"resource": {k: v for k, v in r.items() if k != "meta"}} for r in resources]
    return {"resourceType": "Bundle", "type": "collection", "timestamp": sent, "entry": entries}


@pytest.mark.parametrize("status", ["resolved", "inactive"])
def test_given_a_later_bundle_says_the_allergy_no_longer_holds_then_the_alert_resolves_at_its_time(
    status: str,
) -> None:
    """Versions without meta: the Bundle's time dates the change, not the allergy's
    recordedDate (when it was first recorded), which would resolve the alert before it was
    raised and leave the allergy inactive while the drug was given."""
    no_longer = copy.deepcopy(PENICILLIN) | {"clinicalStatus": {"coding": [{"code": status}]}}
    bundles = [
        _bundled("2014-06-01T00:00:00Z", PENICILLIN),
        _bundled("2015-02-01T00:00:00Z", ACTIVE_ZOSYN),
        _bundled("2016-06-01T00:00:00Z", no_longer),
    ]
    result = subject(fold(submitted_from(bundles)), "pat1")
    records = drug_allergy_alerts(result, "medrx0319")
    assert [(a.status, a.occurred_at) for a in records] == [
        (AlertStatus.RAISED, datetime(2015, 1, 15, tzinfo=UTC)),
        (AlertStatus.RESOLVED, datetime(2016, 6, 1, tzinfo=UTC)),
    ]


def _imported(resources: Sequence[dict[str, Any]]) -> Any:
    context = ImportContext(tenant_id=TENANT, actor=ACTOR, fallback_time=FALLBACK)
    return import_fhir(
        combine(unpack(r, f"scenario#{n}") for n, r in enumerate(resources)), context
    )


@pytest.mark.parametrize("newest_first", [False, True], ids=["in file order", "reversed"])
def test_given_two_records_under_one_id_and_versionid_then_both_are_errors_whatever_their_times(
    newest_first: bool,
) -> None:
    """Bulk NDJSON of two sources names no server: their AllergyIntolerance/1 under versionId
    1 are two records, not versions (a server gives each change a new versionId), so the later
    lastUpdated must not replace the other's patient or status."""
    elsewhere = for_patient(PENICILLIN, "pat2", code={"text": "latex"})
    versions = [
        PENICILLIN | {"meta": {"versionId": "1", "lastUpdated": "2016-01-10T00:00:00Z"}},
        elsewhere | {"meta": {"versionId": "1", "lastUpdated": "2016-01-20T00:00:00Z"}},
    ]
    imported = _imported(versions[::-1] if newest_first else versions)
    assert imported.events == []
    assert [error.reason for error in imported.errors] == ["invalid_value", "invalid_value"]
    assert all("different records under one meta.versionId" in e.message for e in imported.errors)


def test_given_one_version_exported_twice_with_other_times_then_it_is_imported_once() -> None:
    """Two answers of one server: the later lastUpdated, and the narrative left out of one."""
    narrative = {"status": "generated", "div": "<div>Penicillin G allergy</div>"}
    versions = [
        PENICILLIN | {"meta": {"versionId": "1", "lastUpdated": "2016-01-10T00:00:00Z"}},
        {k: v for k, v in PENICILLIN.items() if k != "text"}
        | {"meta": {"versionId": "1", "lastUpdated": "2016-01-20T00:00:00Z"}, "text": narrative},
    ]
    imported = _imported(versions)
    assert imported.errors == []
    assert {event.payload.allergy_id for _, event in imported.events} == {PENICILLIN["id"]}


def test_given_two_medications_under_one_id_and_versionid_then_the_orders_naming_it_are_errors() -> (
    None
):
    def medication(code: str, display: str, updated: str) -> dict[str, Any]:
        coding = {"system": "http://www.nlm.nih.gov/research/umls/rxnorm", "code": code}
        return {
            "resourceType": "Medication",
            "id": "1",
            "meta": {"versionId": "1", "lastUpdated": updated},
            "code": {"coding": [coding | {"display": display}]},
        }

    order = for_patient(ACTIVE_ZOSYN, "pat1", medicationReference={"reference": "Medication/1"})
    order.pop("medicationCodeableConcept", None)
    order.pop("contained", None)
    imported = _imported(
        [
            medication("723", "amoxicillin", "2016-01-01T00:00:00Z"),
            medication("5640", "ibuprofen", "2016-01-05T00:00:00Z"),
            order,
        ]
    )
    prescribed = [e for _, e in imported.events if e.type is EventType.MEDICATION_PRESCRIBED]
    assert prescribed == []
    [error] = [e for e in imported.errors if "Medication/1" in e.message]
    assert error.reason == "unresolved_reference"
    assert "two different resources under one meta.versionId" in error.message
