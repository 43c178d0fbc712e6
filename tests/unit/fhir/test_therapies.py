"""MedicationRequests of one therapy: a request `basedOn` another of the input set for the same
patient (a filler-order, an instance-order, an order carrying out a plan) is part of that
order's therapy, so one course is checked once, not once per fulfilment. Before, an
original-order, its filler-order and an instance-order of amoxicillin gave three critical
drug-allergy alerts and three duplicate-therapy warnings against one another."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import permutations
from typing import Any

import pytest

from rules.batch import SubjectResult
from schemas.alerts import AlertStatus
from schemas.events import MedicationPrescribed, MedicationStopped
from schemas.fhir.mapping import FhirImport
from tests.unit.fhir.test_clinical_scenarios import (
    DRUG_ALLERGY,
    drug_allergy_alerts,
    fold,
    subject,
    submitted_from,
)
from tests.unit.fhir.test_references import penicillin_allergy, run

AMOXICILLIN = {"text": "amoxicillin 500 mg capsule"}
DUPLICATE_THERAPY = "duplicate-therapy"


def request(
    request_id: str,
    intent: str,
    based_on: str | None = None,
    *,
    status: str = "active",
    authored: str = "2024-05-01",
    patient: str = "Patient/p1",
    **fields: Any,
) -> dict[str, Any]:
    resource: dict[str, Any] = {
        "resourceType": "MedicationRequest",
        "id": request_id,
        "status": status,
        "intent": intent,
        "subject": {"reference": patient},
        "authoredOn": authored,
        "medicationCodeableConcept": AMOXICILLIN,
        **fields,
    }
    if based_on is not None:
        resource["basedOn"] = [{"reference": based_on}]
    return resource


def folded(*resources: dict[str, Any]) -> SubjectResult:
    return subject(fold(submitted_from(resources)), "p1")


def raised(result: SubjectResult, rule_id: str) -> list[tuple[str, ...]]:
    return [
        tuple(alert.cause)
        for alert in result.alerts
        if alert.rule_id == rule_id and alert.status is AlertStatus.RAISED
    ]


def prescriptions(*resources: dict[str, Any]) -> dict[str, list[str]]:
    """Prescription id -> the records whose events name it, by event type."""
    result = run(*resources)
    assert result.errors == []
    found: dict[str, list[str]] = {}
    for _, event in result.events:
        payload = event.payload
        if isinstance(payload, MedicationPrescribed | MedicationStopped):
            found.setdefault(payload.prescription_id, []).append(
                f"{event.type.value} {event.source_ref}"
            )
    return found


ORIGINAL = request("r1", "original-order")
FILLER = request("r2", "filler-order", "MedicationRequest/r1", authored="2024-05-02")
INSTANCE = request(
    "r3", "instance-order", "MedicationRequest/r1", status="completed", authored="2024-05-03"
)


def test_an_order_its_filler_and_an_instance_are_one_therapy_with_one_alert() -> None:
    outcomes = set()
    for resources in permutations([penicillin_allergy("Patient/p1"), ORIGINAL, FILLER, INSTANCE]):
        result = folded(*resources)
        outcomes.add(
            (
                tuple(raised(result, DRUG_ALLERGY)),
                tuple(alert.severity.value for alert in drug_allergy_alerts(result)),
                tuple(raised(result, DUPLICATE_THERAPY)),
                tuple((v.prescription_id, v.active) for v in result.state.medication_views()),
            )
        )
    assert outcomes == {
        ((("allergy:a1", "medication:r1"),), ("critical",), (), (("r1", True),)),
    }


def test_a_completed_instance_order_does_not_stop_the_order_it_is_an_occurrence_of() -> None:
    assert prescriptions(ORIGINAL, INSTANCE) == {
        "r1": [
            "MedicationPrescribed MedicationRequest/r1",
            "MedicationPrescribed MedicationRequest/r3",
        ]
    }


def test_an_order_carrying_out_a_plan_is_no_duplicate_of_the_plan() -> None:
    plan = request("r1", "plan")
    carried_out = request("r2", "order", "MedicationRequest/r1", authored="2024-05-02")
    result = folded(plan, carried_out)
    assert raised(result, DUPLICATE_THERAPY) == []
    assert [view.prescription_id for view in result.state.medication_views()] == ["r1"]


def test_a_chain_of_fulfilments_is_the_therapy_of_the_first_order() -> None:
    refill = request("r4", "instance-order", "MedicationRequest/r2", authored="2024-05-04")
    assert set(prescriptions(ORIGINAL, FILLER, refill)) == {"r1"}


def test_a_stopped_original_ends_the_therapy_and_a_fulfilment_after_it_is_skipped() -> None:
    stopped = request(
        "r1",
        "original-order",
        status="stopped",
        meta={"lastUpdated": "2024-05-10T00:00:00Z"},
    )
    late = request("r5", "filler-order", "MedicationRequest/r1", authored="2024-06-01")
    result = run(stopped, FILLER, late)
    assert [(skip.resource_id, skip.reason) for skip in result.skipped] == [
        ("r5", "MedicationRequest after MedicationRequest/r1 ended (it would restart the order)")
    ]
    state = folded(stopped, FILLER, late).state
    assert [(view.prescription_id, view.active) for view in state.medication_views()] == [
        ("r1", False)
    ]


@pytest.mark.parametrize("status", ["cancelled", "entered-in-error"])
def test_a_cancelled_or_void_fulfilment_leaves_the_therapy_unchanged(status: str) -> None:
    withdrawn = request("r2", "filler-order", "MedicationRequest/r1", status=status)
    result = run(ORIGINAL, withdrawn)
    assert [skip.reason for skip in result.skipped] == [
        f"MedicationRequest {status}, part of the therapy of MedicationRequest/r1: the therapy "
        "is unchanged"
    ]
    assert [
        (view.prescription_id, view.active)
        for view in folded(ORIGINAL, withdrawn).state.medication_views()
    ] == [("r1", True)]


def test_a_fulfilment_is_valid_until_the_therapy_s_planned_end() -> None:
    bounded = request(
        "r1",
        "original-order",
        dosageInstruction=[{"timing": {"repeat": {"boundsPeriod": {"end": "2024-05-08"}}}}],
    )
    result = run(bounded, FILLER)
    assert [(event.source_ref, event.valid_until) for _, event in result.events] == [
        ("MedicationRequest/r1", datetime(2024, 5, 9, tzinfo=UTC)),
        ("MedicationRequest/r2", datetime(2024, 5, 9, tzinfo=UTC)),
    ]


BOUNDED = request(
    "r1",
    "original-order",
    dosageInstruction=[{"timing": {"repeat": {"boundsPeriod": {"end": "2024-05-08"}}}}],
)


def _given(kind: str, on: str) -> dict[str, Any]:
    """A dispense, an administration or a statement of amoxicillin for p1 on `on`, reporting
    on MedicationRequest/r1."""
    order = {"reference": "MedicationRequest/r1"}
    base = {"resourceType": kind, "id": "g1", "subject": {"reference": "Patient/p1"}}
    fields: dict[str, dict[str, Any]] = {
        "MedicationDispense": {"status": "completed", "authorizingPrescription": [order]},
        "MedicationAdministration": {"status": "in-progress", "request": order},
        "MedicationStatement": {"status": "active", "basedOn": [order]},
    }
    when = "whenHandedOver" if kind == "MedicationDispense" else "effectiveDateTime"
    return base | fields[kind] | {"medicationCodeableConcept": AMOXICILLIN, when: on}


GIVEN_KINDS = ["MedicationDispense", "MedicationAdministration", "MedicationStatement"]


@pytest.mark.parametrize("kind", GIVEN_KINDS)
def test_a_record_of_a_drug_given_during_a_bounded_order_keeps_the_order_s_end(kind: str) -> None:
    """Reported on the order, the record is news of its course: without the order's planned
    end, the course it restates would go on for ever and its alerts never resolve."""
    result = run(BOUNDED, _given(kind, "2024-05-03"))
    assert result.errors == []
    assert {
        (event.source_ref, event.valid_until)
        for _, event in result.events
        if isinstance(event.payload, MedicationPrescribed)
    } == {
        ("MedicationRequest/r1", datetime(2024, 5, 9, tzinfo=UTC)),
        (f"{kind}/g1", datetime(2024, 5, 9, tzinfo=UTC)),
    }


@pytest.mark.parametrize("kind", ["MedicationDispense", "MedicationAdministration"])
def test_a_record_of_a_drug_given_after_the_order_s_planned_end_is_skipped(kind: str) -> None:
    """It would restart the order with no end; the order was checked while it ran."""
    result = run(BOUNDED, _given(kind, "2024-05-20"))
    assert [event.source_ref for _, event in result.events] == ["MedicationRequest/r1"]
    assert [(skip.resource_id, skip.reason) for skip in result.skipped] == [
        ("g1", f"{kind} after MedicationRequest/r1 ended (it would restart the order)")
    ]


VOID_ORDER = request("r1", "order", status="entered-in-error")
_ORDER_FIELDS = {
    "MedicationDispense": "authorizingPrescription",
    "MedicationAdministration": "request",
    "MedicationStatement": "basedOn",
}


@pytest.mark.parametrize("kind", GIVEN_KINDS)
def test_given_an_order_entered_in_error_then_a_record_naming_it_is_a_course_of_its_own(
    kind: str,
) -> None:
    """The order never was a prescription, so nothing ended that the record would restart:
    the amoxicillin given is checked (critical against a penicillin allergy), where it was
    skipped "after MedicationRequest/r1 ended" and no alert was raised."""
    given = _given(kind, "2024-05-03")
    result = run(VOID_ORDER, given)
    assert result.skipped == []
    assert [line.detail for line in result.passed_over if line.source_ref == f"{kind}/g1"] == [
        f"{_ORDER_FIELDS[kind]} names MedicationRequest/r1, an order entered in error (it never "
        "was a prescription): the record is read as a course of its own, not as news of that "
        "order"
    ]
    checked = folded(penicillin_allergy("Patient/p1"), VOID_ORDER, given)
    assert raised(checked, DRUG_ALLERGY) == [("allergy:a1", f"medication:{kind}/g1")]
    assert {alert.severity.value for alert in drug_allergy_alerts(checked)} == {"critical"}


@pytest.mark.parametrize("status", ["stopped", "completed", "cancelled"])
@pytest.mark.parametrize("kind", ["MedicationDispense", "MedicationAdministration"])
def test_a_drug_given_after_its_order_was_stopped_completed_or_cancelled_is_still_skipped(
    kind: str, status: str
) -> None:
    """Those orders were prescriptions, checked while they ran: a record after them would
    restart them with no end."""
    ended = request("r1", "order", status=status, meta={"lastUpdated": "2024-05-02T00:00:00Z"})
    result = run(ended, _given(kind, "2024-05-03"))
    assert [(skip.resource_id, skip.reason) for skip in result.skipped] == [
        ("g1", f"{kind} after MedicationRequest/r1 ended (it would restart the order)")
    ]


NDC_ONLY = {"coding": [{"system": "http://hl7.org/fhir/sid/ndc", "code": "0093-3109-01"}]}


@pytest.mark.parametrize("kind", ["MedicationDispense", "MedicationAdministration"])
def test_a_record_naming_its_drug_by_codes_only_is_named_as_its_order_names_it(kind: str) -> None:
    """A dispense coded by an NDC the knowledge cannot read, with no words: the course stays
    the amoxicillin of its order (critical against a penicillin allergy, not a 'cannot verify'
    warning), keeps the record's code, and the record says so."""
    given = _given(kind, "2024-05-03") | {"medicationCodeableConcept": NDC_ONLY}
    result = run(ORIGINAL, given)
    (restated,) = [
        event.payload
        for _, event in result.events
        if isinstance(event.payload, MedicationPrescribed) and event.source_ref == f"{kind}/g1"
    ]
    assert restated.drug == AMOXICILLIN["text"]
    assert [coding.code for coding in restated.codes] == ["0093-3109-01"]
    assert [line.detail for line in result.passed_over if line.source_ref == f"{kind}/g1"] == [
        "its medication is named by codes only (0093-3109-01): named as MedicationRequest/r1 "
        f"names it ({AMOXICILLIN['text']})"
    ]
    alerts = drug_allergy_alerts(folded(penicillin_allergy("Patient/p1"), ORIGINAL, given))
    assert {alert.severity.value for alert in alerts} == {"critical"}


