"""A batch is processed in transaction-time order, but a correction or a retraction sent with
the claim it corrects or retracts comes after that claim, whatever their times and ids say."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from itertools import permutations

import pytest

from projections.gate import GateContext, GatePolicy, TenantPolicy
from projections.queries import active_allergies
from rules.batch import Submitted, in_processing_order, replay_batch
from rules.engine import default_rules
from schemas.events import Event
from tests.factories import T0, event_id, make_event
from tests.fakes import TableKnowledge

RULES = default_rules(TableKnowledge())
POLICY = GatePolicy(tenants={"clinic-a": TenantPolicy(frozenset({"ehr-adapter"}))})
RECORDED = T0 + timedelta(days=150)


def _context(item: Submitted, owners: dict[str, str]) -> GateContext:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    return GateContext(now=now, policy=POLICY, encoded_size=100, claim_owners=owners)


def _lines(events: Sequence[Event]) -> list[Submitted]:
    """The events as the lines of a file, in this order."""
    return [Submitted(f"line {n}", event, 100) for n, event in enumerate(events, 1)]


def _allergy(name: str, substance: str, days: int, corrects: str | None = None) -> Event:
    return make_event(
        "AllergyRecorded",
        name,
        at=timedelta(days=days),
        recorded=RECORDED,
        payload={"substance": substance},
        supersedes=None if corrects is None else event_id(corrects),
    )


@pytest.mark.parametrize(
    "history",
    [
        pytest.param(
            [_allergy("first", "penicillin", 9), _allergy("fix", "codeine", 4, "first")],
            id="a correction that moves the onset earlier, recorded with its claim",
        ),
        pytest.param(
            [
                _allergy("first", "penicillin", 9),
                _allergy("fix", "amoxicillin", 2, "first"),
                _allergy("fix-again", "codeine", 1, "fix"),
            ],
            id="a chain of corrections, each dated before the one it corrects",
        ),
    ],
)
def test_given_corrections_sent_with_their_claim_then_each_is_accepted_in_any_file_order(
    history: list[Event],
) -> None:
    for order in permutations(history):
        batch = _lines(order)
        (result,) = replay_batch(batch, _context, RULES).values()
        assert result.rejections == []
        assert [view.substance for view in active_allergies(result.state)] == ["codeine"]


REFUTED = make_event(
    "AllergyStatusChanged",
    "refutation",
    at=timedelta(days=3),
    recorded=RECORDED,
    payload={"allergy_id": "allergy-1", "verification_status": "refuted"},
)


@pytest.mark.parametrize(
    "retracted",
    [
        pytest.param(REFUTED, id="a refutation retracted at its own instant, sorting after it"),
        pytest.param(
            _allergy("fix", "codeine", 1, "first"),
            id="a correction dated before its claim, retracted before the claim's date",
        ),
    ],
)
def test_given_a_retraction_sent_with_its_claim_then_it_is_applied_in_any_file_order(
    retracted: Event,
) -> None:
    """Before, a retraction that sorted before its claim (an earlier id at one instant, or a
    claim a correction placed later) was refused as retracting an unknown claim, so the file
    (and `uac publish`, which sends it in this order) kept what the producer had withdrawn."""
    undo = make_event(
        "ClaimRetracted",
        "undo",
        at=timedelta(days=3),
        recorded=RECORDED,
        payload={"claim_id": retracted.id},
    )
    assert event_id("undo") < REFUTED.id
    for order in permutations([_allergy("first", "penicillin", 5), retracted, undo]):
        (result,) = replay_batch(_lines(order), _context, RULES).values()
        assert result.rejections == []
        assert [view.substance for view in active_allergies(result.state)] == ["penicillin"]


def test_given_corrections_that_correct_each_other_then_each_is_processed_once() -> None:
    loop = [_allergy("a", "penicillin", 1, "b"), _allergy("b", "codeine", 2, "a")]
    batch = _lines(loop)
    assert sorted(item.origin for item in in_processing_order(batch)) == ["line 1", "line 2"]


def test_given_an_order_replaced_at_the_instant_its_successor_starts_then_no_duplicate_therapy() -> (
    None
):
    """A dose change: r1 stopped as r2 starts. Judging r2 before the stop would raise a
    duplicate therapy and resolve it at once, a record consumers would act on for nothing."""
    change = timedelta(days=4)
    history = [
        make_event(
            "MedicationPrescribed", "r1", payload={"prescription_id": "r1", "drug": "ibuprofen"}
        ),
        make_event(
            "MedicationPrescribed",
            "r2",
            at=change,
            payload={"prescription_id": "r2", "drug": "ibuprofen"},
        ),
        make_event("MedicationStopped", "r1-stop", at=change, payload={"prescription_id": "r1"}),
    ]
    for order in permutations(history):
        batch = _lines(order)
        (result,) = replay_batch(batch, _context, RULES).values()
        assert result.rejections == []
        assert result.alerts == []


def _preference(name: str, subject: str, days: int, corrects: str | None = None) -> Event:
    return make_event(
        "PreferenceStated",
        name,
        at=timedelta(days=days),
        subject=subject,
        payload={"key": "diet", "value": name},
        supersedes=None if corrects is None else event_id(corrects),
    )


def test_given_one_event_id_in_two_subjects_then_a_correction_naming_it_is_judged_alike_in_any_order() -> (
    None
):
    """The producer contract forbids reusing an event id, even for another subject; when it
    happens, the subject a correction's target is read as belonging to must not depend on the
    order of the file (it decided between a final and a redrivable refusal)."""
    reused = [
        _preference("shared", "qa", 1).model_copy(update={"actor": "not-an-actor"}),
        _preference("shared", "qb", 2),
    ]
    correction = _preference("fix", "qa", 3, "shared")
    outcomes = set()
    for order in permutations([*reused, correction]):
        batch = _lines(order)
        results = replay_batch(batch, _context, RULES)
        outcomes.add(
            tuple(
                (key, rejection.reasons, rejection.detail)
                for key, result in results.items()
                for _, rejection in result.rejections
            )
        )
    assert len(outcomes) == 1
