"""Which refused events a redrive sends through the gate again: one tenant's, refused only for
reasons an operator can mend, within the window asked for, each record once, never a copy of a
copy; the final reasons are refused by name."""

from __future__ import annotations

import asyncio
import hashlib
from datetime import timedelta
from types import SimpleNamespace

import pytest

from schemas.codec import decision_codec
from schemas.decisions import GateDecision
from schemas.reasons import ReasonCode
from streams import redrive as redrive_module
from streams.processing import Incoming, rejection
from streams.redrive import (
    REDRIVEN_FROM,
    NotRedrivable,
    Selection,
    matches,
    original_of,
    redrivable,
    selected,
)
from streams.topics import Topics
from tests.factories import T0, make_event

EVENTS = "uac.events"
ACTOR = frozenset({ReasonCode.ACTOR_NOT_ALLOWED})


def refused(
    offset: int,
    *reasons: ReasonCode,
    subject: str = "s1",
    hours: int = 0,
    value: bytes | None = None,
) -> GateDecision:
    event = make_event("PreferenceStated", f"e{offset}", subject=subject)
    body = value or f"value {offset}".encode()
    message = Incoming(event.key.encode(), body, EVENTS, 0, offset)
    return rejection(message, reasons, "refused", T0 + timedelta(hours=hours), event)


def test_given_only_mendable_reasons_then_they_are_taken_and_final_ones_refused_by_name() -> None:
    assert redrivable(["actor_not_allowed", "unknown_schema_id"]) == {
        ReasonCode.ACTOR_NOT_ALLOWED,
        ReasonCode.UNKNOWN_SCHEMA_ID,
    }
    with pytest.raises(NotRedrivable, match="occurred_in_future: final"):
        redrivable(["actor_not_allowed", "occurred_in_future"])
    with pytest.raises(NotRedrivable, match="subject_erased: final"):
        redrivable(["subject_erased"])
    with pytest.raises(NotRedrivable, match="unknown reason code"):
        redrivable(["actor_missing"])


@pytest.mark.parametrize(
    "final",
    [
        "duplicate_event_id",
        "secret_in_text",
        "special_category_without_consent",
        "not_sealed",
        "recorded_in_future",
        "malformed_avro",
    ],
)
def test_a_refusal_a_second_judgement_would_launder_is_never_redriven(final: str) -> None:
    with pytest.raises(NotRedrivable):
        redrivable([final])


def test_a_refusal_is_chosen_only_when_every_one_of_its_reasons_was_asked_for() -> None:
    decisions = [
        refused(1, ReasonCode.ACTOR_NOT_ALLOWED),
        refused(2, ReasonCode.ACTOR_NOT_ALLOWED, ReasonCode.SECRET_IN_TEXT),
        refused(3, ReasonCode.SIGNATURE_MISSING),
    ]
    chosen = selected(decisions, Selection("clinic-a", ACTOR), EVENTS)
    assert sorted(chosen) == [(0, 1)]


def test_only_the_tenant_asked_for_and_the_window_asked_for_are_chosen() -> None:
    decisions = [
        refused(1, ReasonCode.ACTOR_NOT_ALLOWED, hours=0),
        refused(2, ReasonCode.ACTOR_NOT_ALLOWED, hours=2),
        refused(3, ReasonCode.ACTOR_NOT_ALLOWED, hours=4),
    ]
    window = Selection("clinic-a", ACTOR, T0 + timedelta(hours=1), T0 + timedelta(hours=4))
    assert sorted(selected(decisions, window, EVENTS)) == [(0, 2)]
    other_tenant = Selection("clinic-b", ACTOR)
    assert selected(decisions, other_tenant, EVENTS) == {}
    assert selected(decisions, Selection("clinic-a", ACTOR), "other.events") == {}


def test_a_record_decided_twice_after_a_crash_is_chosen_once() -> None:
    twice = [refused(7, ReasonCode.ACTOR_NOT_ALLOWED), refused(7, ReasonCode.ACTOR_NOT_ALLOWED)]
    assert list(selected(twice, Selection("clinic-a", ACTOR), EVENTS)) == [(0, 7)]


def test_a_copy_names_its_original_and_the_bytes_are_checked_against_the_refusal() -> None:
    decision = refused(1, ReasonCode.ACTOR_NOT_ALLOWED)
    original = SimpleNamespace(value=b"value 1", headers=(("uac-signature", b"s"),))
    copy = SimpleNamespace(value=b"value 1", headers=((REDRIVEN_FROM, b"uac.events/0/1"),))
    assert original_of(original) is None
    assert original_of(copy) == "uac.events/0/1"
    assert matches(original, decision)
    assert not matches(SimpleNamespace(value=b"value 2"), decision)
    assert decision.message_sha256 == hashlib.sha256(b"value 1").hexdigest()