@pytest.mark.parametrize("kind", ["MedicationDispense", "MedicationAdministration"])
def test_a_record_naming_another_drug_in_words_still_replaces_the_order_s_drug(kind: str) -> None:
    """A substitute named in words is what was given; the change of drug is no longer silent."""
    given = _given(kind, "2024-05-03") | {
        "medicationCodeableConcept": {"text": "azithromycin 250 mg"}
    }
    result = run(ORIGINAL, given)
    drugs = {
        event.source_ref: event.payload.drug
        for _, event in result.events
        if isinstance(event.payload, MedicationPrescribed)
    }
    assert drugs[f"{kind}/g1"] == "azithromycin 250 mg"
    assert [line.detail for line in result.passed_over] == [
        "it names 'azithromycin 250 mg', where MedicationRequest/r1 names 'amoxicillin 500 mg "
        "capsule': the course is checked as the drug given (a substitute replaces the drug "
        "ordered)"
    ]


def _taken(medication: dict[str, Any]) -> dict[str, Any]:
    """A statement based on MedicationRequest/r1 (amoxicillin) that names `medication`."""
    return _given("MedicationStatement", "2024-05-03") | {"medicationCodeableConcept": medication}


def test_a_statement_naming_another_drug_than_its_order_is_checked_as_both() -> None:
    """A statement of ibuprofen based on an amoxicillin order replaced the order's drug: the
    critical penicillin alert was resolved without a word, while the order was never stopped.
    The statement says what the patient takes, not that amoxicillin was not given."""
    statement = _taken({"text": "ibuprofen 400 mg"})
    result = run(ORIGINAL, statement)
    assert [line.detail for line in result.passed_over] == [
        "it names 'ibuprofen 400 mg', but MedicationRequest/r1, which it reports on, names "
        "'amoxicillin 500 mg capsule': the course is checked as both ('ibuprofen 400 mg; "
        "amoxicillin 500 mg capsule')"
    ]
    checked = folded(penicillin_allergy("Patient/p1"), ORIGINAL, statement)
    assert [
        (alert.status.value, alert.severity.value) for alert in drug_allergy_alerts(checked)
    ] == [("raised", "critical")]
    nsaid_allergy = penicillin_allergy("Patient/p1") | {"code": {"text": "ibuprofen"}}
    assert raised(folded(nsaid_allergy, ORIGINAL, statement), DRUG_ALLERGY) == [
        ("allergy:a1", "medication:r1")
    ]


