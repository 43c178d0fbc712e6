"""The conflict policy of DESIGN §4.4, case by case: given statements, when folded in any
order, then what the subject's memory holds."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from itertools import permutations
from typing import Any

import pytest

from projections.as_of import state_as_of
from projections.document import state_document, state_hash
from projections.queries import (
    active_allergies,
    active_medications,
    claim_history,
    international_trips,
    open_conflicts,
    trips,
)
from projections.state import Kind, UserState, replay
from projections.views import claim_value
from rules.engine import default_rules
from rules.knowledge.bundled import load_bundled_knowledge
from schemas.alerts import AlertStatus
from tests.factories import T0, event_id, make_event
from tests.unit.test_rules import run

DAY = timedelta(days=1)


def pref(name: str, value: str, day: float, **envelope: Any) -> Any:
    return make_event("PreferenceStated", name, at=day * DAY, payload={"value": value}, **envelope)


def fact(
    name: str, value: Any, day: float, origin: str = "user_provided_fact", **envelope: Any
) -> Any:
    return make_event(
        "FactAsserted",
        name,
        at=day * DAY,
        origin=origin,
        payload={"key": "blood_type", "value": value},
        **envelope,
    )


def _every_order(events: list[Any]) -> Any:
    """The state, after checking every arrival order gives the same one."""
    hashes = {state_hash(replay(order)) for order in permutations(events)}
    assert len(hashes) == 1
    return replay(events)


PREFERENCE_CASES = [
    pytest.param(
        [
            pref("v1", "vegan", 5, source_ref="Patient/p1", recorded=T0 + 5 * DAY),
            pref("v2", "omnivore", 1, source_ref="Patient/p1", recorded=T0 + 6 * DAY),
        ],
        "omnivore",
        None,
        id="given two versions of one source record then the one recorded later holds, "
        "whatever their valid times, and no conflict opens",
    ),
    pytest.param(
        [
            pref("v1", "vegan", 1, source_ref="Patient/p1", recorded=T0 + 6 * DAY),
            pref("v2", "omnivore", 5, source_ref="Patient/p1", recorded=T0 + 5 * DAY),
        ],
        "vegan",
        None,
        id="given an older version valid later then the newer version still holds",
    ),
    pytest.param(
        [pref("p1", "vegetarian", 0), pref("p2", "vegan", 30)],
        "vegan",
        None,
        id="given two explicit statements a month apart then the latest wins",
    ),
    pytest.param(
        [pref("p1", "vegetarian", 0), pref("p2", "omnivore", 2)],
        "vegetarian",
        "omnivore",
        id="given an explicit reversal within the window then the held value stays and confirmation is needed",
    ),
    pytest.param(
        [pref("p1", "vegetarian", 0), pref("p2", "omnivore", 2), pref("p3", "omnivore", 3)],
        "omnivore",
        None,
        id="given a reversal confirmed by a second statement then it wins and the conflict closes",
    ),
    pytest.param(
        [pref("p1", "vegetarian", 0), pref("p2", "omnivore", 2), pref("p3", "vegetarian", 3)],
        "vegetarian",
        None,
        id="given a reversal followed by a reaffirmation then the held value stays and the conflict closes",
    ),
    pytest.param(
        [pref("p1", "vegetarian", 0), pref("p2", "pescatarian", 40, origin="inferred")],
        "vegetarian",
        None,
        id="given an inference after an explicit statement then the inference never overrides it",
    ),
    pytest.param(
        [
            pref("p1", "pescatarian", 0, origin="inferred"),
            pref("p2", "vegan", 5, origin="observed_behavior"),
        ],
        "vegan",
        None,
        id="given only inferred and observed values then the latest of them is used",
    ),
    pytest.param(
        [pref("p1", "pescatarian", 0, origin="inferred"), pref("p2", "vegan", 1)],
        "vegan",
        None,
        id="given an explicit statement after an inference then the explicit one wins at once",
    ),
]


@pytest.mark.parametrize(("events", "value", "challenger"), PREFERENCE_CASES)
def test_preference_policy(events: list[Any], value: str, challenger: str | None) -> None:
    state = _every_order(events)
    (view,) = state.preference_views()
    assert view.value == value
    conflict = None if view.conflict is None else view.conflict.challenger.payload.value
    assert conflict == challenger


def test_given_a_correction_via_supersedes_within_the_window_then_it_wins_without_conflict() -> (
    None
):
    first = pref("p1", "vegetarian", 0)
    correction = pref("p2", "vegan", 1, supersedes=first.id)
    state = _every_order([first, correction])
    (view,) = state.preference_views()
    assert (view.value, view.conflict) == ("vegan", None)
    history = claim_history(state, Kind.PREFERENCE, "diet")
    assert [(h.value, h.status, h.replaced_by) for h in history] == [
        ("vegetarian", "corrected", correction.id),
        ("vegan", "current", None),
    ]


def test_given_a_correction_that_is_retracted_then_the_corrected_value_holds_again_unreplaced() -> (
    None
):
    first = fact("w1", "A+", 0)
    correction = fact("w2", "B+", 1, supersedes=first.id)
    recorrection = fact("w3", "O-", 2, supersedes=correction.id)
    retraction = make_event(
        "ClaimRetracted", "r", at=3 * DAY, payload={"claim_id": recorrection.id}
    )
    state = _every_order([first, correction, recorrection, retraction])
    history = claim_history(state, Kind.FACT, "blood_type")
    assert [(h.value, h.status, h.replaced_by) for h in history] == [
        ("A+", "corrected", correction.id),
        ("B+", "current", None),
        ("O-", "retracted", None),
    ]


def test_given_two_corrections_of_one_preference_that_disagree_then_confirmation_is_needed() -> (
    None
):
    """Two corrections of the same statement, a day apart, that say different things: the
    later one must not silently overwrite the earlier (it is a reversal like any other)."""
    first = pref("p1", "vegetarian", 0)
    corrected = pref("p2", "vegan", 1, supersedes=first.id)
    recorrected = pref("p3", "omnivore", 2, supersedes=first.id)
    state = _every_order([first, corrected, recorrected])
    (view,) = state.preference_views()
    assert view.value == "vegan"
    assert view.conflict is not None
    assert claim_value(view.conflict.challenger) == "omnivore"
    history = claim_history(state, Kind.PREFERENCE, "diet")
    assert [(h.value, h.status) for h in history] == [
        ("vegetarian", "corrected"),
        ("vegan", "current"),
        ("omnivore", "challenging"),
    ]


@pytest.mark.parametrize(
    ("second", "value", "conflicted"),
    [
        pytest.param(
            ("B+", "inferred"),
            "A+",
            False,
            id="given a verified correction then an inferred correction of the same claim then the verified one stands",
        ),
        pytest.param(
            ("B+", "user_provided_fact"),
            "A+",
            False,
            id="given a verified correction then a user's correction of the same claim then the verified one stands",
        ),
    ],
)
def test_given_two_corrections_of_one_fact_then_the_higher_rank_holds(
    second: tuple[str, str], value: str, conflicted: bool
) -> None:
    first = fact("f1", "O+", 0)
    verified = fact("f2", "A+", 1, "verified_source", supersedes=first.id)
    other = fact("f3", second[0], 2, second[1], supersedes=first.id)
    state = _every_order([first, verified, other])
    (view,) = state.fact_views()
    assert (view.value, view.conflict is not None) == (value, conflicted)


def test_given_two_equal_rank_corrections_of_one_fact_that_disagree_then_a_conflict_opens() -> None:
    first = fact("f1", "O+", 0)
    corrected = fact("f2", "A+", 1, supersedes=first.id)
    recorrected = fact("f3", "B+", 2, supersedes=first.id)
    state = _every_order([first, corrected, recorrected])
    (view,) = state.fact_views()
    assert view.value == "A+"
    assert view.conflict is not None
    assert claim_value(view.conflict.challenger) == "B+"


def test_given_a_correction_of_a_claim_a_chain_already_corrected_then_confirmation_is_needed() -> (
    None
):
    """p1 is corrected by p2, p2 by p3; p4 corrects p1 again. p4 does not correct what the
    chain holds now (p3), so it must not replace it silently: it is weighed like a reversal."""
    first = pref("p1", "vegetarian", 0)
    second = pref("p2", "vegan", 1, supersedes=first.id)
    third = pref("p3", "omnivore", 2, supersedes=second.id)
    fourth = pref("p4", "pescatarian", 3, supersedes=first.id)
    (view,) = _every_order([first, second, third, fourth]).preference_views()
    assert view.value == "omnivore"
    assert view.conflict is not None
    assert claim_value(view.conflict.challenger) == "pescatarian"


def test_given_a_chain_of_corrections_then_the_last_link_wins_without_a_conflict() -> None:
    """A correction of a correction replaces it outright (no sibling to weigh it against),
    even when the middle link is later retracted."""
    first = pref("p1", "vegetarian", 0)
    second = pref("p2", "vegan", 1, supersedes=first.id)
    third = pref("p3", "omnivore", 2, supersedes=second.id)
    retraction = make_event("ClaimRetracted", "r", at=3 * DAY, payload={"claim_id": second.id})
    for events in ([first, second, third], [first, second, third, retraction]):
        (view,) = _every_order(events).preference_views()
        assert (view.value, view.conflict) == ("omnivore", None)


def test_given_a_superseded_value_then_history_keeps_it_with_superseded_by() -> None:
    events = [pref("p1", "vegetarian", 0), pref("p2", "vegan", 30), pref("p3", "omnivore", 60)]
    state = _every_order(events)
    history = claim_history(state, Kind.PREFERENCE, "diet")
    assert [(h.value, h.status, h.replaced_by) for h in history] == [
        ("vegetarian", "superseded", events[1].id),
        ("vegan", "superseded", events[2].id),
        ("omnivore", "current", None),
    ]


FACT_CASES = [
    pytest.param(
        [fact("f1", "A+", 0, "verified_source"), fact("f2", "B+", 10)],
        "A+",
        False,
        id="given a verified fact and a later user statement then the verified fact stands",
    ),
    pytest.param(
        [fact("f1", "B+", 0), fact("f2", "A+", 10, "verified_source")],
        "A+",
        False,
        id="given a user statement and a later verified fact then the verified fact wins",
    ),
    pytest.param(
        [fact("f1", "A+", 0), fact("f2", "B+", 10)],
        "A+",
        True,
        id="given equal-rank statements that disagree then both are kept and a conflict opens",
    ),
    pytest.param(
        [fact("f1", "A+", 0), fact("f2", "B+", 10, "inferred")],
        "A+",
        False,
        id="given an inferred fact against a stated one then the inference is not adopted",
    ),
    pytest.param(
        [fact("f1", "A+", 0), fact("f2", "A+", 10)],
        "A+",
        False,
        id="given equal-rank statements that agree then no conflict",
    ),
    pytest.param(
        [fact("f1", 1, 0), fact("f2", True, 10)],
        1,
        True,
        id="given the number 1 then true then two statements that disagree, not a repeat",
    ),
    pytest.param(
        [fact("f1", 1, 0), fact("f2", 1.0, 10)],
        1,
        False,
        id="given 1 then 1.0 then the same number",
    ),
    pytest.param(
        [
            fact("v1", "A+", 0, "imported", source_ref="Patient/p1", recorded=T0 + DAY),
            fact("v2", "B+", 10, "imported", source_ref="Patient/p1", recorded=T0 + 20 * DAY),
        ],
        "B+",
        False,
        id="given two versions of one source record then the newer replaces the older",
    ),
    pytest.param(
        [
            fact("v1", "A+", 10, "imported", source_ref="Patient/p1", recorded=T0 + 30 * DAY),
            fact("v2", "B+", 0, "imported", source_ref="Patient/p1", recorded=T0 + 20 * DAY),
        ],
        "A+",
        False,
        id="given an older version valid earlier then the newer version still holds",
    ),
    pytest.param(
        [
            fact("v1", "A+", 0, "verified_source", source_ref="lab:1", recorded=T0 + DAY),
            fact("v2", "B+", 10, "imported", source_ref="Patient/p1", recorded=T0 + 20 * DAY),
        ],
        "A+",
        False,
        id="given statements of two source records then ranks decide as before",
    ),
]


@pytest.mark.parametrize(("events", "value", "conflicted"), FACT_CASES)
def test_fact_policy(events: list[Any], value: Any, conflicted: bool) -> None:
    state = _every_order(events)
    (view,) = state.fact_views()
    assert view.value == value
    assert isinstance(view.value, bool) == isinstance(value, bool)
    assert (view.conflict is not None) is conflicted
    assert len(claim_history(state, Kind.FACT, "blood_type")) == len(events)


def test_given_a_disputed_fact_when_the_challenger_is_restated_then_the_same_conflict_stays() -> (
    None
):
    """Restating the disputing value is the same disagreement: its conflict, and so its
    needs-confirmation alert, stay as they are, in any order."""
    first, challenger = fact("f1", "A+", 0), fact("f2", "B+", 10)
    once = _every_order([first, challenger])
    again = _every_order([first, challenger, fact("f3", "B+", 11), fact("f4", "B+", 12)])
    (disputed,) = once.fact_views()
    (still,) = again.fact_views()
    assert (still.value, still.conflict) == ("A+", disputed.conflict)


@pytest.mark.parametrize(
    "claims",
    [
        pytest.param(
            [
                pref("window", "window", 0, valid_until=T0 + 0.5 * DAY),
                pref("aisle", "aisle", 1),
            ],
            id="a preference that expired, then a new one within the reversal window",
        ),
        pytest.param(
            [
                fact("verified", "A+", 0, "verified_source", valid_until=T0 + 5 * DAY),
                fact("stated", "B+", 10),
            ],
            id="a verified fact that expired, then a stated one",
        ),
    ],
)
def test_given_a_claim_that_expired_then_a_newer_one_wins_without_a_conflict(
    claims: list[Any],
) -> None:
    state: UserState = _every_order(claims)
    (view,) = [*state.preference_views(), *state.fact_views()]
    assert (view.value, view.conflict) == (claim_value(claims[-1]), None)


def test_given_three_equal_rank_sources_that_disagree_then_each_value_stays_in_the_conflict() -> (
    None
):
    """A third disagreeing statement joins the dispute: the second is not dropped from it (nor
    listed as outranked), in any order."""
    events = [fact("f1", "A+", 0), fact("f2", "B+", 10), fact("f3", "O+", 11)]
    state = _every_order(events)
    (conflict,) = open_conflicts(state)
    assert sorted(conflict.claim_ids) == sorted(event.id for event in events)
    history = claim_history(state, Kind.FACT, "blood_type")
    assert [(h.value, h.status) for h in history] == [
        ("A+", "current"),
        ("B+", "challenging"),
        ("O+", "challenging"),
    ]
    restated = _every_order([*events, fact("f4", "B+", 12)])
    assert open_conflicts(restated) == [conflict]


def test_given_two_quick_reversals_then_both_wait_for_confirmation_until_one_is_restated() -> None:
    events = [
        pref("p1", "vegetarian", 0),
        pref("p2", "omnivore", 1),
        pref("p3", "vegan", 2),
    ]
    (view,) = _every_order(events).preference_views()
    assert view.value == "vegetarian"
    assert view.conflict is not None
    assert sorted(claim_value(e) for e in view.conflict.challengers) == ["omnivore", "vegan"]
    (confirmed,) = _every_order([*events, pref("p4", "omnivore", 3)]).preference_views()
    assert (confirmed.value, confirmed.conflict) == ("omnivore", None)


def test_given_an_equal_rank_conflict_when_one_side_is_corrected_then_the_conflict_closes() -> None:
    first, second = fact("f1", "A+", 0), fact("f2", "B+", 10)
    correction = fact("f3", "A+", 11, supersedes=second.id)
    state = _every_order([first, second, correction])
    assert open_conflicts(state) == []
    assert state.fact_views()[0].value == "A+"


def test_given_the_current_value_is_retracted_then_the_previous_value_returns() -> None:
    first, second = pref("p1", "vegetarian", 0), pref("p2", "vegan", 30)
    retraction = make_event("ClaimRetracted", "r", at=31 * DAY, payload={"claim_id": second.id})
    state = _every_order([first, second, retraction])
    assert state.preference_views()[0].value == "vegetarian"
    statuses = [h.status for h in claim_history(state, Kind.PREFERENCE, "diet")]
    assert statuses == ["current", "retracted"]


def test_given_a_late_event_then_it_is_applied_in_valid_time_order() -> None:
    old, new = pref("p1", "vegetarian", 0), pref("p2", "vegan", 30)
    assert replay([new, old]).preference_views()[0].value == "vegan"


def allergy(name: str, day: float = 0, origin: str = "explicit_statement", **payload: Any) -> Any:
    return make_event("AllergyRecorded", name, at=day * DAY, origin=origin, payload=payload)


def status(
    name: str,
    day: float,
    origin: str = "explicit_statement",
    recorded: datetime | None = None,
    **payload: Any,
) -> Any:
    return make_event(
        "AllergyStatusChanged",
        name,
        at=day * DAY,
        recorded=recorded,
        origin=origin,
        payload={"allergy_id": "allergy-1", **payload},
    )


ALLERGY_CASES = [
    pytest.param(
        [
            allergy("v1"),
            make_event(
                "AllergyRecorded",
                "corrected",
                at=T0,
                recorded=T0 + 9 * DAY,
                supersedes=event_id("v1"),
                payload={"verification_status": "refuted"},
            ),
            make_event("AllergyRecorded", "v2", at=5 * DAY, recorded=T0 + 6 * DAY, payload={}),
        ],
        True,
        id="given a correction of the first version learned after a later version then the "
        "later version holds (a correction speaks for the version it corrects)",
    ),
    pytest.param([allergy("a")], True, id="given a confirmed active allergy then it is active"),
    pytest.param(
        [allergy("a"), status("s", 1, verification_status="refuted")],
        False,
        id="given a later refutation then the allergy is no longer active",
    ),
    pytest.param(
        [allergy("a"), status("s", 1, verification_status="entered_in_error")],
        False,
        id="given entered-in-error then the allergy is not active",
    ),
    pytest.param(
        [allergy("a"), status("s", 1, clinical_status="resolved")],
        False,
        id="given a resolved clinical status then the allergy is not active",
    ),
    pytest.param(
        [allergy("a", verification_status="unconfirmed")],
        True,
        id="given an unconfirmed allergy then it still counts as active (safety first)",
    ),
    pytest.param(
        [allergy("a", substance="No known drug allergy", negated=True)],
        False,
        id="given a no-known-allergy negation then there is no allergy",
    ),
    pytest.param(
        [
            allergy("a"),
            status("s", 1, verification_status="refuted"),
            status("s2", 2, verification_status="confirmed"),
        ],
        True,
        id="given refuted then re-confirmed then active again",
    ),
    pytest.param(
        [allergy("a", day=5), status("s", 1, verification_status="refuted")],
        True,
        id="given a refutation dated before the record then the later record stands",
    ),
    pytest.param(
        [
            allergy("v1"),
            allergy("v2", day=1, verification_status="refuted"),
            make_event("AllergyRecorded", "v3", at=T0, recorded=T0 + 2 * DAY, payload={}),
        ],
        True,
        id="given a newer version of the record dated as the first, recorded after a refuted "
        "version, then the newer version stands (newer knowledge wins over later valid time)",
    ),
    pytest.param(
        [
            make_event(
                "AllergyRecorded",
                "v1",
                at=T0,
                recorded=T0 + 2 * DAY,
                source_ref="AllergyIntolerance/a1",
                payload={},
            ),
            make_event(
                "AllergyStatusChanged",
                "s",
                at=DAY,
                source_ref="AllergyIntolerance/a1",
                payload={"allergy_id": "allergy-1", "verification_status": "refuted"},
            ),
        ],
        True,
        id="given a status change of one source record recorded before the version it would "
        "change then that newer version stands",
    ),
    pytest.param(
        [
            make_event("AllergyRecorded", "v1", at=T0, recorded=T0 + 2 * DAY, payload={}),
            status("s", 1, verification_status="refuted"),
        ],
        False,
        id="given a status change from another source recorded before the record it follows "
        "then it applies in valid-time order (a backfilled record does not undo it)",
    ),
    pytest.param(
        [
            make_event("AllergyRecorded", "v1", at=T0, recorded=T0 + 3 * DAY, payload={}),
            status("s", 1, recorded=T0 + 4 * DAY, verification_status="refuted"),
            status("s2", 2, verification_status="confirmed"),
        ],
        True,
        id="given a re-confirmation learned before the record and a refutation before it "
        "learned after it, then the re-confirmation holds",
    ),
    pytest.param(
        [
            make_event("AllergyRecorded", "v1", at=T0, recorded=T0 + 3 * DAY, payload={}),
            status("s", 1, recorded=T0 + 4 * DAY, verification_status="refuted"),
            make_event("AllergyRecorded", "v2", at=2 * DAY, recorded=T0 + 2 * DAY, payload={}),
        ],
        True,
        id="given a record re-recorded after its refutation, learned before the first record, "
        "then the re-recording holds",
    ),
    pytest.param(
        [
            allergy("a", origin="verified_source"),
            status("guess", 1, origin="inferred", verification_status="refuted"),
        ],
        True,
        id="given a verified allergy when an inference refutes it then the allergy stands "
        "(inferred claims never override verified ones)",
    ),
    pytest.param(
        [
            allergy("a", origin="explicit_statement"),
            allergy(
                "guess", day=1, origin="observed_behavior", verification_status="entered_in_error"
            ),
        ],
        True,
        id="given an explicit allergy when an observation records it again in error then it stands",
    ),
    pytest.param(
        [
            allergy("a", origin="inferred"),
            status("s", 1, verification_status="confirmed"),
            status("guess", 2, origin="inferred", clinical_status="resolved"),
        ],
        True,
        id="given an inferred allergy an explicit statement confirmed when an inference resolves "
        "it then the confirmation stands",
    ),
    pytest.param(
        [
            allergy("a", origin="inferred"),
            status("guess", 1, origin="inferred", verification_status="refuted"),
        ],
        False,
        id="given an inferred allergy when an inference refutes it then it is refuted",
    ),
    pytest.param(
        [
            allergy("a", origin="verified_source"),
            status("s", 1, verification_status="refuted", origin="explicit_statement"),
        ],
        True,
        id="given a verified allergy when a statement refutes it then the verified record stands",
    ),
    pytest.param(
        [
            allergy("a", origin="verified_source"),
            status("s", 1, verification_status="refuted", origin="user_provided_fact"),
        ],
        True,
        id="given a verified allergy when the patient's app refutes it then it stays active",
    ),
    pytest.param(
        [
            allergy("a", origin="verified_source"),
            allergy("again", 1, verification_status="refuted", origin="imported"),
        ],
        True,
        id="given a verified allergy when an import re-records it refuted then it stays active",
    ),
    pytest.param(
        [
            allergy("a", origin="verified_source"),
            status("s", 1, verification_status="refuted", origin="verified_source"),
        ],
        False,
        id="given a verified allergy when a verified source refutes it then it is refuted",
    ),
    pytest.param(
        [
            allergy("a"),
            status("s", 1, verification_status="refuted", origin="verified_source"),
            status("back", 2, verification_status="confirmed", origin="user_provided_fact"),
        ],
        False,
        id="given a verified refutation when the patient says confirmed again then it stays refuted",
    ),
    pytest.param(
        [
            allergy("a", origin="verified_source"),
            make_event(
                "AllergyRecorded",
                "rectified",
                at=DAY,
                origin="user_provided_fact",
                supersedes=event_id("a"),
                payload={"verification_status": "refuted"},
            ),
        ],
        False,
        id="given a verified allergy when the subject corrects it with supersedes then corrected",
    ),
]


@pytest.mark.parametrize(("events", "active"), ALLERGY_CASES)
def test_allergy_status(events: list[Any], active: bool) -> None:
    state = _every_order(events)
    assert bool(active_allergies(state)) is active


def test_given_a_stop_then_the_medication_moves_to_history() -> None:
    rx = make_event("MedicationPrescribed", "rx")
    stop = make_event("MedicationStopped", "stop", at=DAY, payload={"reason": "course completed"})
    state = _every_order([rx, stop])
    assert active_medications(state) == []
    document = state_document(state)
    assert [m["stop_reason"] for m in document["medications"]["stopped"]] == ["course completed"]


@pytest.mark.parametrize(
    ("stop_origin", "active"),
    [
        pytest.param("inferred", True, id="given an inferred stop then the order stays active"),
        pytest.param(
            "observed_behavior", True, id="given an observed stop then the order stays active"
        ),
        pytest.param("explicit_statement", False, id="given an explicit stop then it ends"),
    ],
)
def test_an_inference_never_stops_an_explicit_prescription(stop_origin: str, active: bool) -> None:
    rx = make_event("MedicationPrescribed", "rx", origin="explicit_statement")
    stop = make_event("MedicationStopped", "stop", at=DAY, origin=stop_origin)
    guessed_again = make_event(
        "MedicationPrescribed",
        "rx-guess",
        at=2 * DAY,
        origin="inferred",
        payload={"drug": "ibuprofen"},
    )
    state = _every_order([rx, stop, guessed_again])
    assert [m.drug for m in active_medications(state)] == (["amoxicillin"] if active else [])


@pytest.mark.parametrize(
    ("stop_origin", "active"),
    [
        pytest.param("user_provided_fact", True, id="given the patient's app stops it then active"),
        pytest.param("imported", True, id="given an import stops it then it stays active"),
        pytest.param("verified_source", False, id="given a verified stop then it ends"),
    ],
)
def test_a_lower_ranked_stop_never_ends_a_verified_prescription(
    stop_origin: str, active: bool
) -> None:
    """DESIGN §4.4: a verified source beats user statements; the stop stays in the history."""
    rx = make_event("MedicationPrescribed", "rx", origin="verified_source")
    stop = make_event("MedicationStopped", "stop", at=DAY, origin=stop_origin)
    state = _every_order([rx, stop])
    assert [m.drug for m in active_medications(state)] == (["amoxicillin"] if active else [])
    assert stop.event_id in state.events


def test_given_an_order_resumed_in_a_newer_version_then_an_older_stop_does_not_end_it() -> None:
    """An imported order's versions: active (recorded day 0), stopped on day 1 (recorded day 1),
    active again (the original order date, recorded day 2). The fold meets the stop last, but it
    was known before the version that resumes the order."""
    order: dict[str, Any] = {"origin": "imported", "source_ref": "MedicationRequest/rx"}
    rx = make_event("MedicationPrescribed", "rx-v1", **order)
    stop = make_event("MedicationStopped", "rx-v2-stop", at=DAY, **order)
    resumed = make_event("MedicationPrescribed", "rx-v3", recorded=T0 + 2 * DAY, **order)
    state = _every_order([rx, stop, resumed])
    assert [m.prescribed.event_id for m in active_medications(state)] == [resumed.event_id]
    known_on_day_one = state_as_of([rx, stop, resumed], T0 + 3 * DAY, known_at=T0 + DAY)
    assert active_medications(known_on_day_one) == []


@pytest.mark.parametrize(
    ("prescription_source", "stop_source"),
    [
        pytest.param(None, None, id="given producers that name no source"),
        pytest.param("MedicationRequest/rx", None, id="given an import and a stop from a producer"),
        pytest.param(
            "MedicationRequest/rx",
            "MedicationDispense/d-7",
            id="given a stop from another source record",
        ),
    ],
)
def test_when_a_prescription_is_learned_after_its_stop_then_the_drug_stays_stopped(
    prescription_source: str | None, stop_source: str | None
) -> None:
    """The stop (day 14, learned day 14) reaches UaC before the prescription it ends (dated day
    0, learned day 19: a backfill). In valid time the prescription came first, and it states no
    status of its own, so the stop still ends it whatever order the events arrive in."""
    rx = make_event(
        "MedicationPrescribed", "rx", recorded=T0 + 19 * DAY, source_ref=prescription_source
    )
    stop = make_event("MedicationStopped", "stop", at=14 * DAY, source_ref=stop_source)
    state = _every_order([rx, stop])
    assert active_medications(state) == []
    stopped = state_document(state)["medications"]["stopped"]
    assert [m["stopped"]["event_id"] for m in stopped] == [stop.event_id]


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(None, id="given producers that name no source"),
        pytest.param("MedicationRequest/rx", id="given a stop from another source record"),
    ],
)
def test_given_an_order_restarted_after_its_stop_then_a_late_copy_of_the_first_course_does_not_undo_it(
    source: str | None,
) -> None:
    """The order (day 2), its stop (day 5) and its restart under the same id (day 8): a restart
    learned before the first course (a backfill, learned last) still follows the stop in valid
    time, so the order is active in every order of learning, as when learned in date order."""
    first = make_event("MedicationPrescribed", "rx", at=2 * DAY, recorded=T0 + 20 * DAY)
    stop = make_event("MedicationStopped", "stop", at=5 * DAY, source_ref=source)
    restart = make_event("MedicationPrescribed", "restart", at=8 * DAY, recorded=T0 + 10 * DAY)
    state = _every_order([first, stop, restart])
    assert [m.prescribed.event_id for m in active_medications(state)] == [restart.event_id]


def test_given_a_prescription_that_expired_then_it_is_not_active() -> None:
    rx = make_event("MedicationPrescribed", "rx", valid_until=T0 + DAY)
    later = pref("p", "x", 3)
    assert active_medications(replay([rx, later])) == []
    assert len(active_medications(replay([rx]))) == 1


def trip(name: str, day: float, destination: str, departure: date, origin: str = "NL") -> Any:
    return make_event(
        "TravelRecorded",
        name,
        at=day * DAY,
        payload={
            "trip_id": name,
            "origin_country": origin,
            "destination_country": destination,
            "departure_date": departure,
        },
    )


def home(name: str, country: str, since: datetime, **envelope: Any) -> Any:
    return make_event(
        "FactAsserted",
        name,
        at=since,
        payload={"key": "home_country", "value": country},
        **envelope,
    )


def test_given_a_home_country_then_international_is_derived_not_trusted() -> None:
    events = [
        home("home", "NL", datetime(2020, 1, 1, tzinfo=UTC)),
        trip("paris", 1, "FR", date(2024, 3, 1)),
        trip("utrecht", 2, "NL", date(2024, 4, 1)),
        trip("from-abroad", 3, "FR", date(2024, 5, 1), origin="DE"),
        trip("tokyo", 4, "JP", date(2025, 1, 1)),
    ]
    state = _every_order(events)
    assert {t.trip_id: t.international for t in trips(state)} == {
        "paris": True,
        "utrecht": False,
        "from-abroad": True,
        "tokyo": True,
    }
    assert [t.trip_id for t in international_trips(state, 2024)] == ["paris", "from-abroad"]


def test_given_a_move_then_each_trip_is_judged_against_the_home_country_of_its_date() -> None:
    events = [
        home("nl", "NL", datetime(2020, 1, 1, tzinfo=UTC)),
        home("de", "DE", datetime(2024, 6, 1, tzinfo=UTC), origin="verified_source"),
        trip("before-move", 1, "DE", date(2024, 3, 1)),
        trip("after-move", 2, "DE", date(2024, 9, 1)),
    ]
    state = replay(events)
    assert {t.trip_id: t.international for t in trips(state)} == {
        "before-move": True,
        "after-move": False,
    }


def test_given_a_corrected_home_country_then_earlier_trips_use_the_correction() -> None:
    """A correction takes the place of the claim it corrects: the home country was never
    unknown, so no trip loses it."""
    wrong = home("nl", "NL", datetime(2023, 1, 1, tzinfo=UTC))
    events = [
        wrong,
        trip("paris", 1, "FR", date(2024, 2, 1)),
        trip("brussels", 2, "BE", date(2024, 4, 1)),
        home("be", "BE", datetime(2024, 3, 1, tzinfo=UTC), supersedes=wrong.id),
    ]
    state = _every_order(events)
    assert {t.trip_id: (t.home_country, t.international) for t in trips(state)} == {
        "paris": ("BE", True),
        "brussels": ("BE", False),
    }


def test_given_a_home_country_that_expired_then_later_trips_do_not_use_it() -> None:
    events = [
        home(
            "nl",
            "NL",
            datetime(2020, 1, 1, tzinfo=UTC),
            valid_until=datetime(2024, 3, 1, tzinfo=UTC),
        ),
        home(
            "de",
            "DE",
            datetime(2024, 3, 1, tzinfo=UTC),
            valid_from=datetime(2024, 3, 1, tzinfo=UTC),
        ),
        trip("amsterdam", 1, "NL", date(2024, 5, 1)),
        trip("berlin-before", 2, "DE", date(2024, 1, 10)),
    ]
    state = _every_order(events)
    assert {t.trip_id: (t.home_country, t.international) for t in trips(state)} == {
        "amsterdam": ("DE", True),
        "berlin-before": ("NL", True),
    }


def test_given_no_home_country_then_international_is_unknown_not_guessed() -> None:
    state = replay([trip("paris", 1, "FR", date(2024, 3, 1))])
    assert [t.international for t in trips(state)] == [None]
    assert international_trips(state, 2024) == []


def test_given_an_erasure_then_nothing_remains_in_any_order() -> None:
    events = [
        allergy("a"),
        pref("p", "vegan", 1),
        make_event("ErasureRequested", "erase", at=2 * DAY),
    ]
    state = _every_order(events)
    document = state_document(state)
    assert state.erased and document["allergies"] == [] and document["preferences"] == {}
    assert state.version == 1


def test_state_as_of_answers_what_was_true_and_what_was_known() -> None:
    first = pref("p1", "vegetarian", 0)
    second = pref("p2", "vegan", 30, recorded=T0 + 40 * DAY)
    events = [first, second]
    assert state_as_of(events, T0 + 10 * DAY).preference_views()[0].value == "vegetarian"
    assert state_as_of(events, T0 + 35 * DAY).preference_views()[0].value == "vegan"
    known_then = state_as_of(events, T0 + 35 * DAY, known_at=T0 + 35 * DAY)
    assert known_then.preference_views()[0].value == "vegetarian"


def test_every_event_type_is_either_a_keyed_claim_or_explicitly_not_one() -> None:
    from projections.state import CLAIM_KEYS, NOT_CLAIMS
    from schemas.events import PAYLOAD_MODELS

    assert set(CLAIM_KEYS) | set(NOT_CLAIMS) == set(PAYLOAD_MODELS.values())
    assert not set(CLAIM_KEYS) & set(NOT_CLAIMS)


def test_state_as_of_judges_the_subject_at_the_asked_time_not_at_its_last_event() -> None:
    course = make_event(
        "MedicationPrescribed",
        "course",
        at=T0,
        valid_until=T0 + 7 * DAY,
        payload={"prescription_id": "course", "drug": "amoxicillin"},
    )
    later = make_event(
        "MedicationPrescribed",
        "later",
        at=T0 + DAY,
        valid_from=T0 + 20 * DAY,
        payload={"prescription_id": "later", "drug": "metformin"},
    )
    during = state_as_of([course, later], T0 + 3 * DAY)
    after_course = state_as_of([course, later], T0 + 10 * DAY)
    once_later_starts = state_as_of([course, later], T0 + 25 * DAY)
    assert [view.drug for view in active_medications(during)] == ["amoxicillin"]
    assert active_medications(after_course) == []
    assert [view.drug for view in active_medications(once_later_starts)] == ["metformin"]
    assert after_course.as_of == T0 + 10 * DAY


def rx(name: str, day: float, **envelope: Any) -> Any:
    return make_event(
        "MedicationPrescribed",
        name,
        at=day * DAY,
        payload={"prescription_id": name, "drug": "amoxicillin"},
        **envelope,
    )


def void(name: str, day: float) -> Any:
    """A stop of rx-1 that says it was entered in error."""
    payload = {"prescription_id": "rx-1", "reason": "entered-in-error", "entered_in_error": True}
    return make_event("MedicationStopped", name, at=day * DAY, payload=payload)


AS_OF_DAY_5 = [
    pytest.param(
        [allergy("a"), status("s", 10, verification_status="refuted")],
        (set(), {"allergy-1"}),
        id="given an allergy refuted after the day then as known now it was never there",
    ),
    pytest.param(
        [allergy("a"), status("s", 10, verification_status="entered_in_error")],
        (set(), {"allergy-1"}),
        id="given an allergy entered in error after the day then as known now it was not there",
    ),
    pytest.param(
        [
            allergy("a"),
            allergy("a-v2", 10, verification_status="refuted", clinical_status=None),
        ],
        (set(), {"allergy-1"}),
        id="given a refuted version of the record imported later then the record was refuted",
    ),
    pytest.param(
        [allergy("a"), status("s", 10, clinical_status="resolved")],
        ({"allergy-1"}, {"allergy-1"}),
        id="given an allergy resolved after the day then it was still active on the day",
    ),
    pytest.param(
        [
            allergy("a"),
            status("s", 10, verification_status="refuted"),
            status("s2", 12, verification_status="confirmed"),
        ],
        ({"allergy-1"}, {"allergy-1"}),
        id="given a later refutation undone later still then the allergy stands on the day",
    ),
    pytest.param(
        [
            allergy("a"),
            status("s", 3, verification_status="refuted"),
            status("s2", 12, verification_status="confirmed"),
        ],
        ({"allergy-1"}, set()),
        id="given a refutation before the day confirmed away after it then it stood on the day",
    ),
    pytest.param(
        [
            allergy("a"),
            status("s", 3, verification_status="refuted"),
            make_event("ClaimRetracted", "r", at=12 * DAY, payload={"claim_id": event_id("s")}),
        ],
        ({"allergy-1"}, set()),
        id="given a refutation before the day retracted after it then the allergy stood",
    ),
    pytest.param(
        [
            allergy("a"),
            status("s", 8, verification_status="entered_in_error"),
            status("s2", 10, verification_status="refuted"),
            make_event("ClaimRetracted", "r", at=12 * DAY, payload={"claim_id": event_id("s2")}),
        ],
        (set(), {"allergy-1"}),
        id="given a later refutation retracted later still then the earlier correction holds",
    ),
    pytest.param(
        [rx("rx-1", 0), make_event("MedicationStopped", "stop", at=10 * DAY)],
        ({"rx-1"}, {"rx-1"}),
        id="given a prescription stopped after the day then it was active on the day",
    ),
    pytest.param(
        [
            rx("rx-1", 0),
            make_event("ClaimRetracted", "r", at=10 * DAY, payload={"claim_id": event_id("rx-1")}),
        ],
        (set(), {"rx-1"}),
        id="given a prescription retracted after the day then as known now it was never there",
    ),
    pytest.param(
        [rx("rx-1", 0), void("void", 10)],
        (set(), {"rx-1"}),
        id="given a prescription entered in error after the day then as known now it never held",
    ),
    pytest.param(
        [rx("rx-1", 0), void("void", 3)],
        (set(), set()),
        id="given a prescription entered in error before the day then it did not hold on it",
    ),
    pytest.param(
        [
            rx("rx-1", 0),
            void("void", 10),
            make_event("ClaimRetracted", "r", at=12 * DAY, payload={"claim_id": event_id("void")}),
        ],
        ({"rx-1"}, {"rx-1"}),
        id="given an entered-in-error stop retracted later then the prescription held on the day",
    ),
    pytest.param(
        [
            rx("rx-1", 0),
            void("void", 10),
            make_event(
                "MedicationPrescribed",
                "again",
                at=12 * DAY,
                payload={"prescription_id": "rx-1", "drug": "amoxicillin"},
            ),
        ],
        ({"rx-1"}, {"rx-1"}),
        id="given a prescription entered in error then prescribed again then it held on the day",
    ),
]


@pytest.mark.parametrize(("events", "expected"), AS_OF_DAY_5)
def test_given_later_knowledge_then_an_as_of_read_applies_corrections_not_happenings(
    events: list[Any], expected: tuple[set[str], set[str]]
) -> None:
    """As known now, day 5 shows what was learned about its claims later (a retraction, a
    verification status) but not what happened later (a stop, a resolution); as known on day 5,
    the record as it stood."""
    as_known_now, as_known_then = expected
    for order in (events, events[::-1]):
        now = state_as_of(order, T0 + 5 * DAY)
        then = state_as_of(order, T0 + 5 * DAY, known_at=T0 + 5 * DAY)
        assert _active_claims(now) == as_known_now
        assert _active_claims(then) == as_known_then
        assert now.as_of == then.as_of == T0 + 5 * DAY


def _active_claims(state: UserState) -> set[str]:
    return {view.allergy_id for view in active_allergies(state)} | {
        view.prescription_id for view in active_medications(state)
    }


def test_given_a_correction_learned_later_then_the_past_keeps_its_time_and_names_the_source() -> (
    None
):
    course = rx("course", 0, valid_until=T0 + 8 * DAY)
    refuted = status("s", 10, verification_status="refuted", reason="negative skin test")
    past = state_as_of([allergy("a"), course, refuted], T0 + 5 * DAY)
    [view] = past.allergy_views()
    assert [m.prescription_id for m in active_medications(past)] == ["course"]
    assert (view.verification_status.value, view.last_change.event_id) == ("refuted", refuted.id)
    assert state_document(past)["as_of"] == "2024-01-06T09:00:00.000Z"


def _later(day: float) -> Any:
    """An event of another key that moves the subject's time to `day`."""
    return make_event("TravelRecorded", f"trip-{day}", at=day * DAY)


