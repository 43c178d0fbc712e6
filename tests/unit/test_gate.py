"""Every gate reason code, table-driven: given an event and a subject's memory, when admitted,
then the documented reason."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.gate import (
    Admitted,
    GateContext,
    GatePolicy,
    Rejected,
    Signature,
    TenantPolicy,
    admit,
)
from projections.state import UserState, initial_state, replay
from schemas.events import CLOCK_ACTOR, Event
from schemas.reasons import ReasonCode
from tests.factories import T0, event_id, make_event

NOW = T0 + timedelta(days=30)
POLICY = GatePolicy(
    tenants={
        "clinic-a": TenantPolicy(frozenset({"ehr-adapter"}), frozenset({"care"})),
        "assistant": TenantPolicy(frozenset({"chat-agent"}), frozenset()),
    },
    max_event_bytes=2048,
    max_history_bytes=10_000,
)
ALLERGY = make_event("AllergyRecorded", "known-allergy")
PREFERENCE = make_event("PreferenceStated", "known-pref", at=timedelta(hours=1))
REMEMBERED = replay([ALLERGY, PREFERENCE])


def _decide(event: Any, state: UserState | None = None, **context: Any) -> Admitted | Rejected:
    settings: dict[str, Any] = {"now": NOW, "policy": POLICY, "encoded_size": 200} | context
    return admit(
        event, state or initial_state(event.tenant_id, event.subject_id), GateContext(**settings)
    )


def _reasons(decision: Admitted | Rejected) -> tuple[str, ...]:
    return () if isinstance(decision, Admitted) else tuple(r.value for r in decision.reasons)


def test_given_a_retraction_of_a_retraction_then_refused_saying_a_retraction_stands() -> None:
    """The retraction is a known event of the subject, not an unknown claim: the detail says
    why it cannot be retracted and how to restore what it took back."""
    retraction = make_event("ClaimRetracted", "ret", payload={"claim_id": ALLERGY.id})
    undo = make_event(
        "ClaimRetracted", "undo", at=timedelta(days=1), payload={"claim_id": retraction.id}
    )
    decision = _decide(undo, replay([ALLERGY, retraction]))
    assert isinstance(decision, Rejected)
    assert _reasons(decision) == ("retracts_unknown_claim",)
    assert "is itself a retraction" in decision.detail
    assert "send that claim again as a new event" in decision.detail


REJECTIONS = [
    pytest.param(
        make_event("PreferenceStated", "t", tenant="nobody"),
        {},
        None,
        ReasonCode.UNKNOWN_TENANT,
        id="given an unconfigured tenant when admitted then unknown_tenant",
    ),
    pytest.param(
        make_event("PreferenceStated", "a", actor="stranger"),
        {},
        None,
        ReasonCode.ACTOR_NOT_ALLOWED,
        id="given an actor not on the tenant's list then actor_not_allowed",
    ),
    pytest.param(
        ALLERGY,
        {},
        REMEMBERED,
        ReasonCode.DUPLICATE_EVENT_ID,
        id="given an event already accepted when re-sent then duplicate_event_id",
    ),
    pytest.param(
        make_event("PreferenceStated", "known-allergy", payload={"value": "vegan"}),
        {},
        REMEMBERED,
        ReasonCode.EVENT_ID_REUSED,
        id="given a known event id with other content then event_id_reused",
    ),
    pytest.param(
        make_event("PreferenceStated", "f", at=NOW + timedelta(hours=1)),
        {},
        None,
        ReasonCode.OCCURRED_IN_FUTURE,
        id="given occurred_at an hour ahead when admitted then occurred_in_future",
    ),
    pytest.param(
        make_event("PreferenceStated", "r", recorded=NOW + timedelta(days=2)),
        {},
        None,
        ReasonCode.RECORDED_IN_FUTURE,
        id="given recorded_at two days ahead then recorded_in_future",
    ),
    pytest.param(
        make_event("PreferenceStated", "o", at=datetime(1850, 1, 1, tzinfo=UTC)),
        {},
        None,
        ReasonCode.TOO_OLD,
        id="given an event dated 1850 when admitted then too_old",
    ),
    pytest.param(
        make_event("PreferenceStated", "big"),
        {"encoded_size": 4096},
        None,
        ReasonCode.OVERSIZE,
        id="given 4 KiB against a 2 KiB limit then oversize",
    ),
    pytest.param(
        make_event("PreferenceStated", "late-in-life"),
        {"history_bytes": 9_900},
        None,
        ReasonCode.SUBJECT_HISTORY_FULL,
        id="given a history of 9,900 bytes against a 10,000 limit then subject_history_full",
    ),
    pytest.param(
        make_event("PreferenceStated", "s1", payload={"note": "my password: hunter22"}),
        {},
        None,
        ReasonCode.SECRET_IN_TEXT,
        id="given a password in a note then secret_in_text",
    ),
    pytest.param(
        make_event(
            "PreferenceStated", "s2", payload={"note": "card 4111 1111 1111 1111 exp 12/29"}
        ),
        {},
        None,
        ReasonCode.SECRET_IN_TEXT,
        id="given a Luhn-valid card number then secret_in_text",
    ),
    pytest.param(
        make_event("FactAsserted", "s4", payload={"key": "card", "value": 4111111111111111}),
        {},
        None,
        ReasonCode.SECRET_IN_TEXT,
        id="given a card number sent as a number then secret_in_text",
    ),
    pytest.param(
        make_event(
            "MedicationPrescribed",
            "card-in-display",
            payload={
                "drug": "amoxicillin",
                "codes": [{"system": "local", "code": "1", "display": "4111 1111 1111 1111"}],
            },
        ),
        {},
        None,
        ReasonCode.SECRET_IN_TEXT,
        id="given a card number in a coding's display then secret_in_text",
    ),
    pytest.param(
        make_event("PreferenceStated", "s5", purpose="token: abcd1234efgh"),
        {},
        None,
        ReasonCode.SECRET_IN_TEXT,
        id="given a credential in the purpose then secret_in_text",
    ),
    pytest.param(
        make_event(
            "MedicationPrescribed", "s3", payload={"note": "key sk-live-abcdefghijklmnop1234"}
        ),
        {},
        None,
        ReasonCode.SECRET_IN_TEXT,
        id="given an API key in a prescription note then secret_in_text",
    ),
    pytest.param(
        make_event(
            "AllergyRecorded",
            "c1",
            tenant="assistant",
            actor="chat-agent",
            purpose="personalization",
        ),
        {},
        None,
        ReasonCode.SPECIAL_CATEGORY_WITHOUT_CONSENT,
        id="given health data for personalization without consent then special_category_without_consent",
    ),
    pytest.param(
        make_event(
            "PreferenceStated",
            "c2",
            tenant="assistant",
            actor="chat-agent",
            sensitivity="special_category",
            purpose="personalization",
        ),
        {},
        None,
        ReasonCode.SPECIAL_CATEGORY_WITHOUT_CONSENT,
        id="given data labelled special_category without consent then special_category_without_consent",
    ),
    pytest.param(
        make_event(
            "AlertAcknowledged",
            "c3",
            tenant="assistant",
            actor="chat-agent",
            purpose="personalization",
            payload={
                "alert_id": "8a4e7a62-0f8b-5d4a-9f0e-2f4f5d6c7b8a",
                "action": "overridden",
                "reason": "tolerated before",
            },
        ),
        {},
        None,
        ReasonCode.SPECIAL_CATEGORY_WITHOUT_CONSENT,
        id="given an override of a health alert without consent then special_category_without_consent",
    ),
    pytest.param(
        make_event("PreferenceStated", "sup1", supersedes=event_id("never-seen")),
        {},
        REMEMBERED,
        ReasonCode.SUPERSEDES_UNKNOWN_CLAIM,
        id="given supersedes of an unknown claim then supersedes_unknown_claim",
    ),
    pytest.param(
        make_event("PreferenceStated", "sup2", supersedes=event_id("other-subject-claim")),
        {"claim_owners": {event_id("other-subject-claim"): "clinic-a:patient-9"}},
        REMEMBERED,
        ReasonCode.SUPERSEDES_OTHER_SUBJECT,
        id="given supersedes of another subject's claim then supersedes_other_subject",
    ),
    pytest.param(
        make_event("PreferenceStated", "sup3", payload={"key": "seat"}, supersedes=PREFERENCE.id),
        {},
        REMEMBERED,
        ReasonCode.SUPERSEDES_OTHER_KEY,
        id="given supersedes of a claim about another key then supersedes_other_key",
    ),
    pytest.param(
        make_event("FactAsserted", "sup4", payload={"key": "diet"}, supersedes=PREFERENCE.id),
        {},
        REMEMBERED,
        ReasonCode.SUPERSEDES_OTHER_TYPE,
        id="given a fact superseding a preference of the same name then supersedes_other_type",
    ),
    pytest.param(
        make_event("ClaimRetracted", "ret", payload={"claim_id": event_id("never-seen")}),
        {},
        REMEMBERED,
        ReasonCode.RETRACTS_UNKNOWN_CLAIM,
        id="given a retraction of an unknown claim then retracts_unknown_claim",
    ),
    pytest.param(
        make_event(
            "ClaimRetracted", "ret-guess", origin="inferred", payload={"claim_id": ALLERGY.id}
        ),
        {},
        REMEMBERED,
        ReasonCode.RETRACTS_STRONGER_CLAIM,
        id="given an inference retracting an explicit claim then retracts_stronger_claim",
    ),
    pytest.param(
        make_event(
            "ClaimRetracted", "ret-elsewhere", purpose="marketing", payload={"claim_id": ALLERGY.id}
        ),
        {},
        REMEMBERED,
        ReasonCode.RETRACTS_OTHER_PURPOSE,
        id="given a retraction recorded for another purpose than its claim then refused",
    ),
    pytest.param(
        make_event(
            "PreferenceStated",
            "pref-elsewhere",
            at=timedelta(hours=2),
            purpose="marketing",
            supersedes=PREFERENCE.id,
        ),
        {},
        REMEMBERED,
        ReasonCode.SUPERSEDES_OTHER_PURPOSE,
        id="given a correction recorded for another purpose than its claim then refused",
    ),
    pytest.param(
        make_event("PreferenceStated", "late"),
        {"erased": True},
        None,
        ReasonCode.SUBJECT_ERASED,
        id="given a subject in the erasure ledger when an event arrives then subject_erased",
    ),
    pytest.param(
        make_event("ClockAdvanced", "forged-tick", payload={}),
        {},
        None,
        ReasonCode.CLOCK_RESERVED,
        id="given a producer writing ClockAdvanced then clock_reserved",
    ),
    pytest.param(
        make_event("PreferenceStated", "clock-claim", actor=CLOCK_ACTOR),
        {},
        None,
        ReasonCode.CLOCK_RESERVED,
        id="given the clock's actor writing a claim then clock_reserved",
    ),
    pytest.param(
        make_event(
            "ClockAdvanced", "tick-unknown-tenant", payload={}, actor=CLOCK_ACTOR, tenant="x"
        ),
        {},
        None,
        ReasonCode.UNKNOWN_TENANT,
        id="given the clock for an unconfigured tenant then unknown_tenant",
    ),
    pytest.param(
        make_event("FactAsserted", "home-alpha3", payload={"key": "home_country", "value": "NLD"}),
        {},
        None,
        ReasonCode.INVALID_RECORD,
        id="given a home_country in alpha-3 then invalid_record",
    ),
    pytest.param(
        make_event(
            "FactAsserted", "home-name", payload={"key": "home_country", "value": "Netherlands"}
        ),
        {},
        None,
        ReasonCode.INVALID_RECORD,
        id="given a home_country as a name then invalid_record",
    ),
    pytest.param(
        make_event("FactAsserted", "home-number", payload={"key": "home_country", "value": 31}),
        {},
        None,
        ReasonCode.INVALID_RECORD,
        id="given a home_country as a number then invalid_record",
    ),
    pytest.param(
        make_event("AllergyRecorded", "nkda-as-allergy", payload={"substance": "NKDA"}),
        {},
        None,
        ReasonCode.NEGATION_NOT_FLAGGED,
        id="given an allergy to 'NKDA' not negated then negation_not_flagged",
    ),
    pytest.param(
        make_event("AllergyRecorded", "nka-zh", payload={"substance": " 否认药物过敏史 "}),
        {},
        None,
        ReasonCode.NEGATION_NOT_FLAGGED,
        id="given a Chinese 'denies drug allergies' not negated then negation_not_flagged",
    ),
    pytest.param(
        make_event(
            "AllergyRecorded",
            "nkda-spelled-out",
            payload={"substance": "NKDA - no known drug allergies"},
        ),
        {},
        None,
        ReasonCode.NEGATION_NOT_FLAGGED,
        id="given an allergy to 'NKDA - no known drug allergies' not negated then negation_not_flagged",
    ),
    pytest.param(
        make_event("AllergyRecorded", "nka-headed", payload={"substance": "Allergies: none"}),
        {},
        None,
        ReasonCode.NEGATION_NOT_FLAGGED,
        id="given an allergy to 'Allergies: none' not negated then negation_not_flagged",
    ),
    pytest.param(
        make_event("AllergyRecorded", "nkda-dots", payload={"substance": "N.K.D.A."}),
        {},
        None,
        ReasonCode.NEGATION_NOT_FLAGGED,
        id="given an allergy to 'N.K.D.A.' not negated then negation_not_flagged",
    ),
]


@pytest.mark.parametrize(("event", "context", "state", "reason"), REJECTIONS)
def test_gate_rejects_with_the_documented_reason(
    event: Any, context: dict[str, Any], state: Any, reason: ReasonCode
) -> None:
    decision = _decide(event, state, **context)
    assert isinstance(decision, Rejected)
    assert reason in decision.reasons


def test_given_several_problems_when_admitted_then_every_reason_is_reported() -> None:
    event = make_event(
        "PreferenceStated",
        "many",
        actor="stranger",
        at=NOW + timedelta(days=1),
        payload={"note": "password=hunter22"},
    )
    assert set(_reasons(_decide(event, encoded_size=10_000))) == {
        "actor_not_allowed",
        "occurred_in_future",
        "recorded_in_future",
        "oversize",
        "secret_in_text",
    }


def test_given_a_statement_sent_as_an_allergy_then_the_detail_says_how_without_the_text() -> None:
    decision = _decide(make_event("AllergyRecorded", "nkfa", payload={"substance": "NKFA"}))
    assert isinstance(decision, Rejected)
    assert "negated=true" in decision.detail and "(food)" in decision.detail
    assert "NKFA" not in decision.detail


def test_given_a_secret_when_rejected_then_the_detail_never_contains_it() -> None:
    decision = _decide(
        make_event("PreferenceStated", "leak", payload={"note": "password: hunter22"})
    )
    assert isinstance(decision, Rejected)
    assert "hunter22" not in decision.detail
    assert "payload.note" in decision.detail


@pytest.mark.parametrize(
    ("payload", "kind", "secret"),
    [
        ({"note": "glpat-AbCdEfGhIjKlMnOpQrSt"}, "a GitLab token", "AbCdEfGhIjKlMnOpQrSt"),
        (
            {"value": "AccountKey=Eby8vdM02xNOcqFlqUwJPLlm==;"},
            "a credential assignment",
            "Eby8vdM02x",
        ),
        ({"note": "\u5bc6\u7801\uff1aabc12345"}, "a credential assignment", "abc12345"),
        ({"note": "OTP: 482913"}, "a one-time code", "482913"),
        ({"note": "CVV: 123"}, "a card security code", "123"),
    ],
)
def test_given_a_secret_of_a_kind_when_rejected_then_the_detail_names_the_kind_not_the_secret(
    payload: dict[str, str], kind: str, secret: str
) -> None:
    decision = _decide(make_event("PreferenceStated", "kind", payload=payload))
    assert isinstance(decision, Rejected)
    field = next(iter(payload))
    assert f"payload.{field} looks like {kind}" in decision.detail
    assert secret not in decision.detail


ACCEPTED = [
    pytest.param(
        make_event("AllergyRecorded", "ok1"),
        None,
        id="given care data for a care tenant then accepted without consent",
    ),
    pytest.param(
        make_event("PreferenceStated", "ok2", supersedes=PREFERENCE.id, at=timedelta(days=2)),
        REMEMBERED,
        id="given a correction of a known claim of the same key then accepted",
    ),
    pytest.param(
        make_event(
            "ClaimRetracted", "ok3", payload={"claim_id": PREFERENCE.id}, at=timedelta(days=2)
        ),
        REMEMBERED,
        id="given a retraction of a known claim then accepted",
    ),
    pytest.param(
        make_event("PreferenceStated", "ok4", payload={"note": "order 12345678901234 shipped"}),
        None,
        id="given a long number that fails Luhn then not mistaken for a card",
    ),
    pytest.param(
        make_event(
            "AllergyRecorded",
            "ok-secret-word",
            payload={"note": "Secret: patient does not want family informed"},
        ),
        None,
        id="given a clinical note starting 'Secret:' then not mistaken for a credential",
    ),
    pytest.param(
        make_event("PreferenceStated", "ok-imei", payload={"note": "device IMEI 490154203237518"}),
        None,
        id="given a Luhn-valid IMEI then not mistaken for a card",
    ),
    pytest.param(
        make_event(
            "MedicationPrescribed",
            "ok-dmd",
            payload={
                "drug": "Amoxicillin 500mg capsules",
                "codes": [{"system": "http://snomed.info/sct", "code": "39732021000001106"}],
            },
        ),
        None,
        id="given a UK dm+d SNOMED code of a card number's shape then not mistaken for a card",
    ),
    pytest.param(
        make_event("FactAsserted", "home-lower", payload={"key": "home_country", "value": " nl "}),
        None,
        id="given a home_country code in lower case with spaces then accepted",
    ),
    pytest.param(
        make_event("PreferenceStated", "ok5", at=NOW + timedelta(minutes=4)),
        None,
        id="given occurred_at within the clock skew then accepted",
    ),
    pytest.param(
        make_event("ClockAdvanced", "tick", payload={}, actor=CLOCK_ACTOR, origin="inferred"),
        REMEMBERED,
        id="given the clock's tick then accepted without being on the tenant's actor list",
    ),
    pytest.param(
        make_event(
            "AllergyRecorded",
            "nkda-statement",
            payload={"substance": "No known drug allergies.", "negated": True},
        ),
        None,
        id="given a negated 'no known drug allergies' record then accepted",
    ),
    pytest.param(
        make_event(
            "AllergyRecorded",
            "coded-nka",
            payload={"substance": "NKA", "codes": [{"system": "rxnorm", "code": "7980"}]},
        ),
        None,
        id="given a coded substance whose text says NKA then accepted (the code names it)",
    ),
    pytest.param(
        make_event("AllergyRecorded", "none-of-these", payload={"substance": "nkda penicillin"}),
        None,
        id="given a substance that only starts with a statement then accepted",
    ),
]


@pytest.mark.parametrize(("event", "state"), ACCEPTED)
def test_gate_accepts_plausible_authorised_events(event: Any, state: Any) -> None:
    assert isinstance(_decide(event, state), Admitted)


def test_given_special_category_consent_when_health_data_arrives_for_that_purpose_then_accepted() -> (
    None
):
    consent = make_event(
        "ConsentChanged",
        "consent",
        tenant="assistant",
        actor="chat-agent",
        payload={"purpose": "personalization", "granted": True, "special_category": True},
    )
    allergy = make_event(
        "AllergyRecorded",
        "after-consent",
        tenant="assistant",
        actor="chat-agent",
        purpose="personalization",
        at=timedelta(hours=1),
    )
    assert isinstance(_decide(allergy, replay([consent])), Admitted)


def test_given_consent_withdrawn_when_health_data_arrives_then_rejected() -> None:
    granted = make_event(
        "ConsentChanged",
        "granted",
        tenant="assistant",
        actor="chat-agent",
        payload={"purpose": "personalization", "granted": True, "special_category": True},
    )
    withdrawn = make_event(
        "ConsentChanged",
        "withdrawn",
        tenant="assistant",
        actor="chat-agent",
        at=timedelta(hours=1),
        payload={"purpose": "personalization", "granted": False, "special_category": True},
    )
    allergy = make_event(
        "AllergyRecorded",
        "after-withdrawal",
        tenant="assistant",
        actor="chat-agent",
        purpose="personalization",
        at=timedelta(hours=2),
    )
    assert _reasons(_decide(allergy, replay([granted, withdrawn]))) == (
        "special_category_without_consent",
    )


@given(st.uuids())
def test_given_any_uuid_in_an_id_field_then_it_is_never_mistaken_for_a_card_number(
    value: UUID,
) -> None:
    event = make_event(
        "MedicationPrescribed",
        "uuid-id",
        payload={"prescription_id": str(value)},
        source_ref=f"x/{value}",
    )
    assert isinstance(_decide(event), Admitted)


def test_given_sealing_required_when_a_personal_event_is_not_sealed_then_not_sealed() -> None:
    strict = GatePolicy(tenants=POLICY.tenants, require_sealed=True)
    event = make_event("PreferenceStated", "plain")
    decision = admit(
        event, initial_state("clinic-a", "patient-1"), GateContext(NOW, strict, 200, sealed=False)
    )
    assert _reasons(decision) == ("not_sealed",)
    sealed = admit(
        event, initial_state("clinic-a", "patient-1"), GateContext(NOW, strict, 200, sealed=True)
    )
    assert isinstance(sealed, Admitted)


def test_given_sealing_required_then_an_unsealed_erasure_request_still_gets_through() -> None:
    strict = GatePolicy(tenants=POLICY.tenants, require_sealed=True)
    erasure = make_event("ErasureRequested", "erase")
    assert isinstance(
        admit(erasure, initial_state("clinic-a", "patient-1"), GateContext(NOW, strict, 200)),
        Admitted,
    )


def test_given_a_full_history_then_an_erasure_request_and_a_clock_tick_still_get_through() -> None:
    erasure = make_event("ErasureRequested", "forget-me", purpose="erasure")
    tick = make_event("ClockAdvanced", "tick", payload={}, actor=CLOCK_ACTOR)
    assert isinstance(_decide(erasure, history_bytes=10_000), Admitted)
    assert isinstance(_decide(tick, history_bytes=10_000), Admitted)
    assert isinstance(
        _decide(make_event("PreferenceStated", "fits"), history_bytes=9_800), Admitted
    )


SIGNING = GatePolicy(
    tenants={
        "clinic-a": TenantPolicy(
            frozenset({"ehr-adapter", "patient-app"}),
            frozenset({"care"}),
            signing_actors=frozenset({"ehr-adapter"}),
        )
    }
)


@pytest.mark.parametrize(
    ("actor", "signature", "reasons"),
    [
        ("ehr-adapter", Signature.VALID, ()),
        ("ehr-adapter", Signature.ABSENT, ("signature_missing",)),
        ("ehr-adapter", Signature.INVALID, ("signature_invalid",)),
        ("ehr-adapter", Signature.NOT_CHECKED, ()),
        ("patient-app", Signature.ABSENT, ()),
    ],
    ids=["signed", "unsigned", "another key", "a file without signatures", "actor without a key"],
)
def test_given_an_actor_with_a_registered_key_then_only_its_signed_events_are_admitted(
    actor: str, signature: Signature, reasons: tuple[str, ...]
) -> None:
    event = make_event("PreferenceStated", f"signed-{actor}-{signature.value}", actor=actor)
    assert _reasons(_decide(event, policy=SIGNING, signature=signature)) == reasons


def test_an_erasure_request_of_a_signing_actor_must_be_signed_too() -> None:
    request = make_event("ErasureRequested", "signed-erasure", purpose="erasure")
    assert _reasons(_decide(request, policy=SIGNING, signature=Signature.ABSENT)) == (
        "signature_missing",
    )
    assert _reasons(_decide(request, policy=SIGNING, signature=Signature.VALID)) == ()


@pytest.mark.parametrize(
    ("window", "claimed_at", "admitted"),
    [
        pytest.param({"valid_until": T0 + timedelta(hours=1)}, 2, False, id="after it expired"),
        pytest.param({"valid_from": T0 + timedelta(hours=3)}, 2, False, id="before it starts"),
        pytest.param(
            {"valid_from": T0 + timedelta(hours=1), "valid_until": T0 + timedelta(hours=3)},
            2,
            True,
            id="inside its window",
        ),
    ],
)
def test_a_consent_counts_only_inside_its_validity_window(
    window: dict[str, Any], claimed_at: int, admitted: bool
) -> None:
    consent = make_event(
        "ConsentChanged",
        "windowed-consent",
        tenant="assistant",
        actor="chat-agent",
        payload={"purpose": "personalization", "granted": True, "special_category": True},
        **window,
    )
    allergy = make_event(
        "AllergyRecorded",
        "health-claim",
        tenant="assistant",
        actor="chat-agent",
        purpose="personalization",
        at=timedelta(hours=claimed_at),
    )
    decision = _decide(allergy, replay([consent]))
    if admitted:
        assert isinstance(decision, Admitted)
    else:
        assert _reasons(decision) == ("special_category_without_consent",)


def test_a_follow_up_of_a_claim_not_yet_known_is_admitted() -> None:
    stop = make_event("MedicationStopped", "early-stop", payload={"prescription_id": "rx-9"})
    assert isinstance(_decide(stop, replay([make_event("TravelRecorded", "trip")])), Admitted)


def test_a_correction_of_another_event_type_is_refused() -> None:
    order = make_event(
        "MedicationPrescribed", "order", payload={"prescription_id": "rx-1", "drug": "amoxicillin"}
    )
    stop = make_event(
        "MedicationStopped",
        "stop-correcting-order",
        at=timedelta(days=1),
        supersedes=order.id,
        payload={"prescription_id": "rx-1"},
    )
    assert _reasons(_decide(stop, replay([order]))) == ("supersedes_other_type",)


@pytest.mark.parametrize(
    ("held", "correcting", "refused"),
    [
        pytest.param(
            "verified_source",
            "inferred",
            True,
            id="given a verified fact when an inference corrects it then the correction is refused",
        ),
        pytest.param(
            "explicit_statement",
            "observed_behavior",
            True,
            id="given an explicit fact when an observation corrects it then the correction is refused",
        ),
        pytest.param(
            "inferred",
            "inferred",
            False,
            id="given an inferred fact when an inference corrects it then the correction is admitted",
        ),
        pytest.param(
            "verified_source",
            "user_provided_fact",
            False,
            id="given a verified fact when the user corrects it then the correction is admitted",
        ),
    ],
)
def test_given_a_correction_by_an_inference_then_it_never_overrides_an_explicit_or_verified_claim(
    held: str, correcting: str, refused: bool
) -> None:
    """DESIGN §4.4: inferred claims never override explicit or verified ones. A correction wins
    outright in the fold, so an inference that `supersedes` a verified value would replace it."""
    verified = make_event(
        "FactAsserted", "lab", origin=held, payload={"key": "blood_type", "value": "A+"}
    )
    guess = make_event(
        "FactAsserted",
        "guess",
        at=timedelta(days=1),
        origin=correcting,
        supersedes=verified.id,
        payload={"key": "blood_type", "value": "B+"},
    )
    reasons = _reasons(_decide(guess, replay([verified])))
    assert reasons == (("supersedes_stronger_claim",) if refused else ())


@pytest.mark.parametrize(
    ("envelope", "payload", "expected"),
    [
        pytest.param(
            {"subject": "alice\u200b"},
            None,
            "subject_id holds a character that does not print (U+200B)",
            id="given a subject id with a zero-width space then it is refused naming the character",
        ),
        pytest.param(
            {"subject": "\uff50-1001"},
            None,
            "subject_id holds a character its NFKC form writes otherwise (U+FF50)",
            id="given a subject id with a full-width letter, a lookalike of another, then refused",
        ),
        pytest.param(
            {"subject": "jose\u0301"},
            None,
            "subject_id holds a character its NFKC form writes otherwise (U+0301)",
            id="given a subject id with a mark that composes with its letter then it is refused",
        ),
        pytest.param(
            {"purpose": "care\u202e"},
            None,
            "purpose holds a character that does not print (U+202E)",
            id="given a purpose with a right-to-left override then it is refused",
        ),
        pytest.param(
            {"actor": "ehr-adapter\x00"},
            None,
            "actor holds a control character (U+0000)",
            id="given an actor ending in NUL then it is refused",
        ),
        pytest.param(
            {},
            {"note": "cold \x1b[2J\x1b[H weather"},
            "payload.note holds a control character (U+001B)",
            id="given a note with a terminal escape sequence then it is refused",
        ),
        pytest.param(
            {},
            {"key": "di\u200bet", "value": "vegan"},
            "payload.key holds a character that does not print (U+200B)",
            id="given a preference key with a zero-width space, another key, then it is refused",
        ),
        pytest.param(
            {},
            {"key": "\uff44iet", "value": "vegan"},
            "payload.key holds a character its NFKC form writes otherwise (U+FF44)",
            id="given a preference key with a full-width letter then it is refused",
        ),
        pytest.param(
            {"source_ref": "chat/42\x07"},
            None,
            "source_ref holds a control character (U+0007)",
            id="given a source reference with a bell character then it is refused",
        ),
    ],
)
def test_given_unprintable_characters_then_the_event_is_refused_naming_field_and_code_point(
    envelope: dict[str, Any], payload: dict[str, Any] | None, expected: str
) -> None:
    subject = envelope.pop("subject", "patient-1")
    event = make_event("PreferenceStated", "odd", subject=subject, payload=payload, **envelope)
    decision = _decide(event)
    assert isinstance(decision, Rejected)
    assert ReasonCode.INVALID_RECORD in decision.reasons
    assert f"invalid_record: {expected}" in decision.detail.split("; ")


@pytest.mark.parametrize(
    "note",
    [
        pytest.param("line one\nline two\r\n\tindented", id="line breaks and tabs"),
        pytest.param(
            "👩\u200d👩\u200d👧 family dinner", id="an emoji joined by zero-width joiners"
        ),
        pytest.param("\u05e9\u05dc\u05d5\u05dd \u200fשבת", id="a right-to-left mark in Hebrew"),
        pytest.param("café\u00a0au lait", id="a no-break space"),
    ],
)
def test_given_free_text_with_marks_that_belong_to_writing_then_it_is_admitted(note: str) -> None:
    event = make_event("PreferenceStated", "written", payload={"note": note})
    assert isinstance(_decide(event), Admitted)


MIDNIGHT = datetime(2024, 2, 1, tzinfo=UTC)
"""The start of a UTC day: how a date without a time (FHIR `authoredOn: "2024-02-01"`) reads."""


@pytest.mark.parametrize(
    ("occurred", "now", "admitted"),
    [
        pytest.param(MIDNIGHT, MIDNIGHT - timedelta(hours=13), True, id="a date begun at UTC+13"),
        pytest.param(MIDNIGHT, MIDNIGHT - timedelta(hours=14), True, id="a date begun at UTC+14"),
        pytest.param(MIDNIGHT, MIDNIGHT - timedelta(hours=15), False, id="a date begun nowhere"),
        pytest.param(
            MIDNIGHT - timedelta(hours=1),
            MIDNIGHT - timedelta(hours=13),
            False,
            id="a time of day twelve hours ahead",
        ),
    ],
)
def test_given_a_date_without_a_time_then_it_is_in_the_future_only_once_begun_nowhere(
    occurred: datetime, now: datetime, admitted: bool
) -> None:
    """A record dated today by a producer ahead of UTC (New Zealand, Kiribati) is not refused
    for its date; a time of day ahead of the clock still is."""
    decision = _decide(make_event("PreferenceStated", "dated", at=occurred), now=now)
    assert isinstance(decision, Admitted) is admitted


def test_given_a_time_in_the_future_then_the_detail_names_it_and_now() -> None:
    event = make_event("PreferenceStated", "far", at=datetime(2042, 1, 1, tzinfo=UTC))
    decision = _decide(event)
    assert isinstance(decision, Rejected)
    assert decision.detail == (
        "occurred_in_future: occurred_at 2042-01-01T00:00:00Z is in the future "
        "(now is 2024-01-31T09:00:00Z); recorded_in_future: recorded_at 2042-01-01T00:00:00Z "
        "is in the future (now is 2024-01-31T09:00:00Z)"
    )


@pytest.mark.parametrize(
    ("held", "sent", "reason"),
    [
        pytest.param(1, True, ReasonCode.EVENT_ID_REUSED, id="1 then true"),
        pytest.param(False, 0, ReasonCode.EVENT_ID_REUSED, id="false then 0"),
        pytest.param(True, True, ReasonCode.DUPLICATE_EVENT_ID, id="true then true"),
        pytest.param(2, 2, ReasonCode.DUPLICATE_EVENT_ID, id="2 then 2"),
    ],
)
def test_given_an_event_id_again_then_a_boolean_is_not_a_number(
    held: object, sent: object, reason: ReasonCode
) -> None:
    """JSON's true is not 1: the same event id with a fact `true` where `1` was accepted is
    another event (event_id_reused), not an exact repeat whose payload is silently dropped."""

    def fact(value: object) -> Event:
        return make_event("FactAsserted", "smoker", payload={"key": "smoker", "value": value})

    decision = _decide(fact(sent), replay([fact(held)]))
    assert isinstance(decision, Rejected)
    assert decision.reasons == (reason,)


@pytest.mark.parametrize("subject", ["张三", "홍길동", "jos\u00e9", "p\u2010canary", "O'Brien"])
def test_given_subject_ids_written_in_nfkc_form_then_they_are_admitted(subject: str) -> None:
    event = make_event("PreferenceStated", "named", subject=subject)
    assert isinstance(_decide(event), Admitted)


@pytest.mark.parametrize(
    ("alert_id", "refused"),
    [
        pytest.param("not-a-uuid", True, id="a word"),
        pytest.param("2578d28c-x", True, id="a cut alert id"),
        pytest.param("8a4e7a62-0f8b-5d4a-9f0e-2f4f5d6c7b8a", False, id="an alert not seen yet"),
        pytest.param("urn:uuid:8A4E7A62-0F8B-5D4A-9F0E-2F4F5D6C7B8A", False, id="another spelling"),
    ],
)
def test_given_an_acknowledgement_then_an_alert_id_that_is_no_uuid_is_invalid_record(
    alert_id: str, refused: bool
) -> None:
    event = make_event(
        "AlertAcknowledged", "ack", payload={"alert_id": alert_id, "action": "accepted"}
    )
    decision = _decide(event)
    if refused:
        assert isinstance(decision, Rejected)
        assert decision.reasons == (ReasonCode.INVALID_RECORD,)
        assert "payload.alert_id is not an alert id" in decision.detail
    else:
        assert isinstance(decision, Admitted)


@pytest.mark.parametrize(
    ("origin", "action", "refused"),
    [
        pytest.param("inferred", "overridden", True, id="an inferred override"),
        pytest.param("observed_behavior", "accepted", True, id="an observed acceptance"),
        pytest.param("explicit_statement", "overridden", False, id="a clinician's override"),
        pytest.param("user_provided_fact", "accepted", False, id="a patient's acceptance"),
        pytest.param("imported", "overridden", False, id="an override imported from the EHR"),
    ],
)
def test_given_an_acknowledgement_then_only_one_a_person_stated_is_admitted(
    origin: str, action: str, refused: bool
) -> None:
    event = make_event(
        "AlertAcknowledged",
        "ack",
        origin=origin,
        payload={
            "alert_id": "8a4e7a62-0f8b-5d4a-9f0e-2f4f5d6c7b8a",
            "action": action,
            "reason": "tolerated a full course in 2023",
        },
    )
    decision = _decide(event)
    if refused:
        assert isinstance(decision, Rejected)
        assert decision.reasons == (ReasonCode.ACKNOWLEDGEMENT_NOT_STATED,)
        assert "a person's decision" in decision.detail
    else:
        assert isinstance(decision, Admitted)