def test_a_statement_is_checked_as_its_order_s_drug_too_unless_a_shared_coding_says_same() -> None:
    """Other words for the drug the order names, and no coding shared: checked as both (the
    mapping knows no drugs). A coding shared with the order says it is the same drug: the
    statement's own words, and no line."""
    coded = {"system": "http://www.nlm.nih.gov/research/umls/rxnorm", "code": "308182"}
    order = request("r1", "order", medicationCodeableConcept=AMOXICILLIN | {"coding": [coded]})
    uncoded = run(order, _taken({"text": "Amoxil 500"}))
    coded_alike = run(order, _taken({"text": "Amoxil 500", "coding": [coded]}))
    assert [_statement_drug(uncoded), len(uncoded.passed_over)] == [
        "Amoxil 500; amoxicillin 500 mg capsule",
        1,
    ]
    assert [_statement_drug(coded_alike), len(coded_alike.passed_over)] == ["Amoxil 500", 0]


def _statement_drug(result: FhirImport) -> str:
    (drug,) = [
        event.payload.drug
        for _, event in result.events
        if isinstance(event.payload, MedicationPrescribed)
        and event.source_ref == "MedicationStatement/g1"
    ]
    return drug


@pytest.mark.parametrize(
    ("resources", "notice"),
    [
        pytest.param(
            [FILLER],
            None,
            id="given an order the input set does not hold then a therapy of its own as before",
        ),
        pytest.param(
            [request("r1", "original-order", patient="Patient/p2"), FILLER],
            "basedOn names MedicationRequest/r1, an order for another patient: the record is "
            "read as a course of its own, not as news of that order",
            id="given another patient's order then a therapy of its own, reported",
        ),
        pytest.param(
            [request("r1", "original-order", status="entered-in-error"), FILLER],
            "basedOn names MedicationRequest/r1, an order entered in error (it never was a "
            "prescription): the record is read as a course of its own, not as news of that order",
            id="given an order entered in error then a therapy of its own, reported",
        ),
        pytest.param(
            [request("r1", "proposal"), FILLER],
            None,
            id="given a proposal then a therapy of its own",
        ),
        pytest.param(
            [request("r1", "original-order", "MedicationRequest/r2"), FILLER],
            "basedOn names MedicationRequest/r1, whose own basedOn leads back to this request: "
            "the loop is not followed, and the request is read as a therapy of its own",
            id="given a loop then each a therapy of its own, reported",
        ),
    ],
)
def test_a_request_based_on_no_prescription_of_its_patient_is_a_therapy_of_its_own(
    resources: list[dict[str, Any]], notice: str | None
) -> None:
    result = run(*resources)
    assert result.errors == []
    named = {
        event.payload.prescription_id
        for _, event in result.events
        if isinstance(event.payload, MedicationPrescribed)
        and event.source_ref == "MedicationRequest/r2"
    }
    assert named == {"r2"}
    lines = [
        line.detail for line in result.passed_over if line.source_ref == "MedicationRequest/r2"
    ]
    assert lines == ([] if notice is None else [notice])


