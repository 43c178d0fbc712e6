"""The worker's batch step without Kafka: raw messages in, decisions, accepted events, alerts,
states and erasures out. Nothing raises; every failure is a quarantine decision."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import partial
from pathlib import Path

import pytest

from projections.gate import GatePolicy, TenantPolicy
from rules.engine import default_rules
from schemas.codec import decision_codec, event_codec
from schemas.erasures import ref_of_key
from schemas.events import Event
from streams.keys import FileKeyStore
from streams.ledger import ErasureLedger
from streams.processing import BatchOutput, BatchProcessor, Incoming, quarantine_key
from streams.record_batches import default_partition
from streams.sealing import Sealer
from tests.factories import T0, make_event
from tests.fakes import TableKnowledge

POLICY = GatePolicy(
    tenants={"clinic-a": TenantPolicy(frozenset({"ehr-adapter"}), frozenset({"care"}))},
    require_sealed=True,
)
NOW = T0 + timedelta(days=30)


@pytest.fixture
def sealer(tmp_path: Path) -> Sealer:
    return Sealer(FileKeyStore(tmp_path / "keys"))


def processor(sealer: Sealer) -> BatchProcessor:
    return BatchProcessor(event_codec(), default_rules(TableKnowledge()), POLICY, sealer)


def message(value: bytes, key: str = "clinic-a:patient-1", offset: int = 0) -> Incoming:
    return Incoming(key.encode(), value, "uac.events", 0, offset)


def sealed(sealer: Sealer, event: Event, offset: int = 0) -> Incoming:
    return message(sealer.seal(event.key, event_codec().encode(event)), event.key, offset)


def unsealed(event: Event) -> Incoming:
    return message(event_codec().encode(event), event.key)


def run(sealer: Sealer, messages: list[Incoming]) -> BatchOutput:
    return processor(sealer).process_batch(messages, lambda _key: None, NOW)


def test_given_sealed_events_then_accepted_states_and_alerts(sealer: Sealer) -> None:
    allergy = make_event("AllergyRecorded", "a")
    drug = make_event("MedicationPrescribed", "rx", at=timedelta(days=1))
    output = run(sealer, [sealed(sealer, allergy, 0), sealed(sealer, drug, 1)])
    assert [item.event.id for item in output.accepted] == [allergy.id, drug.id]
    assert output.quarantined == []
    assert [a.rule_id for a in output.alerts] == ["drug-allergy-conflict"]
    assert output.states["clinic-a:patient-1"].version == 2


REJECTED = [
    pytest.param(lambda _: message(b"garbage"), "bad_framing", id="given garbage then bad_framing"),
    pytest.param(
        lambda _: message(event_codec().encode(make_event("PreferenceStated", "plain"))),
        "not_sealed",
        id="given a valid but unsealed personal event then not_sealed",
    ),
    pytest.param(
        lambda s: message(
            s.seal("clinic-a:patient-1", event_codec().encode(make_event("PreferenceStated", "x"))),
            "clinic-a:patient-2",
        ),
        "key_mismatch",
        id="given a record sealed for another subject than its key then key_mismatch",
    ),
    pytest.param(
        lambda s: message(s.seal("clinic-a:patient-1", b"\x00\x00\x00\x00\x01junk")),
        "malformed_avro",
        id="given a sealed record whose content is not Avro then malformed_avro",
    ),
    pytest.param(
        lambda s: message(s.seal("clinic-a:patient-1", b"x")[:-3] + b"bad"),
        "unreadable_seal",
        id="given a tampered seal then unreadable_seal",
    ),
    pytest.param(
        lambda _: message(b"UACS\x01\x00\x12clinic-a:patient-1" + b"\x00" * 40),
        "unreadable_seal",
        id="given a seal for a subject without any key then unreadable_seal",
    ),
]


@pytest.mark.parametrize(("build", "reason"), REJECTED)
def test_rejections(sealer: Sealer, build: Callable[[Sealer], Incoming], reason: str) -> None:
    output = run(sealer, [build(sealer)])
    assert [d.reasons for d in output.quarantined] == [(reason,)]
    assert output.accepted == []


def test_given_an_erasure_in_a_batch_then_later_events_of_that_subject_in_the_same_batch_are_refused(
    sealer: Sealer,
) -> None:
    before = make_event("PreferenceStated", "before")
    erasure = make_event("ErasureRequested", "erase", at=timedelta(hours=1))
    after = make_event(
        "PreferenceStated", "after", at=timedelta(hours=2), payload={"value": "vegan"}
    )
    plain_erasure = message(event_codec().encode(erasure), offset=1)
    output = run(sealer, [sealed(sealer, before, 0), plain_erasure, sealed(sealer, after, 2)])
    assert [e.id for e in output.erasures] == [erasure.id]
    assert output.erased == {"clinic-a:patient-1"}
    assert [d.reasons for d in output.quarantined] == [("subject_erased",)]


def test_given_a_destroyed_key_then_the_subjects_sealed_records_are_refused_as_erased(
    sealer: Sealer,
) -> None:
    event = make_event("PreferenceStated", "old")
    record = sealed(sealer, event)
    sealer.keys.destroy(event.key)
    output = run(sealer, [record])
    assert [d.reasons for d in output.quarantined] == [("subject_erased",)]


def test_given_an_erasure_in_the_ledger_whose_key_is_not_yet_destroyed_then_refused_as_erased(
    sealer: Sealer,
) -> None:
    """The window between the ledger entry and the key's destruction: the record still opens,
    and the ledger alone refuses it."""
    event = make_event("PreferenceStated", "late")
    ledger = ErasureLedger(sealer.keys, {ref_of_key(event.key)})
    output = processor(sealer).process_batch(
        [sealed(sealer, event)], lambda _key: None, NOW, ledger.is_erased
    )
    assert [d.reasons for d in output.quarantined] == [("subject_erased",)]
    assert output.accepted == []


def test_given_a_history_near_its_limit_then_the_batch_counts_its_own_events_too(
    sealer: Sealer,
) -> None:
    limit = GatePolicy(tenants=POLICY.tenants, require_sealed=True, max_history_bytes=1_000)
    bounded = BatchProcessor(event_codec(), default_rules(TableKnowledge()), limit, sealer)
    events = [make_event("PreferenceStated", f"p{n}", at=timedelta(hours=n)) for n in range(3)]
    size = len(event_codec().encode(events[0]))
    held = 1_000 - 2 * size + 1
    output = bounded.process_batch(
        [sealed(sealer, event, n) for n, event in enumerate(events)],
        lambda _key: None,
        NOW,
        history_bytes=lambda _key: held,
    )
    assert [item.event.id for item in output.accepted] == [events[0].id]
    assert [d.reasons for d in output.quarantined] == [("subject_history_full",)] * 2
    assert output.history_bytes == {"clinic-a:patient-1": held + size}


KAFKA_DEFAULT_MESSAGE_BYTES = 1_048_588
"""A broker's default `message.max.bytes`: the most a quarantine record (key and value) may be."""
HALF_A_MEGABYTE = "x" * 500_000

