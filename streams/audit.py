"""Recording reads of personal data: who read which tenant's subject, for what purpose, when.
Never the data itself; the subject is named by its `subject_ref`."""

from __future__ import annotations

import getpass
import hashlib
import uuid
from datetime import UTC, datetime

from aiokafka import AIOKafkaProducer

from schemas.codec import read_audit_codec
from schemas.erasures import ReadAudited, subject_ref
from streams.kafka_security import kafka_options


def reader_identity(explicit: str | None) -> str:
    return explicit or getpass.getuser()


def read_record(
    tenant: str, subject: str | None, actor: str, purpose: str, action: str, detail: str
) -> ReadAudited:
    return ReadAudited(
        audit_id=uuid.uuid4(),
        tenant_id=tenant,
        subject_ref=None if subject is None else subject_ref(tenant, subject),
        actor=actor,
        purpose=purpose,
        action=action,
        detail=detail,
        read_at=datetime.now(UTC),
    )


def digest(text: str) -> str:
    """A reference to what was read (e.g. a query) that does not repeat it."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


async def publish_read(bootstrap: str, topic: str, record: ReadAudited) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", client_id="uac-audit", **kafka_options()
    )
    await producer.start()
    try:
        await producer.send_and_wait(
            topic, value=read_audit_codec().encode(record), key=record.tenant_id.encode()
        )
    finally:
        await producer.stop()