def test_a_statement_or_an_administration_of_a_fulfilment_reports_on_the_therapy() -> None:
    statement = {
        "resourceType": "MedicationStatement",
        "id": "ms1",
        "status": "active",
        "subject": {"reference": "Patient/p1"},
        "basedOn": [{"reference": "MedicationRequest/r2"}],
        "medicationCodeableConcept": AMOXICILLIN,
        "effectiveDateTime": "2024-05-05",
    }
    given = {
        "resourceType": "MedicationAdministration",
        "id": "ad1",
        "status": "completed",
        "subject": {"reference": "Patient/p1"},
        "request": {"reference": "MedicationRequest/r2"},
        "medicationCodeableConcept": AMOXICILLIN,
        "effectiveDateTime": "2024-05-06T08:00:00Z",
    }
    assert set(prescriptions(ORIGINAL, FILLER, statement, given)) == {"r1"}


def _derived_from(derived_from: object, statement_id: str = "g1") -> dict[str, Any]:
    """An active statement of amoxicillin for p1 with this `derivedFrom` (and no basedOn)."""
    statement = _given("MedicationStatement", "2024-05-03")
    del statement["basedOn"]
    return statement | {"id": statement_id, "derivedFrom": derived_from}


def test_a_statement_derived_from_its_order_reports_on_that_order() -> None:
    """FHIR R4 `derivedFrom` links a statement to "the underlying MedicationRequest". Read as a
    second course, it gave two critical alerts for one drug and a duplicate-therapy warning of
    the order against itself."""
    statement = _derived_from(
        [{"reference": "Observation/o1"}, {"reference": "MedicationRequest/r2"}]
    )
    assert set(prescriptions(ORIGINAL, FILLER, statement)) == {"r1"}
    result = folded(penicillin_allergy("Patient/p1"), ORIGINAL, FILLER, statement)
    assert raised(result, DRUG_ALLERGY) == [("allergy:a1", "medication:r1")]
    assert raised(result, DUPLICATE_THERAPY) == []


