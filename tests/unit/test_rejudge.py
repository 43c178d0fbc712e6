"""Re-judging after a knowledge release: the alert stream is brought in line with what the rules
now find in each state, once, and agrees with the incremental transitions under unchanged rules."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given

from projections.state import UserState, initial_state, replay
from rules.base import Rule
from rules.batch import Submitted, replay_batch
from rules.engine import default_rules, evaluate
from rules.knowledge.model import Coding, CrossReactivity, MatchLevel
from rules.rejudge import Rejudgement, latest_records, rejudged
from schemas.alerts import Alert, AlertStatus
from schemas.events import Event
from schemas.severity import Severity
from tests.factories import make_event
from tests.fakes import TableKnowledge
from tests.strategies import event_histories
from tests.unit.test_fold_properties import _context
from tests.unit.test_rules import allergy, rx

AT = datetime(2030, 6, 1, tzinfo=UTC)
CURRENT = default_rules(TableKnowledge())
UPGRADE = Rejudgement("knowledge:test-table-1", AT)


@dataclass(frozen=True)
class ReleaseWithClassesAs(TableKnowledge):
    """An earlier release that judged class-level cross-reactivity as `as_level`."""

    version: str = "test-table-0"
    as_level: MatchLevel = MatchLevel.NONE

    def cross_reactivity(
        self,
        allergen: str,
        drug: str,
        allergen_codes: tuple[Coding, ...] = (),
        drug_codes: tuple[Coding, ...] = (),
        reactions: tuple[str, ...] = (),
    ) -> CrossReactivity:
        verdict = super().cross_reactivity(allergen, drug, allergen_codes, drug_codes, reactions)
        if verdict.level is not MatchLevel.SAME_CLASS:
            return verdict
        return CrossReactivity(
            allergen, drug, verdict.ingredients, (), self.as_level, "earlier release", "test"
        )


def folded(events: list[Event], rules: tuple[Rule, ...]) -> tuple[UserState, list[Alert]]:
    state, alerts = initial_state("clinic-a", "patient-1"), []
    for event in events:
        after = replay([event], state)
        alerts += evaluate(rules, state, after, event)
        state = after
    return state, alerts


PENICILLIN_THEN_AMOXICILLIN = [allergy(), rx("rx-amox", "amoxicillin")]


def test_given_a_release_that_finds_a_conflict_then_it_is_raised_once_with_its_id() -> None:
    state, old_alerts = folded(PENICILLIN_THEN_AMOXICILLIN, default_rules(ReleaseWithClassesAs()))
    assert old_alerts == []
    (record,) = rejudged(state, latest_records(old_alerts), CURRENT, UPGRADE)
    (incremental,) = folded(PENICILLIN_THEN_AMOXICILLIN, CURRENT)[1]
    assert (record.status, record.severity) == (AlertStatus.RAISED, Severity.CRITICAL)
    assert record.alert_id == incremental.alert_id
    assert record.trigger_event_id == "knowledge:test-table-1"
    assert record.reason == "re-judged with knowledge:test-table-1: newly found"
    assert rejudged(state, latest_records([record]), CURRENT, UPGRADE) == []


def test_given_a_release_that_no_longer_finds_a_conflict_then_its_alert_is_resolved() -> None:
    state, alerts = folded(PENICILLIN_THEN_AMOXICILLIN, CURRENT)
    older = default_rules(ReleaseWithClassesAs())
    (record,) = rejudged(state, latest_records(alerts), older, UPGRADE)
    assert (record.status, record.alert_id) == (AlertStatus.RESOLVED, alerts[0].alert_id)
    assert record.reason == "re-judged with knowledge:test-table-1: the rules no longer find it"
    assert latest_records([*alerts, record])[record.alert_id].status is AlertStatus.RESOLVED
    assert rejudged(state, latest_records([*alerts, record]), older, UPGRADE) == []


def test_given_a_release_that_grades_differently_then_it_is_raised_again_saying_so() -> None:
    earlier = default_rules(ReleaseWithClassesAs(as_level=MatchLevel.PARTIAL))
    state, alerts = folded(PENICILLIN_THEN_AMOXICILLIN, earlier)
    assert [(a.severity, a.drug_allergy.level) for a in alerts if a.drug_allergy] == [
        (Severity.WARNING, "partial")
    ]
    (record,) = rejudged(state, latest_records(alerts), CURRENT, UPGRADE)
    assert (record.status, record.alert_id, record.severity) == (
        AlertStatus.RAISED,
        alerts[0].alert_id,
        Severity.CRITICAL,
    )
    assert record.reason == (
        "re-judged with knowledge:test-table-1: severity warning -> critical, "
        "level partial -> same_class"
    )
    assert rejudged(state, latest_records([*alerts, record]), CURRENT, UPGRADE) == []


def test_given_a_rollback_in_between_then_the_second_upgrade_gets_new_lifecycle_ids() -> None:
    """X raises, a rollback to W resolves, X again raises: consumers that drop lifecycle ids
    they have seen must not drop the second raise, and a rerun over the same stream must
    repeat the same ids."""
    older = default_rules(ReleaseWithClassesAs())
    rollback = Rejudgement("knowledge:test-table-0", AT)
    state, _ = folded(PENICILLIN_THEN_AMOXICILLIN, older)
    (first,) = rejudged(state, {}, CURRENT, UPGRADE)
    assert rejudged(state, {}, CURRENT, UPGRADE) == [first]
    (undone,) = rejudged(state, latest_records([first]), older, rollback)
    (again,) = rejudged(state, latest_records([first, undone]), CURRENT, UPGRADE)
    assert [r.status for r in (first, undone, again)] == [
        AlertStatus.RAISED,
        AlertStatus.RESOLVED,
        AlertStatus.RAISED,
    ]
    assert len({first.lifecycle_id, undone.lifecycle_id, again.lifecycle_id}) == 3


def test_given_an_acknowledged_alert_then_it_counts_as_active() -> None:
    state, alerts = folded(PENICILLIN_THEN_AMOXICILLIN, CURRENT)
    acknowledged = alerts[0].model_copy(update={"status": AlertStatus.ACKNOWLEDGED})
    assert rejudged(state, latest_records([*alerts, acknowledged]), CURRENT, UPGRADE) == []


def _accept(alert: Alert, severity: Severity | None = None) -> Event:
    payload = {"alert_id": str(alert.alert_id), "action": "accepted", "reason": "seen"}
    stated = {} if severity is None else {"severity": severity.value}
    return make_event("AlertAcknowledged", "accept", at=AT, payload=payload | stated)


@pytest.mark.parametrize("stated", [True, False], ids=["grade stated", "grade not stated"])
def test_given_an_accepted_warning_that_a_release_grades_critical_then_it_stays_only_if_stated(
    stated: bool,
) -> None:
    """An acceptance that names the grade it answered (the warning the stream showed) does not
    cover the critical a release finds: re-judging raises it. One that does not name it
    answered the grade the rules in use find in the record as it was then: the critical."""
    earlier = default_rules(ReleaseWithClassesAs(as_level=MatchLevel.PARTIAL))
    state, alerts = folded(PENICILLIN_THEN_AMOXICILLIN, earlier)
    accept = _accept(alerts[0], Severity.WARNING if stated else None)
    after = replay([accept], state)
    stream = [*alerts, *evaluate(earlier, state, after, accept)]
    assert [(a.status, a.severity) for a in stream[1:]] == [
        (AlertStatus.ACKNOWLEDGED, Severity.WARNING)
    ]
    records = rejudged(after, latest_records(stream), CURRENT, UPGRADE)
    expected = [(AlertStatus.RAISED, Severity.CRITICAL)]
    if not stated:
        expected.append((AlertStatus.ACKNOWLEDGED, Severity.CRITICAL))
    assert [(r.status, r.severity) for r in records] == expected
    assert ("graver than the warning" in str(records[0].reason)) is stated
    assert rejudged(after, latest_records([*stream, *records]), CURRENT, UPGRADE) == []


def test_given_an_accepted_critical_that_a_release_grades_warning_then_it_stays_accepted() -> None:
    state, alerts = folded(PENICILLIN_THEN_AMOXICILLIN, CURRENT)
    accept = _accept(alerts[0])
    after = replay([accept], state)
    stream = [*alerts, *evaluate(CURRENT, state, after, accept)]
    milder = default_rules(ReleaseWithClassesAs(as_level=MatchLevel.PARTIAL))
    records = rejudged(after, latest_records(stream), milder, UPGRADE)
    assert [(r.status, r.severity) for r in records] == [
        (AlertStatus.RAISED, Severity.WARNING),
        (AlertStatus.ACKNOWLEDGED, Severity.WARNING),
    ]
    assert len({r.lifecycle_id for r in [*stream, *records]}) == len(stream) + 2
    assert rejudged(after, latest_records([*stream, *records]), milder, UPGRADE) == []


def test_given_an_acceptance_kept_across_a_graver_regrade_then_it_is_raised_again() -> None:
    """An earlier build carried an accepted warning over to the critical it became: re-judging
    raises it again, once."""
    intolerance = allergy(allergy_type="intolerance")
    state, alerts = folded([intolerance, rx("rx-amox", "amoxicillin")], CURRENT)
    accept = _accept(alerts[0])
    graver = make_event(
        "AllergyRecorded",
        "allergy-again",
        at=AT + timedelta(days=1),
        payload={"allergy_id": "allergy-1", "substance": "penicillin", "allergy_type": "allergy"},
    )
    state, more = folded([intolerance, rx("rx-amox", "amoxicillin"), accept, graver], CURRENT)
    carried = more[-1].model_copy(update={"status": AlertStatus.ACKNOWLEDGED})
    (record,) = rejudged(state, latest_records([*more, carried]), CURRENT, UPGRADE)
    assert (record.status, record.severity) == (AlertStatus.RAISED, Severity.CRITICAL)
    assert "acknowledged as warning, graded critical" in str(record.reason)
    assert rejudged(state, latest_records([*more, carried, record]), CURRENT, UPGRADE) == []


def test_given_an_erased_subject_then_nothing_is_rejudged() -> None:
    events = [*PENICILLIN_THEN_AMOXICILLIN, make_event("ErasureRequested", "erase", at=AT)]
    state, alerts = folded(events, CURRENT)
    assert state.erased
    assert alerts
    assert rejudged(state, latest_records(alerts), CURRENT, UPGRADE) == []


MEDICATION_HISTORIES = event_histories(
    max_size=30,
    types=("AllergyRecorded", "AllergyStatusChanged", "MedicationPrescribed", "MedicationStopped"),
)


@given(event_histories(subjects=("patient-1", "patient-2")) | MEDICATION_HISTORIES)
def test_given_unchanged_rules_then_the_incremental_alerts_are_what_the_state_holds(
    events: list[Event],
) -> None:
    """Whatever the arrival order, corrections and retractions, the alerts the transitions
    left active are exactly what the rules find in the final state (so re-judging with the
    same rules publishes nothing)."""
    batch = [Submitted(str(i), e, 100) for i, e in enumerate(events)]
    for result in replay_batch(batch, _context, CURRENT).values():
        assert rejudged(result.state, latest_records(result.alerts), CURRENT, UPGRADE) == []
