"""`EventPublisher.publish_all`, the SDK call behind `uac publish`: one result per event in the
file's order; an event Kafka refuses is reported as not sent and the others still go out."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from aiokafka.errors import KafkaTimeoutError, MessageSizeTooLargeError

from projections.gate import Signature
from rules.batch import Submitted
from schemas.reasons import ReasonCode
from streams.keys import FileKeyStore
from streams.publisher import NOT_DELIVERED, EventPublisher, NotSent, Published
from streams.sealing import Sealer
from streams.signatures import HEADER, ActorKeys, Signer, new_signing_key
from tests.factories import make_event


class Metadata(NamedTuple):
    partition: int
    offset: int


class RefusingProducer:
    """Takes records as aiokafka's producer does: one larger than `limit` bytes is refused when
    sent, one keyed `lost` fails on delivery."""

    def __init__(self, limit: int) -> None:
        self.limit, self.sent = limit, 0
        self.records: list[tuple[bytes, bytes, Any]] = []

    async def send(
        self, topic: str, *, value: bytes, key: bytes, headers: Any = None
    ) -> asyncio.Future[Any]:
        self.records.append((key, value, headers))
        if len(value) > self.limit:
            raise MessageSizeTooLargeError("larger than max_request_size")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if key.endswith(b":lost"):
            future.set_exception(KafkaTimeoutError())
        else:
            future.set_result(Metadata(0, self.sent))
            self.sent += 1
        return future


def _submitted(name: str, subject: str = "patient-1", note: str = "") -> Submitted:
    payload = {"note": note} if note else None
    event = make_event("TravelRecorded", name, subject=subject, payload=payload)
    return Submitted(name, event, 0)


def _publish(
    batch: list[Submitted],
    signer: Signer | None = None,
    producer: RefusingProducer | None = None,
    sealer: Sealer | None = None,
) -> list[Published | NotSent]:
    async def run() -> list[Published | NotSent]:
        publisher = EventPublisher("127.0.0.1:9", "events", sealer, signer=signer)
        await publisher._producer.stop()
        publisher._producer = producer or RefusingProducer(limit=2_000)
        return await publisher.publish_all(batch)

    return asyncio.run(run())


def test_given_a_signing_key_then_every_record_carries_a_signature_of_its_key_and_value(
    tmp_path: Path,
) -> None:
    new_signing_key(tmp_path / "k.pem")
    signer = Signer.from_file(tmp_path / "k.pem")
    producer = RefusingProducer(limit=2_000)
    batch = [_submitted("a"), _submitted("b", subject="patient-2")]
    _publish(batch, signer, producer)
    keys = ActorKeys({("clinic-a", "ehr-adapter"): (signer.private_key.public_key(),)})
    for item, (key, value, headers) in zip(batch, producer.records, strict=True):
        assert [name for name, _ in headers] == [HEADER]
        assert keys.check(item.event, key, value, tuple(headers)) is Signature.VALID
    _publish(batch, None, unsigned := RefusingProducer(limit=2_000))
    assert [headers for _, _, headers in unsigned.records] == [None, None]


def test_given_an_event_too_large_for_kafka_then_it_is_not_sent_and_the_rest_go_out() -> None:
    results = _publish([_submitted("a"), _submitted("big", note="x" * 5_000), _submitted("b")])
    assert [type(r) for r in results] == [Published, NotSent, Published]
    assert [r.origin for r in results] == ["a", "big", "b"]
    refused = results[1]
    assert isinstance(refused, NotSent)
    assert refused.reason == ReasonCode.OVERSIZE.value
    assert "more than a Kafka message may hold" in refused.message


def test_given_a_subject_id_too_long_to_seal_then_it_is_not_sent_and_the_rest_go_out(
    tmp_path: Path,
) -> None:
    batch = [_submitted("a"), _submitted("long", subject="x" * 70_000), _submitted("b")]
    sealer = Sealer(FileKeyStore(tmp_path / "keys"))
    results = _publish(batch, producer=RefusingProducer(limit=1_000_000), sealer=sealer)
    assert [(type(r), r.origin) for r in results] == [
        (Published, "a"),
        (NotSent, "long"),
        (Published, "b"),
    ]
    refused = results[1]
    assert isinstance(refused, NotSent)
    assert refused.reason == ReasonCode.OVERSIZE.value
    assert "tenant_id:subject_id of 70,009 bytes is longer than a sealed record" in refused.message


def test_given_an_event_kafka_does_not_deliver_then_it_is_reported_in_its_place() -> None:
    results = _publish([_submitted("lost", subject="lost"), _submitted("kept")])
    assert [(type(r), r.origin) for r in results] == [(NotSent, "lost"), (Published, "kept")]
    assert isinstance(results[0], NotSent)
    assert results[0].reason == NOT_DELIVERED
    assert "KafkaTimeoutError" in results[0].message


@pytest.mark.parametrize("size", [0, 1])
def test_results_keep_the_order_of_the_batch(size: int) -> None:
    batch = [_submitted(f"e{n}", note="x" * 5_000 if n % 2 == size else "") for n in range(6)]
    assert [r.origin for r in _publish(batch)] == [f"e{n}" for n in range(6)]