def test_given_the_held_claim_expired_then_the_statement_that_disputed_it_holds() -> None:
    """A quick reversal of a preference whose held statement has a validity window: while both
    are in force the key asks for confirmation; once the held one has expired, the reversal is
    the value (its conflict and alert are over), and the history says why."""
    held = pref("p1", "vegan", 0, valid_until=T0 + 14 * DAY)
    reversal = pref("p2", "omnivore", 2)
    during = state_document(replay([held, reversal, _later(5)]))
    assert during["preferences"]["care"]["diet"]["value"] == "vegan"
    assert during["preferences"]["care"]["diet"]["needs_confirmation"] is not None
    after = _every_order([held, reversal, _later(20)])
    document = state_document(after)
    diet = document["preferences"]["care"]["diet"]
    assert (diet["value"], diet["needs_confirmation"]) == ("omnivore", None)
    assert [(h["value"], h["status"]) for h in diet["history"]] == [
        ("vegan", "expired"),
        ("omnivore", "current"),
    ]
    assert document["conflicts"] == []
    assert open_conflicts(after, after.as_of) == []


def test_given_a_statement_not_yet_valid_then_the_one_before_it_holds_until_it_begins() -> None:
    held = pref("p1", "vegan", 0)
    scheduled = pref("p2", "omnivore", 10, valid_from=T0 + 30 * DAY)
    before = state_document(replay([held, scheduled, _later(20)]))["preferences"]["care"]["diet"]
    assert before["value"] == "vegan"
    assert [h["status"] for h in before["history"]] == ["current", "scheduled"]
    begun = state_document(replay([held, scheduled, _later(40)]))["preferences"]["care"]["diet"]
    assert begun["value"] == "omnivore"