def test_only_a_derived_from_naming_an_order_of_the_input_set_is_read_as_based_on() -> None:
    """Other `derivedFrom` targets are supporting information: the statement stays a course of
    its own, without a word."""
    statements = [
        _derived_from([{"reference": "MedicationRequest/r1"}], "of-the-order"),
        _derived_from([{"reference": "Observation/o1"}], "of-an-observation"),
        _derived_from([{"reference": "MedicationRequest/r9"}], "of-an-order-not-held"),
        _derived_from("MedicationRequest/r1", "of-no-reference"),
    ]
    result = run(ORIGINAL, *statements)
    assert result.errors == []
    assert {
        event.source_ref: event.payload.prescription_id
        for _, event in result.events
        if isinstance(event.payload, MedicationPrescribed)
    } == {
        "MedicationRequest/r1": "r1",
        "MedicationStatement/of-the-order": "r1",
        "MedicationStatement/of-an-observation": "MedicationStatement/of-an-observation",
        "MedicationStatement/of-an-order-not-held": "MedicationStatement/of-an-order-not-held",
        "MedicationStatement/of-no-reference": "MedicationStatement/of-no-reference",
    }
    assert [line.detail for line in result.passed_over] == []


def test_a_statement_derived_from_another_patient_s_order_is_a_course_of_its_own() -> None:
    others = request("r1", "order", patient="Patient/p2")
    statement = _derived_from([{"reference": "MedicationRequest/r1"}])
    assert set(prescriptions(others, statement)) == {"r1", "MedicationStatement/g1"}
    assert [line.detail for line in run(others, statement).passed_over] == [
        "derivedFrom names MedicationRequest/r1, an order for another patient: the record is "
        "read as a course of its own, not as news of that order"
    ]


def test_an_order_replacing_a_fulfilment_replaces_the_therapy() -> None:
    replacement = request(
        "r9",
        "order",
        authored="2024-05-20",
        priorPrescription={"reference": "MedicationRequest/r2"},
        medicationCodeableConcept={"text": "cefalexin 500 mg capsule"},
    )
    found = prescriptions(ORIGINAL, FILLER, replacement)
    assert found["r1"][-1] == "MedicationStopped MedicationRequest/r9"