OVERLONG = [
    pytest.param(
        lambda _: unsealed(make_event("PreferenceStated", "long", tenant=HALF_A_MEGABYTE)),
        "unknown_tenant",
        id="given a tenant id of half a megabyte",
    ),
    pytest.param(
        lambda _: unsealed(make_event("PreferenceStated", "long", subject=HALF_A_MEGABYTE)),
        "oversize",
        id="given a subject id of half a megabyte",
    ),
    pytest.param(
        lambda s: sealed(s, make_event("PreferenceStated", "long", actor=HALF_A_MEGABYTE)),
        "actor_not_allowed",
        id="given an actor of half a megabyte",
    ),
    pytest.param(
        lambda _: message(b"garbage", key=f"{HALF_A_MEGABYTE}:{HALF_A_MEGABYTE}"),
        "bad_framing",
        id="given a message key of a megabyte",
    ),
]


@pytest.mark.parametrize(("build", "reason"), OVERLONG)
def test_given_overlong_ids_then_the_quarantine_record_still_fits_a_kafka_message(
    sealer: Sealer, build: Callable[[Sealer], Incoming], reason: str
) -> None:
    output = run(sealer, [build(sealer)])
    (decision,) = output.quarantined
    assert reason in decision.reasons
    assert "is too long to be kept in this record" in decision.detail
    size = len(quarantine_key(decision).encode()) + len(decision_codec().encode(decision))
    assert size < KAFKA_DEFAULT_MESSAGE_BYTES // 10