def test_given_the_held_claim_of_a_dispute_expired_then_the_statements_in_force_dispute_anew() -> (
    None
):
    """vegan (until day 3) is held against omnivore and pescatarian, each a quick reversal:
    when vegan expires its alert resolves, and the two still in force, which disagree, ask for
    confirmation in their turn (an alert of their own)."""
    statements = [
        make_event(
            "PreferenceStated",
            "p1",
            at=0 * DAY,
            payload={"value": "vegan"},
            valid_until=T0 + 3 * DAY,
        ),
        pref("p2", "omnivore", 1),
        pref("p3", "pescatarian", 2),
        _later(5),
    ]
    alerts = [
        alert
        for alert in run(statements, default_rules(load_bundled_knowledge()))
        if alert.rule_id == "claim-needs-confirmation"
    ]
    last = {str(alert.alert_id): alert for alert in alerts}
    standing = [alert for alert in last.values() if alert.status is AlertStatus.RAISED]
    (now,) = standing
    assert set(now.cause) == {f"preference:{event_id('p2')}", f"preference:{event_id('p3')}"}
    resolved = [alert for alert in last.values() if alert.status is AlertStatus.RESOLVED]
    assert all(f"preference:{event_id('p1')}" in alert.cause for alert in resolved)
    assert resolved


