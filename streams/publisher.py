"""The producer SDK: validate against the registered Avro schema, then publish to the events
topic keyed by `tenant:subject`. Re-sending an event is safe: the gate deduplicates by event id."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType

from aiokafka import AIOKafkaProducer

from rules.batch import Submitted
from schemas.codec import AvroCodec, event_codec
from schemas.errors import DecodeError
from schemas.events import Event
from schemas.reasons import ReasonCode
from streams.keys import SubjectErased
from streams.sealing import Sealer


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
    ) -> None:
        self._topic = topic
        self._sealer = sealer
        self._codec = codec or event_codec()
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            client_id="uac-publisher",
        )

    async def __aenter__(self) -> EventPublisher:
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
        value = wire_bytes(self._codec, self._sealer, event)
        metadata = await self._producer.send_and_wait(
            self._topic, value=value, key=event.key.encode("utf-8")
        )
        return Published(origin, event.id, metadata.partition, metadata.offset)

    async def publish_all(self, batch: Sequence[Submitted]) -> list[Published | NotSent]:
        """Send everything, then wait once: fast for files, one result per event."""
        pending = []
        results: list[Published | NotSent] = []
        for item in batch:
            try:
                value = wire_bytes(self._codec, self._sealer, item.event)
            except DecodeError as error:
                results.append(NotSent(item.origin, error.reason.value, str(error)))
                continue
            except SubjectErased as error:
                results.append(NotSent(item.origin, ReasonCode.SUBJECT_ERASED.value, str(error)))
                continue
            future = await self._producer.send(
                self._topic, value=value, key=item.event.key.encode("utf-8")
            )
            pending.append((item, future))
        for item, future in pending:
            metadata = await future
            results.append(
                Published(item.origin, item.event.id, metadata.partition, metadata.offset)
            )
        return results

    async def send_raw(self, key: bytes | None, value: bytes) -> tuple[int, int]:
        """Publish bytes as they are (operators' tooling and fault tests); no validation."""
        metadata = await self._producer.send_and_wait(self._topic, value=value, key=key)
        return metadata.partition, metadata.offset
