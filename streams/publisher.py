"""The producer SDK: validate against the registered Avro schema, then publish to the events
topic keyed by `tenant:subject`. Re-sending an event is safe: the gate deduplicates by event id."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError, MessageSizeTooLargeError

from rules.batch import Submitted
from schemas.codec import AvroCodec, event_codec
from schemas.errors import DecodeError
from schemas.events import Event
from schemas.reasons import ReasonCode
from streams.kafka_security import kafka_options
from streams.keys import SubjectErased
from streams.sealing import Sealer, SubjectTooLong
from streams.signatures import Signer
from streams.topic_reader import TopicMissing, topic_partitions

log = logging.getLogger(__name__)

NOT_DELIVERED = "not_delivered"
"""The reason of a record the broker did not take (it never reached the gate)."""


@dataclass(frozen=True)
class Published:
    origin: str
    event_id: str
    partition: int
    offset: int


@dataclass(frozen=True)
class NotSent:
    origin: str
    reason: str
    message: str


def validated_bytes(codec: AvroCodec[Event], event: Event) -> bytes:
    """Encode and read back with the registered schema: what leaves here is decodable."""
    encoded = codec.encode(event)
    if codec.decode(encoded) != event:
        raise DecodeError(f"event {event.id} does not survive an Avro round trip")
    return encoded


def wire_bytes(codec: AvroCodec[Event], sealer: Sealer | None, event: Event) -> bytes:
    """What goes on the log: the validated record, sealed with the subject's key (an erasure
    request too: it becomes unreadable with everything else once the erasure is carried out)."""
    framed = validated_bytes(codec, event)
    return framed if sealer is None else sealer.seal(event.key, framed)


class EventPublisher:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        sealer: Sealer | None,
        codec: AvroCodec[Event] | None = None,
        topic_wait: float = 30.0,
        signer: Signer | None = None,
    ) -> None:
        self._bootstrap, self._topic, self._topic_wait = bootstrap, topic, topic_wait
        self._sealer, self._signer = sealer, signer
        self._codec = codec or event_codec()
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            client_id="uac-publisher",
            **kafka_options(),
        )

    async def __aenter__(self) -> EventPublisher:
        """Start the producer once the events topic exists: a pipeline that is starting creates
        it; TopicMissing when it is still missing after `topic_wait` seconds."""
        try:
            await created_topic(self._bootstrap, self._topic, self._topic_wait)
        except BaseException:
            await self._producer.stop()
            raise
        await self._producer.start()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self._producer.stop()

    async def publish(self, event: Event, origin: str = "") -> Published:
        value, key = wire_bytes(self._codec, self._sealer, event), event.key.encode("utf-8")
        metadata = await self._producer.send_and_wait(
            self._topic, value=value, key=key, headers=self._headers(key, value)
        )
        return Published(origin, event.id, metadata.partition, metadata.offset)

    def _headers(self, key: bytes, value: bytes) -> list[tuple[str, bytes]] | None:
        """The record's signature, when this publisher signs (`streams.signatures`)."""
        return None if self._signer is None else list(self._signer.headers(key, value))

    async def publish_all(self, batch: Sequence[Submitted]) -> list[Published | NotSent]:
        """Send everything, then wait once: fast for files. One result per event, in the
        batch's order; an event that fails validation or that Kafka refuses (e.g. larger than
        a Kafka message may be) is `NotSent`, and the others are still sent."""
        sent = [(item, await self._send(item)) for item in batch]
        return [await _delivered(item, sending) for item, sending in sent]

    async def _send(self, item: Submitted) -> NotSent | asyncio.Future[Any]:
        try:
            value, key = wire_bytes(self._codec, self._sealer, item.event), item.event.key.encode()
            future: asyncio.Future[Any] = await self._producer.send(
                self._topic, value=value, key=key, headers=self._headers(key, value)
            )
        except DecodeError as error:
            return NotSent(item.origin, error.reason.value, str(error))
        except SubjectErased as error:
            return NotSent(item.origin, ReasonCode.SUBJECT_ERASED.value, str(error))
        except SubjectTooLong as error:
            return NotSent(item.origin, ReasonCode.OVERSIZE.value, f"not sealed: {error}")
        except KafkaError as error:
            return refused(item, error)
        return future

    async def send_raw(self, key: bytes | None, value: bytes) -> tuple[int, int]:
        """Publish bytes as they are (operators' tooling and fault tests); no validation."""
        metadata = await self._producer.send_and_wait(self._topic, value=value, key=key)
        return metadata.partition, metadata.offset


async def created_topic(bootstrap: str, topic: str, seconds: float) -> None:
    """Return once `topic` exists; TopicMissing when it still does not after `seconds`."""
    deadline, waiting = time.monotonic() + seconds, False
    while True:
        try:
            await topic_partitions(bootstrap, topic)
            return
        except TopicMissing:
            if time.monotonic() >= deadline:
                raise
        if not waiting:
            log.warning("topic %s does not exist yet; waiting up to %.0f s for it", topic, seconds)
            waiting = True
        await asyncio.sleep(0.5)


async def _delivered(
    item: Submitted, sending: NotSent | asyncio.Future[Any]
) -> Published | NotSent:
    if isinstance(sending, NotSent):
        return sending
    try:
        metadata = await sending
    except KafkaError as error:
        return refused(item, error)
    return Published(item.origin, item.event.id, metadata.partition, metadata.offset)


def refused(item: Submitted, error: KafkaError) -> NotSent:
    """An event Kafka did not take: too large for a Kafka message, or not delivered."""
    if isinstance(error, MessageSizeTooLargeError):
        detail = f"{item.encoded_size} bytes encoded: more than a Kafka message may hold"
        return NotSent(item.origin, ReasonCode.OVERSIZE.value, detail)
    return NotSent(item.origin, NOT_DELIVERED, f"Kafka did not take it: {error!r}")
