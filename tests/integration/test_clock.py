"""The worker's clock on the real broker: when wall-clock time passes a claim's validity bound,
the alerts change without any producer writing, through a logged `ClockAdvanced` event that a
replay folds again."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import TypedDict, Unpack

import pytest

from schemas.alerts import Alert, AlertStatus
from schemas.events import CLOCK_ACTOR, Event, EventType
from tests.factories import make_event
from tests.integration.harness import Pipeline, wait_for

pytestmark = pytest.mark.integration
WINDOW = timedelta(seconds=8)
CLOCK_SECONDS = 1


class ValidityWindow(TypedDict, total=False):
    valid_from: datetime
    valid_until: datetime


def prescription(name: str, drug: str, at: datetime, **window: Unpack[ValidityWindow]) -> Event:
    return make_event(
        "MedicationPrescribed",
        name,
        at=at,
        subject="clock-patient",
        payload={"prescription_id": name, "drug": drug},
        **window,
    )


def by_prescription(alerts: list[Alert]) -> dict[str, list[AlertStatus]]:
    found: dict[str, list[AlertStatus]] = {}
    for alert in alerts:
        found.setdefault(next(c for c in alert.cause if c.startswith("medication:")), []).append(
            alert.status
        )
    return found


def ticks(pipeline: Pipeline) -> list[Event]:
    return [e for e in pipeline.accepted() if e.type is EventType.CLOCK_ADVANCED]


def test_given_a_prescription_that_expires_and_one_that_comes_into_force_then_the_clock_changes_the_alerts(
    pipeline: Pipeline,
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    bound = now + WINDOW
    events = [
        make_event(
            "AllergyRecorded",
            "clock-allergy",
            at=now - timedelta(minutes=1),
            subject="clock-patient",
            payload={"allergy_id": "penicillin", "substance": "penicillin"},
        ),
        prescription("rx-expiring", "amoxicillin", now, valid_until=bound),
        prescription("rx-upcoming", "ampicillin", now, valid_from=bound),
    ]
    pipeline.settings["UAC_CLOCK_SECONDS"] = str(CLOCK_SECONDS)
    pipeline.start("worker", "--loglevel", "info")
    pipeline.start("sink")
    pipeline.publish(events)
    expected = {
        "medication:rx-expiring": [AlertStatus.RAISED, AlertStatus.RESOLVED],
        "medication:rx-upcoming": [AlertStatus.RAISED],
    }
    alerts = wait_for(
        pipeline.alerts,
        lambda found: by_prescription(found) == expected,
        timeout=90 + WINDOW.total_seconds(),
        what="the clock's alert records",
    )
    (tick,) = ticks(pipeline)
    assert (tick.actor, tick.occurred_at, tick.subject_id) == (CLOCK_ACTOR, bound, "clock-patient")
    changed_by_the_clock = [a for a in alerts if a.trigger_event_id == tick.id]
    assert sorted(a.status.value for a in changed_by_the_clock) == ["raised", "resolved"]
    assert all(a.occurred_at == bound for a in changed_by_the_clock)

    rows = wait_for(
        lambda: pipeline.clickhouse(
            "SELECT toString(event_id), type, actor, occurred_at FROM events"
            " WHERE type = 'ClockAdvanced'",
            "clinic-a",
        ),
        lambda rows: len(rows) == 1,
        what="the tick in ClickHouse",
    )
    assert [row[:3] for row in rows] == [[tick.id, "ClockAdvanced", CLOCK_ACTOR]]
    replayed = wait_for(
        lambda: pipeline.uac("replay", "--from-kafka", "--json"),
        lambda result: result.returncode == 0,
        what="a replay from Kafka without differences",
    )
    assert json.loads(replayed.stdout) == {"subjects": 1, "differences": []}


def test_given_a_worker_restart_after_the_tick_then_the_clock_does_not_tick_again(
    pipeline: Pipeline,
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    pipeline.settings["UAC_CLOCK_SECONDS"] = str(CLOCK_SECONDS)
    worker = pipeline.start("worker", "--loglevel", "info")
    pipeline.publish([prescription("rx-short", "metformin", now, valid_until=now + WINDOW)])
    wait_for(lambda: ticks(pipeline), lambda found: len(found) == 1, what="the tick")
    worker.stop()
    pipeline.start("worker", "--loglevel", "info")
    later = prescription("rx-later", "lisinopril", now + timedelta(seconds=1))
    pipeline.publish([later])
    wait_for(
        pipeline.accepted,
        lambda found: later.id in {e.id for e in found},
        what="the event after the restart",
    )
    time.sleep(5 * CLOCK_SECONDS)  # five rounds of the restarted worker's clock
    assert len(ticks(pipeline)) == 1
    assert pipeline.quarantined() == [], "no tick again, and no event processed twice"
