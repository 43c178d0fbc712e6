"""Purpose-bound reads: given claims recorded for purposes, with or without consent, when read for
a purpose, then only what that purpose may use."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from projections.gate import TenantPolicy
from projections.reads import readable_document, readable_document_as_of
from projections.state import replay
from schemas.events import DEFAULT_PURPOSE, Event
from tests.factories import T0, make_event

CLINIC = TenantPolicy(frozenset({"ehr-adapter"}), frozenset({"care"}))
ASSISTANT = TenantPolicy(frozenset({"ehr-adapter"}), frozenset())
DAY = timedelta(days=1)


def history(*extra: Event) -> list[Event]:
    return [
        make_event("AllergyRecorded", "allergy", purpose="care"),
        make_event("MedicationPrescribed", "rx", at=DAY, purpose="care"),
        make_event(
            "PreferenceStated",
            "seat",
            at=2 * DAY,
            purpose="personalization",
            payload={"key": "seat", "value": "aisle"},
        ),
        make_event("TravelRecorded", "trip", at=3 * DAY, purpose="personalization"),
        *extra,
    ]


def visible(document: dict[str, Any]) -> dict[str, int]:
    return {
        "allergies": len(document["allergies"]),
        "medications": len(document["medications"]["active"]),
        "preferences": len(document["preferences"]),
        "trips": len(document["trips"]),
    }


CASES = [
    pytest.param(
        CLINIC,
        "care",
        [],
        {"allergies": 1, "medications": 1, "preferences": 0, "trips": 0},
        id="given care claims when read for care at a clinic then the health data without consent (care is exempt)",
    ),
    pytest.param(
        CLINIC,
        "personalization",
        [],
        {"allergies": 0, "medications": 0, "preferences": 1, "trips": 1},
        id="given a read for personalization then only claims recorded for personalization",
    ),
    pytest.param(
        ASSISTANT,
        "care",
        [],
        {"allergies": 0, "medications": 0, "preferences": 0, "trips": 0},
        id="given a tenant without a care exemption and no consent then no health data",
    ),
    pytest.param(
        ASSISTANT,
        "care",
        [
            make_event(
                "ConsentChanged",
                "consent",
                at=4 * DAY,
                payload={"purpose": "care", "granted": True, "special_category": True},
            )
        ],
        {"allergies": 1, "medications": 1, "preferences": 0, "trips": 0},
        id="given explicit special-category consent for the purpose then the health data",
    ),
    pytest.param(
        ASSISTANT,
        "care",
        [
            make_event(
                "ConsentChanged",
                "consent",
                at=4 * DAY,
                payload={"purpose": "care", "granted": True, "special_category": True},
            ),
            make_event(
                "ConsentChanged",
                "withdrawn",
                at=5 * DAY,
                payload={"purpose": "care", "granted": False, "special_category": True},
            ),
        ],
        {"allergies": 0, "medications": 0, "preferences": 0, "trips": 0},
        id="given consent later withdrawn then no health data",
    ),
]


@pytest.mark.parametrize(("tenant", "purpose", "extra", "expected"), CASES)
def test_purpose_bound_read(
    tenant: TenantPolicy, purpose: str, extra: list[Event], expected: dict[str, int]
) -> None:
    document = readable_document(replay(history(*extra)), purpose, tenant)
    assert visible(document) == expected
    assert document["read"]["purpose"] == purpose


def test_given_no_purpose_then_the_default_purpose_not_everything() -> None:
    document = readable_document(replay(history()), tenant=CLINIC)
    assert document["read"]["purpose"] == DEFAULT_PURPOSE == "care"
    assert document["read"]["withheld"] > 0
    assert visible(document)["preferences"] == 0


def test_given_an_expired_claim_then_it_is_not_read() -> None:
    expired = make_event(
        "PreferenceStated",
        "meal",
        at=DAY,
        purpose="care",
        valid_until=T0 + 2 * DAY,
        payload={"key": "meal", "value": "halal"},
    )
    later = make_event(
        "PreferenceStated",
        "later",
        at=10 * DAY,
        purpose="care",
        payload={"key": "other", "value": "x"},
    )
    document = readable_document(replay([expired, later]), "care", CLINIC)
    assert list(document["preferences"]) == ["other"]


def test_given_a_claim_that_expired_after_the_latest_event_then_a_read_now_leaves_it_out() -> None:
    meal = make_event(
        "PreferenceStated",
        "meal",
        at=DAY,
        purpose="care",
        valid_until=T0 + 3 * DAY,
        payload={"key": "meal", "value": "halal"},
    )
    state = replay([meal])

    as_of_latest_event = readable_document(state, "care", CLINIC)
    read_later = readable_document(state, "care", CLINIC, read_at=T0 + 4 * DAY)
    read_before_expiry = readable_document(state, "care", CLINIC, read_at=T0 + 2 * DAY)

    assert list(as_of_latest_event["preferences"]) == ["meal"]
    assert list(read_later["preferences"]) == []
    assert read_later["read"]["withheld"] == 1
    assert list(read_before_expiry["preferences"]) == ["meal"]


def test_given_a_claim_not_yet_in_force_then_a_read_before_its_valid_from_leaves_it_out() -> None:
    next_course = make_event(
        "MedicationPrescribed",
        "next-course",
        at=DAY,
        purpose="care",
        valid_from=T0 + 5 * DAY,
        payload={"prescription_id": "rx-next", "drug": "ibuprofen"},
    )
    state = replay([next_course])

    before = readable_document(state, "care", CLINIC, read_at=T0 + 2 * DAY)
    from_then = readable_document(state, "care", CLINIC, read_at=T0 + 5 * DAY)

    assert before["medications"]["active"] == []
    assert before["read"]["withheld"] == 1
    assert [m["prescription_id"] for m in from_then["medications"]["active"]] == ["rx-next"]


def test_given_a_consent_that_expired_then_a_read_after_it_leaves_the_health_data_out() -> None:
    consent = make_event(
        "ConsentChanged",
        "consent-until-day-6",
        at=4 * DAY,
        valid_until=T0 + 6 * DAY,
        payload={"purpose": "care", "granted": True, "special_category": True},
    )
    state = replay(history(consent))
    inside = readable_document(state, "care", ASSISTANT, read_at=T0 + 5 * DAY)
    after = readable_document(state, "care", ASSISTANT, read_at=T0 + 7 * DAY)
    assert (visible(inside)["allergies"], visible(after)["allergies"]) == (1, 0)
    windows = [
        {key: read["consents"]["care"][key] for key in ("granted", "valid_until", "in_force")}
        for read in (inside, after)
    ]
    until = "2024-01-07T09:00:00.000Z"
    assert windows == [
        {"granted": True, "valid_until": until, "in_force": True},
        {"granted": True, "valid_until": until, "in_force": False},
    ]


def test_given_a_home_country_told_for_another_purpose_then_trips_read_without_it() -> None:
    home = make_event(
        "FactAsserted",
        "home-research",
        purpose="research",
        payload={"key": "home_country", "value": "SE"},
    )
    trip = make_event("TravelRecorded", "trip", at=DAY, purpose="care")
    state = replay([home, trip])

    care = readable_document(state, "care", CLINIC)
    research = readable_document(state, "research", CLINIC)

    assert [(t["home_country"], t["international"]) for t in care["trips"]] == [(None, None)]
    assert care["facts"] == {}
    assert research["trips"] == []
    assert research["facts"]["home_country"]["value"] == "SE"


def test_given_an_acknowledgement_recorded_for_another_purpose_then_a_read_leaves_it_out() -> None:
    override = make_event(
        "AlertAcknowledged",
        "override",
        purpose="research",
        payload={"alert_id": "a-1", "action": "overridden", "reason": "penicillin tolerated"},
    )
    state = replay([override])

    care = readable_document(state, "care", CLINIC)
    research_exempt = TenantPolicy(frozenset({"ehr-adapter"}), frozenset({"research"}))
    research = readable_document(state, "research", research_exempt)

    assert care["acknowledgements"] == {}
    assert care["read"]["withheld"] == 1
    assert research["acknowledgements"]["a-1"]["reason"] == "penicillin tolerated"


def _diet(name: str, day: int, value: str, **envelope: Any) -> Event:
    return make_event(
        "PreferenceStated",
        name,
        at=day * DAY,
        purpose="personalization",
        payload={"key": "diet", "value": value},
        **envelope,
    )


@pytest.mark.parametrize(
    ("until", "expected"),
    [
        pytest.param(None, [["vegan", "omnivore", "pescatarian"]], id="all in force"),
        pytest.param(
            {"omnivore": T0 + 3 * DAY},
            [["vegan", "pescatarian"]],
            id="one challenger expired: the others still dispute",
        ),
        pytest.param(
            {"omnivore": T0 + 3 * DAY, "pescatarian": T0 + 3 * DAY},
            [],
            id="every challenger expired: nothing is disputed",
        ),
        pytest.param(
            {"vegan": T0 + 3 * DAY},
            [["omnivore", "pescatarian"]],
            id="the held claim expired: the two still in force dispute in their turn",
        ),
    ],
)
def test_given_a_conflict_then_a_read_shows_it_while_the_held_claim_and_a_challenger_are_in_force(
    until: dict[str, Any] | None, expected: list[list[str]]
) -> None:
    windows = until or {}
    statements = [
        _diet(value, day, value, **({"valid_until": windows[value]} if value in windows else {}))
        for day, value in enumerate(["vegan", "omnivore", "pescatarian"])
    ]
    later = make_event("TravelRecorded", "trip-later", at=5 * DAY, purpose="personalization")
    document = readable_document(replay([*statements, later]), "personalization", ASSISTANT)
    assert [[claim["value"] for claim in c["claims"]] for c in document["conflicts"]] == expected


def _course_then_stop_and_new_allergy() -> list[Event]:
    """Penicillin allergy (day 0), amoxicillin (day 1) stopped on day 10, a latex allergy
    recorded on day 12 about a reaction on day 5."""
    return [
        make_event("AllergyRecorded", "allergy", purpose="care"),
        make_event("MedicationPrescribed", "rx", at=DAY, purpose="care"),
        make_event("MedicationStopped", "rx-stop", at=10 * DAY, purpose="care"),
        make_event(
            "AllergyRecorded",
            "latex",
            at=5 * DAY,
            recorded=T0 + 12 * DAY,
            purpose="care",
            payload={"allergy_id": "allergy-latex", "substance": "latex"},
        ),
    ]


def test_given_an_as_of_read_then_the_subject_as_it_stood_then_and_as_it_was_known_then() -> None:
    state = replay(_course_then_stop_and_new_allergy())
    now = T0 + 30 * DAY

    then = readable_document_as_of(state, T0 + 7 * DAY, now, tenant=CLINIC)
    known_then = readable_document_as_of(
        state, T0 + 7 * DAY, now, known_at=T0 + 7 * DAY, tenant=CLINIC
    )
    today = readable_document(state, "care", CLINIC, read_at=now)

    assert [m["prescription_id"] for m in then["medications"]["active"]] == ["rx-1"]
    assert sorted(a["substance"] for a in then["allergies"]) == ["latex", "penicillin"]
    assert [a["substance"] for a in known_then["allergies"]] == ["penicillin"]
    assert today["medications"]["active"] == []
    assert (then["read"]["as_of"], then["read"]["known_at"]) == ("2024-01-08T09:00:00.000Z", None)
    assert known_then["read"]["known_at"] == "2024-01-08T09:00:00.000Z"


def test_given_a_consent_withdrawn_since_then_an_as_of_read_of_the_past_withholds_health_data() -> (
    None
):
    granted = make_event("ConsentChanged", "consent", at=-DAY)
    withdrawn = make_event(
        "ConsentChanged",
        "consent-withdrawn",
        at=20 * DAY,
        payload={"purpose": "care", "granted": False, "special_category": True},
    )
    still_granted = replay([*_course_then_stop_and_new_allergy(), granted])
    since_withdrawn = replay([*_course_then_stop_and_new_allergy(), granted, withdrawn])
    past, now = T0 + 7 * DAY, T0 + 30 * DAY

    allowed = readable_document_as_of(still_granted, past, now, tenant=ASSISTANT)
    refused = readable_document_as_of(since_withdrawn, past, now, tenant=ASSISTANT)

    assert (visible(allowed)["allergies"], visible(refused)["allergies"]) == (2, 0)
    assert refused["read"]["withheld"] >= 3


def test_given_an_as_of_time_before_the_first_event_then_nothing_is_shown() -> None:
    state = replay(_course_then_stop_and_new_allergy())
    document = readable_document_as_of(state, T0 - DAY, T0 + 30 * DAY, tenant=CLINIC)
    assert visible(document) == {"allergies": 0, "medications": 0, "preferences": 0, "trips": 0}


def test_given_an_as_of_time_to_come_then_what_will_be_in_force_if_nothing_changes() -> None:
    course = make_event(
        "MedicationPrescribed", "course", at=DAY, purpose="care", valid_until=T0 + 8 * DAY
    )
    state = replay([make_event("AllergyRecorded", "allergy", purpose="care"), course])
    read_on_day_two = T0 + 2 * DAY
    in_a_week = readable_document_as_of(state, T0 + 9 * DAY, read_on_day_two, tenant=CLINIC)
    tomorrow = readable_document_as_of(state, T0 + 3 * DAY, read_on_day_two, tenant=CLINIC)
    assert (visible(tomorrow)["medications"], visible(in_a_week)["medications"]) == (1, 0)
    assert visible(in_a_week)["allergies"] == 1


def test_given_a_key_of_another_purpose_then_each_of_its_statements_counts_as_withheld() -> None:
    statements = [_diet(f"d{day}", day * 10, value) for day, value in enumerate(["a", "b", "c"])]
    elsewhere = make_event(
        "PreferenceStated",
        "mine",
        at=40 * DAY,
        purpose="marketing",
        payload={"key": "diet", "value": "d"},
    )
    document = readable_document(replay([*statements, elsewhere]), "marketing", ASSISTANT)
    assert document["preferences"]["diet"]["value"] == "d"
    assert document["read"]["withheld"] == 3