def test_given_every_statement_of_a_disputed_key_expired_then_no_dispute_is_left() -> None:
    """Two equal-rank facts disagree until both windows close: then the key holds the claim
    that held it last, disputed by nothing, and its history says both expired."""
    first = fact("f1", "A+", 0, valid_until=T0 + 20 * DAY)
    second = fact("f2", "B+", 1, valid_until=T0 + 30 * DAY)
    during = state_document(replay([first, second, _later(10)]))
    assert during["facts"]["care"]["blood_type"]["needs_confirmation"] is not None
    after = state_document(replay([first, second, _later(40)]))
    blood_type = after["facts"]["care"]["blood_type"]
    assert blood_type["needs_confirmation"] is None
    assert [h["status"] for h in blood_type["history"]] == ["expired", "expired"]
    assert after["conflicts"] == []


def test_given_a_statement_replaced_before_its_window_closed_then_it_stays_superseded() -> None:
    held = pref("p1", "vegan", 0, valid_until=T0 + 60 * DAY)
    later = pref("p2", "omnivore", 24)
    for moment in (30, 90):
        diet = state_document(replay([held, later, _later(moment)]))["preferences"]["care"]["diet"]
        assert [(h["status"], h["replaced_by"]) for h in diet["history"]] == [
            ("superseded", event_id("p2")),
            ("current", None),
        ], moment