def test_given_a_subject_id_too_long_to_seal_under_a_raised_size_limit_then_it_is_refused_and_the_rest_go_on(
    sealer: Sealer,
) -> None:
    roomy = BatchProcessor(
        event_codec(),
        default_rules(TableKnowledge()),
        GatePolicy(tenants=POLICY.tenants, require_sealed=False, max_event_bytes=1_000_000),
        sealer,
    )
    long = make_event("PreferenceStated", "long", subject="s" * 70_000)
    short = make_event("PreferenceStated", "short")
    output = roomy.process_batch([unsealed(long), sealed(sealer, short, 1)], lambda _key: None, NOW)
    (decision,) = output.quarantined
    assert decision.reasons == ("oversize",)
    assert "longer than a sealed record can name" in decision.detail
    assert [item.event.id for item in output.accepted] == [short.id]
    assert list(output.states) == [short.key]


@pytest.mark.parametrize("key", [None, b"\xff\xfe"], ids=["no key", "a key not in UTF-8"])
def test_given_a_sealed_record_without_a_readable_key_then_key_mismatch_says_so(
    sealer: Sealer, key: bytes | None
) -> None:
    value = sealer.seal(
        "clinic-a:patient-1", event_codec().encode(make_event("PreferenceStated", "x"))
    )
    output = run(sealer, [Incoming(key, value, "uac.events", 0, 0)])
    (decision,) = output.quarantined
    assert decision.reasons == ("key_mismatch",)
    assert "no key in UTF-8" in decision.detail


def test_given_a_record_off_its_keys_partition_then_wrong_partition_and_on_its_own_accepted(
    sealer: Sealer,
) -> None:
    """A worker owns a subject's state with its partition: a record another partition carries
    (a producer that chose it, or another partitioner) is refused before it is opened, and the
    same bytes on the key's partition are judged as usual."""
    event = make_event("PreferenceStated", "placed")
    home = default_partition(event.key.encode(), 4)
    value = sealer.seal(event.key, event_codec().encode(event))
    elsewhere = Incoming(event.key.encode(), value, "uac.events", (home + 1) % 4, 0)
    placed = Incoming(event.key.encode(), value, "uac.events", home, 0)
    checked = BatchProcessor(
        event_codec(),
        default_rules(TableKnowledge()),
        POLICY,
        sealer,
        home_partition=partial(default_partition, partitions=4),
    )
    refused = checked.process_batch([elsewhere], lambda _key: None, NOW)
    assert [d.reasons for d in refused.quarantined] == [("wrong_partition",)]
    decision = refused.quarantined[0]
    assert (decision.tenant_id, decision.subject_id) == ("clinic-a", "patient-1")
    assert f"partition {(home + 1) % 4}" in decision.detail
    assert f"belongs on partition {home}" in decision.detail
    assert refused.accepted == []
    accepted = checked.process_batch([placed], lambda _key: None, NOW)
    assert [item.event.id for item in accepted.accepted] == [event.id]


def test_given_a_refused_record_whose_key_holds_two_colons_then_its_tenant_still_sees_the_decision(
    sealer: Sealer,
) -> None:
    output = run(sealer, [message(b"garbage", key="clinic-a:a:b")])
    decision = output.quarantined[0]
    assert (decision.tenant_id, decision.subject_id) == ("clinic-a", None)
    assert decision.reasons == ("bad_framing",)