@pytest.mark.parametrize(
    "link",
    [
        pytest.param([], id="an empty list"),
        pytest.param([{}], id="a reference with nothing in it"),
        pytest.param({"reference": "x"}, id="a reference that names no resource"),
        pytest.param([{"display": "the GP's order"}], id="a display alone"),
    ],
)
def test_a_link_to_an_order_that_cannot_be_read_is_reported(link: object) -> None:
    """The record is then a course of its own, as before, and the import says why."""
    given = _given("MedicationDispense", "2024-05-03") | {"authorizingPrescription": link}
    result = run(ORIGINAL, given)
    named = {
        event.payload.prescription_id
        for _, event in result.events
        if isinstance(event.payload, MedicationPrescribed)
    }
    assert named == {"r1", "MedicationDispense/g1"}
    (line,) = [line.detail for line in result.passed_over if line.source_ref.endswith("/g1")]
    assert line.startswith("authorizingPrescription ")
    assert line.endswith(
        "is no reference that can be read: the record is read as a course of its own"
    )


def test_a_link_to_another_kind_of_resource_is_not_reported() -> None:
    """A statement based on a care plan names something real: no line."""
    statement = _given("MedicationStatement", "2024-05-03") | {
        "basedOn": [{"reference": "CarePlan/gp-visit"}]
    }
    result = run(ORIGINAL, statement)
    assert [line.detail for line in result.passed_over] == []


@pytest.mark.parametrize("size", [2, 3], ids=["two orders", "three orders"])
def test_orders_that_name_one_another_as_prior_prescription_stop_none_and_say_so(
    size: int,
) -> None:
    """Followed, a priorPrescription loop stopped every order of it: the patient's active
    amoxicillin and its critical alert vanished without a word."""
    names = [f"r{n}" for n in range(1, size + 1)]
    orders = [
        request(
            name,
            "order",
            authored=f"2024-05-{n + 1:02d}",
            priorPrescription={"reference": f"MedicationRequest/{names[n - 1]}"},
        )
        for n, name in enumerate(names)
    ]
    found = prescriptions(*orders)
    assert all(not any("Stopped" in step for step in found[name]) for name in names)
    alerts = drug_allergy_alerts(folded(penicillin_allergy("Patient/p1"), *orders))
    assert len(alerts) == size
    lines = [line.detail for line in run(*orders).passed_over]
    assert sum("the loop is not followed" in line for line in lines) == size


@pytest.mark.parametrize(
    ("description", "severity"),
    [
        pytest.param("went into anaphylactic shock, intubated", "critical", id="anaphylaxis"),
        pytest.param("itchy for a day", "warning", id="a mild course"),
        pytest.param("no anaphylaxis", "warning", id="anaphylaxis denied"),
    ],
)
def test_a_reaction_s_description_grades_the_alert_with_its_manifestations(
    description: str, severity: str
) -> None:
    """An unconfirmed allergy of low criticality whose reaction was coded "Hives" and described
    as anaphylactic shock gave a warning: the description was read only without manifestations."""
    allergy = penicillin_allergy("Patient/p1") | {
        "criticality": "low",
        "verificationStatus": {"coding": [{"code": "unconfirmed"}]},
        "reaction": [{"manifestation": [{"text": "Hives"}], "description": description}],
    }
    (alert,) = drug_allergy_alerts(folded(allergy, ORIGINAL))
    assert alert.severity.value == severity


def test_an_alert_title_names_the_ingredient_that_matched_when_the_drug_s_name_does_not() -> None:
    """ "Study kit (ibuprofen) conflicts with the recorded Penicillin G" showed ibuprofen
    conflicting with a penicillin allergy: amoxicillin, named by the code only, matched."""
    kit = request(
        "r1",
        "order",
        medicationCodeableConcept={
            "text": "Study kit (ibuprofen)",
            "coding": [{"system": "http://www.nlm.nih.gov/research/umls/rxnorm", "code": "723"}],
        },
    )
    (alert,) = drug_allergy_alerts(folded(penicillin_allergy("Patient/p1"), kit))
    assert alert.title.startswith("Study kit (ibuprofen), which contains amoxicillin, conflicts")
    (plain,) = drug_allergy_alerts(folded(penicillin_allergy("Patient/p1"), ORIGINAL))
    assert plain.title.startswith("amoxicillin 500 mg capsule conflicts")
