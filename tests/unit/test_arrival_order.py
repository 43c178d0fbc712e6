"""Arrival order must not matter (DESIGN §4.4): histories that mix every kind of claim with
what refers to claims (corrections, retractions before their claim, acknowledgements of real
alerts, no-known-allergy statements, validity windows, clock ticks, erasure, several events at
one valid time, re-sent copies) give the same state, and the same alerts in the end, in any
arrival order.

What the gate refuses depends on order where the product says so: a correction or retraction
whose claim has not arrived yet (`supersedes_unknown_claim`, `retracts_unknown_claim`), mended
by `uac redrive`. The gate is therefore checked here through `uac replay`'s own order
(transaction time), which does not depend on the order of the file. (A stop or status change
dated before its claim is admitted in any order and flagged: `test_follow_ups`.)
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from random import Random
from typing import Any
from uuid import UUID

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from projections.document import event_document, state_hash
from projections.gate import GateContext, GatePolicy, TenantPolicy
from projections.state import replay
from projections.timeline import sort_key
from rules.batch import Submitted, replay_batch
from rules.engine import default_rules
from rules.rejudge import latest_records
from schemas.alerts import Alert, AlertStatus
from schemas.events import AlertAcknowledged, Event
from streams.cli_app import app
from tests.factories import event_id, make_event
from tests.fakes import TableKnowledge
from tests.strategies import mixed_histories
from tests.unit.test_fold_properties import judged_one_at_a_time

RULES = default_rules(TableKnowledge())
NOW = datetime(2030, 1, 1, tzinfo=UTC)
POLICY = GatePolicy(tenants={"clinic-a": TenantPolicy(frozenset({"ehr-adapter"}))})
NO_ALERT = "00000000-0000-4000-8000-777777777777"
FAST = settings(max_examples=150)


def _acknowledging_real_alerts(events: list[Event], data: st.DataObject) -> list[Event]:
    """The history with each acknowledgement naming an alert its events raise (in valid-time
    order), or one that never exists."""
    _, alerts = judged_one_at_a_time(sorted(events, key=sort_key))
    named = [*sorted({str(alert.alert_id) for alert in alerts}), NO_ALERT]
    acknowledged = []
    for event in events:
        if not isinstance(event.payload, AlertAcknowledged):
            acknowledged.append(event)
            continue
        payload = event.payload.model_dump() | {"alert_id": data.draw(st.sampled_from(named))}
        acknowledged.append(Event.model_validate(event.model_dump() | {"payload": payload}))
    return acknowledged


def _open(alerts: list[Alert]) -> dict[UUID, tuple[object, ...]]:
    """Each alert the stream holds open, with its status, its judgement and its reason when
    acknowledged (a raise's reason says which event changed it, and that depends on order)."""
    return {
        key: (
            record.status,
            record.severity,
            record.cause,
            record.drug_allergy.level if record.drug_allergy else None,
            record.reason if record.status is not AlertStatus.RAISED else None,
        )
        for key, record in latest_records(alerts).items()
        if record.status is not AlertStatus.RESOLVED
    }


@FAST
@given(mixed_histories(erasure=True), st.randoms(use_true_random=False), st.data())
def test_given_a_mixed_history_in_any_arrival_order_with_copies_then_the_same_state(
    events: list[Event], rng: Random, data: st.DataObject
) -> None:
    events = _acknowledging_real_alerts(events, data)
    arrived = events + data.draw(st.lists(st.sampled_from(events), max_size=3))
    rng.shuffle(arrived)
    expected = state_hash(replay(sorted(events, key=sort_key)))
    assert state_hash(replay(arrived)) == expected
    assert state_hash(judged_one_at_a_time(arrived)[0]) == expected


CLINICAL = (
    *("AllergyRecorded", "MedicationPrescribed", "AlertAcknowledged") * 2,
    *("AllergyStatusChanged", "MedicationStopped", "ClaimRetracted"),
)
"""The types of a history dense in drug-allergy alerts, their acknowledgements and changes (an
acknowledgement that arrives after a re-grade it precedes in valid time took about a thousand
examples of these to find; `test_rules` pins that case)."""


@FAST
@given(
    mixed_histories() | mixed_histories(max_size=10, types=CLINICAL, narrow=True),
    st.randoms(use_true_random=False),
    st.data(),
)
def test_given_a_mixed_history_in_any_arrival_order_then_the_same_alerts_end_open(
    events: list[Event], rng: Random, data: st.DataObject
) -> None:
    """After every event the open alerts are the rules' findings in the state; in the end the
    same alerts are open, with the same status and judgement, as for the valid-time order
    (alerts raised and resolved on the way may differ: a late refutation resolves an alert that
    the valid-time order never raised)."""
    events = _acknowledging_real_alerts(events, data)
    arrived = list(events)
    rng.shuffle(arrived)
    _, alerts = judged_one_at_a_time(arrived, consistent=True)
    assert _open(alerts) == _open(judged_one_at_a_time(sorted(events, key=sort_key))[1])


def _context(item: Submitted, owners: dict[str, str]) -> GateContext:
    return GateContext(now=NOW, policy=POLICY, encoded_size=item.encoded_size, claim_owners=owners)


@FAST
@given(mixed_histories(), st.randoms(use_true_random=False), st.data())
def test_given_a_batch_in_any_order_then_the_same_decisions_states_and_alert_records(
    events: list[Event], rng: Random, data: st.DataObject
) -> None:
    events = _acknowledging_real_alerts(events, data)
    batch = [Submitted(f"line {n}", e, 100) for n, e in enumerate(events, 1)]
    batch += data.draw(st.lists(st.sampled_from(batch), max_size=2))
    shuffled = list(batch)
    rng.shuffle(shuffled)

    def outcome(items: list[Submitted]) -> dict[str, Any]:
        return {
            key: (
                state_hash(result.state),
                [alert.lifecycle_id for alert in result.alerts],
                sorted((item.event.id, rejected.reasons) for item, rejected in result.rejections),
            )
            for key, result in replay_batch(items, _context, RULES).items()
        }

    assert outcome(shuffled) == outcome(batch)


def test_given_a_file_with_refusals_copies_and_late_claims_in_another_order_then_the_same_json(
    tmp_path: Path,
) -> None:
    """`uac replay --file --json` in any order of the lines: the same subjects, states, alerts
    and refusals (only where each refused event sits in the file differs); a stop dated before
    its order is admitted and flagged, and a retraction the file holds with its claim is
    applied after it, even when it was recorded first (as `uac publish` sends it); an
    intolerance accepted as a warning and then recorded as an allergy ends raised as critical."""
    day = timedelta(days=1)
    allergy = make_event("AllergyRecorded", "allergy", payload={"allergy_type": "intolerance"})
    order = make_event("MedicationPrescribed", "order", at=day)
    alert = str(judged_one_at_a_time([allergy, order])[1][0].alert_id)
    events = [
        allergy,
        order,
        make_event(
            "AlertAcknowledged",
            "accept",
            at=2 * day,
            payload={"alert_id": alert, "action": "accepted"},
        ),
        make_event("AllergyRecorded", "regrade", at=3 * day, payload={"allergy_type": "allergy"}),
        make_event(
            "AllergyRecorded",
            "nkda",
            at=day,
            payload={
                "allergy_id": "allergy-2",
                "substance": "No known drug allergies",
                "negated": True,
            },
        ),
        make_event("PreferenceStated", "diet", at=day, payload={"value": "vegan"}),
        make_event("PreferenceStated", "reversal", at=2 * day, payload={"value": "omnivore"}),
        make_event(
            "ClaimRetracted",
            "retract-early",
            at=4 * day,
            recorded=allergy.occurred_at - day,
            payload={"claim_id": event_id("diet")},
        ),
        make_event(
            "MedicationStopped",
            "stop-before-order",
            at=day / 2,
            recorded=allergy.occurred_at + 2 * day,
        ),
    ]
    lines = [json.dumps(event_document(event)) for event in events]
    lines.append(lines[1])
    shuffled = list(lines)
    random.Random(7).shuffle(shuffled)
    outputs = []
    for name, content in (("sorted", lines), ("shuffled", shuffled)):
        path = tmp_path / f"{name}.ndjson"
        path.write_text("\n".join(content) + "\n", encoding="utf-8")
        result = CliRunner().invoke(app, ["replay", "--file", str(path), "--json"])
        (subject,) = [json.loads(line) for line in result.stdout.splitlines() if line]
        for refused in subject["rejected"]:
            refused.pop("origin")
        outputs.append(subject)
    assert outputs[0] == outputs[1]
    assert [r["reasons"][0] for r in outputs[0]["rejected"]] == ["duplicate_event_id"]
    (diet,) = outputs[0]["state"]["preferences"]["care"]["diet"]["history"][:1]
    assert (diet["value"], diet["status"]) == ("vegan", "retracted")
    flagged = [a for a in outputs[0]["alerts"] if a["rule_id"] == "follow-up-before-its-claim"]
    assert [(a["status"], a["cause"][1]) for a in flagged] == [
        ("raised", f"medication_stop:{event_id('stop-before-order')}")
    ]
    final = [a for a in outputs[0]["alerts"] if a["alert_id"] == alert][-1]
    assert (final["alert_id"], final["status"], final["severity"]) == (alert, "raised", "critical")