def _sourced(
    event_type: str, name: str, day: float, learned: float, source: str, **payload: Any
) -> Any:
    return make_event(
        event_type,
        name,
        at=day * DAY,
        recorded=T0 + learned * DAY,
        source_ref=source,
        payload=payload,
    )


@pytest.mark.parametrize("late_source", ["ehr:a1", "lab:report-7"])
def test_given_a_status_change_a_source_sends_last_dated_before_its_earlier_one_then_it_holds_if_same_source(
    late_source: str,
) -> None:
    """The source confirmed the allergy on day 5, then sent a refutation dated day 3: its newest
    word is the refutation, which the confirmation it sent earlier does not undo (before, the
    confirmation held by its later date). From another source, the changes apply in valid-time
    order and the day-5 confirmation holds."""
    history = [
        _sourced("AllergyRecorded", "rec", 0, 0, "ehr:a1", allergy_id="allergy-1"),
        _sourced(
            "AllergyStatusChanged",
            "conf",
            5,
            5,
            "ehr:a1",
            allergy_id="allergy-1",
            verification_status="confirmed",
        ),
        _sourced(
            "AllergyStatusChanged",
            "refute",
            3,
            9,
            late_source,
            allergy_id="allergy-1",
            verification_status="refuted",
        ),
    ]
    expected = [] if late_source == "ehr:a1" else ["allergy-1"]
    for order in permutations(history):
        assert [view.allergy_id for view in active_allergies(replay(list(order)))] == expected


@pytest.mark.parametrize("late_source", ["ehr:r1", "pharmacy:r1"])
def test_given_a_stop_a_source_sends_after_its_restart_of_the_order_then_it_holds_if_same_source(
    late_source: str,
) -> None:
    history = [
        _sourced("MedicationPrescribed", "start", 2, 2, "ehr:r1", prescription_id="r1"),
        _sourced("MedicationPrescribed", "restart", 5, 5, "ehr:r1", prescription_id="r1"),
        _sourced("MedicationStopped", "stop", 4, 9, late_source, prescription_id="r1"),
    ]
    expected = [] if late_source == "ehr:r1" else ["r1"]
    for order in permutations(history):
        state = replay(list(order))
        assert [view.prescription_id for view in active_medications(state)] == expected