def test_each_refused_event_is_sent_once_its_original_or_else_its_latest_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Offsets 1-8 refused: 1 intact; 2 changed since; 3 a copy of 1 (left out: 1 is sent);
    4 and 5 gone from the log, but 6 and 7 are copies of 4 (7 the latest: sent, so 4 is not
    reported missing); 8 a copy of 9, whose original is not among the refusals (sent). A copy
    holds its original's bytes."""
    copied = {3: 1, 6: 4, 7: 4, 8: 9}

    def value_of(offset: int) -> bytes:
        return f"value {copied.get(offset, offset)}".encode()

    decisions = [
        refused(n, ReasonCode.ACTOR_NOT_ALLOWED, value=value_of(n)) for n in range(1, 8)
    ] + [refused(8, ReasonCode.ACTOR_NOT_ALLOWED, ReasonCode.UNKNOWN_TENANT, value=value_of(8))]

    def record(offset: int, value: bytes | None = None) -> object:
        copy_of = copied.get(offset)
        headers = () if copy_of is None else ((REDRIVEN_FROM, f"uac.events/0/{copy_of}".encode()),)
        body = value or value_of(offset)
        return SimpleNamespace(value=body, headers=headers, key=b"k", partition=0, offset=offset)

    in_log = {
        (0, 1): record(1),
        (0, 2): record(2, value=b"tampered"),
        (0, 3): record(3),
        (0, 6): record(6),
        (0, 7): record(7),
        (0, 8): record(8),
    }
    sent: dict[tuple[int, int], object] = {}

    async def quarantine(_bootstrap: str, _topic: str) -> list[object]:
        return [SimpleNamespace(value=decision_codec().encode(d)) for d in decisions]

    async def found(*_args: object) -> dict[tuple[int, int], object]:
        return in_log

    async def send(
        _bootstrap: str, _topic: str, records: list[tuple[tuple[int, int], object]]
    ) -> None:
        sent.update(records)

    monkeypatch.setattr(redrive_module, "read_topic", quarantine)
    monkeypatch.setattr(redrive_module, "refused_records", found)
    monkeypatch.setattr(redrive_module, "_send", send)
    selection = Selection("clinic-a", ACTOR | {ReasonCode.UNKNOWN_TENANT})
    topics = Topics("uac.", 4)

    dry = asyncio.run(redrive_module.redrive("b:9092", topics, selection, dry_run=True))
    assert (dry.sendable, sent) == (3, {})
    result = asyncio.run(redrive_module.redrive("b:9092", topics, selection, dry_run=False))
    assert sent == {(0, 1): in_log[(0, 1)], (0, 4): in_log[(0, 7)], (0, 9): in_log[(0, 8)]}
    assert (result.missing, result.changed, result.copies) == ([(0, 5)], [(0, 2)], 2)
    report = result.as_json()
    assert report["selected"] == 8
    assert report["selected_by_reason"] == {"actor_not_allowed": 8, "unknown_tenant": 1}
    assert report["sent"] == 3


def test_a_header_a_producer_set_hides_no_record_and_one_that_names_no_position_is_ignored() -> (
    None
):
    """Record 2 names record 1 as its original but holds other bytes (a producer's own
    `uac-redriven-from` header): it is an event of its own and is sent, as are records whose
    header is not a position of the events topic or not text."""

    def record(offset: int, header: bytes | None, value: bytes) -> object:
        headers = () if header is None else ((REDRIVEN_FROM, header),)
        return SimpleNamespace(value=value, headers=headers, key=b"k", partition=0, offset=offset)

    intact = {
        (0, 1): record(1, None, b"event A"),
        (0, 2): record(2, b"uac.events/0/1", b"event B"),
        (0, 3): record(3, b"garbage", b"event C"),
        (0, 4): record(4, b"uac.events/x/y", b"event D"),
        (0, 5): record(5, b"\xff\xfe", b"event E"),
        (0, 6): record(6, b"other.topic/0/1", b"event F"),
    }
    sent = redrive_module.one_per_event(intact, EVENTS)
    assert sorted(r.value for _, r in sent) == [
        b"event A",
        b"event B",
        b"event C",
        b"event D",
        b"event E",
        b"event F",
    ]
    assert [origin for origin, _ in sent] == [(0, 1), (0, 1), (0, 3), (0, 4), (0, 5), (0, 6)]
