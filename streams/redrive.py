"""`uac redrive`: send events the gate refused for a cause that has since been mended through
the gate again (an actor or tenant missing from the tenants file, a key registered wrongly, a
schema the registry lacked, a limit raised, a claim that arrived after the event referring to
it, a processing fault fixed).

The quarantine topic holds each refusal's decision, without content; the refused record is
still in the events topic at the decision's source offset. A redrive selects one tenant's
decisions whose every reason is among those asked for (each of them a reason a mended cause
can clear), optionally within a window of decision times; reads each refused record from the
events topic; checks its bytes against the decision's SHA-256; and publishes it again to its
key's partition (where it was, unless it was refused as `wrong_partition`), unchanged (key,
sealed value and headers, so a signature still verifies) with a `uac-redriven-from` header
naming the original. Nothing is opened or decoded: a redrive reads no
personal data. The gate judges the copy as it judges any record: an erased subject stays
erased, an event accepted meanwhile is a duplicate, a cause not mended refuses it again.

Each refused event is sent once per run, whatever number of its copies were refused: its
original record, or, where retention deleted that, its latest redriven copy; every copy names
the original and holds its key and bytes (a record whose header names another record but whose
bytes differ is an event of its own, so a header a producer sets cannot hide a record from a
redrive). So running a redrive again re-sends each event once more, never a growing number
of copies; the gate refuses a copy of an event it accepted as `duplicate_event_id`.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from aiokafka import AIOKafkaProducer

from schemas.codec import decision_codec
from schemas.decisions import GateDecision
from schemas.reasons import ReasonCode
from streams.kafka_security import kafka_options
from streams.topic_reader import RangeReader, read_topic
from streams.topics import Topics

REDRIVEN_FROM = "uac-redriven-from"
REDRIVABLE: frozenset[ReasonCode] = frozenset(
    {
        ReasonCode.UNKNOWN_TENANT,
        ReasonCode.ACTOR_NOT_ALLOWED,
        ReasonCode.SIGNATURE_MISSING,
        ReasonCode.SIGNATURE_INVALID,
        ReasonCode.UNKNOWN_SCHEMA_ID,
        ReasonCode.INCOMPATIBLE_SCHEMA,
        ReasonCode.UNREADABLE_SEAL,
        ReasonCode.OVERSIZE,
        ReasonCode.SUBJECT_HISTORY_FULL,
        ReasonCode.SUPERSEDES_UNKNOWN_CLAIM,
        ReasonCode.RETRACTS_UNKNOWN_CLAIM,
        ReasonCode.BEFORE_ITS_CLAIM,
        ReasonCode.PROCESSING_ERROR,
        ReasonCode.WRONG_PARTITION,
    }
)
"""Reasons whose cause lies outside the record: the tenants file, the signing keys, the schema
registry, the key store, the gate's limits, the order of arrival, the worker's code, the
partition a producer chose (a redrive sends to the key's own). The others
are final: the record itself is wrong (malformed, secret in text, not sealed, pointing at
another subject), or a second judgement would launder it (an event from the future that time
has made plausible, special-category data without consent, an erased subject, a duplicate)."""

Position = tuple[int, int]
"""(partition, offset) of a record of the events topic."""


class NotRedrivable(ValueError):
    """Reasons asked for that a redrive never clears (named, with why)."""


def redrivable(reasons: Iterable[str]) -> frozenset[ReasonCode]:
    """The reason codes asked for; NotRedrivable for an unknown or final one."""
    asked = set(reasons)
    unknown = sorted(asked - {code.value for code in ReasonCode})
    if unknown:
        raise NotRedrivable(f"unknown reason code(s): {', '.join(unknown)}")
    final = sorted(asked - {code.value for code in REDRIVABLE})
    if final:
        raise NotRedrivable(
            f"{', '.join(final)}: final, never redriven (the record itself is at fault, or a "
            f"second judgement would admit what the first rightly refused); redrivable: "
            f"{', '.join(sorted(code.value for code in REDRIVABLE))}"
        )
    return frozenset(ReasonCode(reason) for reason in asked)


@dataclass(frozen=True)
class Selection:
    tenant: str
    reasons: frozenset[ReasonCode]
    since: datetime | None = None
    until: datetime | None = None

    def takes(self, decision: GateDecision, events_topic: str) -> bool:
        """A refusal of this tenant's record in the events topic, for reasons all asked for,
        decided within the window."""
        return (
            decision.tenant_id == self.tenant
            and decision.source_topic == events_topic
            and bool(decision.reasons)
            and set(decision.reasons) <= {reason.value for reason in self.reasons}
            and (self.since is None or decision.decided_at >= self.since)
            and (self.until is None or decision.decided_at < self.until)
        )


def selected(
    decisions: Iterable[GateDecision], selection: Selection, events_topic: str
) -> dict[Position, GateDecision]:
    """The chosen decisions, one per refused record (a record decided again after a crash has
    one decision per judgement)."""
    return {
        (decision.source_partition, decision.source_offset): decision
        for decision in decisions
        if selection.takes(decision, events_topic)
    }


@dataclass
class Redrive:
    """What a redrive found and did."""

    chosen: int = 0
    """Refused records chosen."""
    by_reason: Counter[str] = field(default_factory=Counter)
    """Chosen records per reason (a record refused for two reasons counts under both)."""
    sendable: int = 0
    """Chosen records found unchanged in the log, not copies: those sent again."""
    sent: bool = False
    """False for a dry run."""
    copies: int = 0
    """Chosen records left out because another record of the same event is sent (redriven
    copies of an original, or older copies)."""
    missing: list[Position] = field(default_factory=list)
    """Chosen records no longer in the events topic (deleted by retention)."""
    changed: list[Position] = field(default_factory=list)
    """Chosen records whose bytes are not those the gate refused."""

    def as_json(self) -> dict[str, Any]:
        return {
            "selected": self.chosen,
            "selected_by_reason": dict(sorted(self.by_reason.items())),
            "sendable": self.sendable,
            "sent": self.sendable if self.sent else 0,
            "copies_left_out": self.copies,
            "missing": [{"partition": p, "offset": o} for p, o in self.missing],
            "changed": [{"partition": p, "offset": o} for p, o in self.changed],
        }


def original_of(record: Any) -> str | None:
    """The `topic/partition/offset` a redriven copy names as its original; None for a record
    without that header or with one that is not text."""
    for name, value in record.headers or ():
        if name == REDRIVEN_FROM:
            try:
                return bytes(value).decode()
            except UnicodeDecodeError:
                return None
    return None


def original_position(record: Any, position: Position, events_topic: str) -> Position:
    """Where the refused event first was in the events topic: a redriven copy names it, an
    original is it (so is a record whose header names no position of the events topic)."""
    origin = original_of(record)
    if origin is None:
        return position
    topic, *place = origin.rsplit("/", 2)
    if topic != events_topic or len(place) != 2:
        return position
    try:
        return int(place[0]), int(place[1])
    except ValueError:
        return position


KeyAndValue = tuple[bytes | None, bytes | None]
"""A refused record as a redrive copies it: its key and value, unchanged."""


def one_per_event(intact: dict[Position, Any], events_topic: str) -> list[tuple[Position, Any]]:
    """One record per refused event, with the position the event first had: records are one
    event when they name the same original and hold the same key and bytes (a redrive copies a
    record unchanged), so a producer's own `uac-redriven-from` header does not make a record of
    its own a copy of another. Of each event, the original where it is among `intact`, else
    its latest copy."""
    copies_of: dict[tuple[Position, KeyAndValue], list[Position]] = {}
    for position, record in intact.items():
        origin = original_position(record, position, events_topic)
        copies_of.setdefault((origin, (record.key, record.value)), []).append(position)
    events = sorted(copies_of.items(), key=lambda item: (item[0][0], min(item[1])))
    return [
        (origin, intact[origin if origin in positions else max(positions)])
        for (origin, _), positions in events
    ]


def matches(record: Any, decision: GateDecision) -> bool:
    return hashlib.sha256(record.value or b"").hexdigest() == decision.message_sha256


async def refused_records(
    bootstrap: str, topics: Topics, chosen: dict[Position, GateDecision]
) -> dict[Position, Any]:
    """The chosen records as they are in the events topic (those retention has not deleted)."""
    reader, found = RangeReader(bootstrap, topics.events), {}
    try:
        for partition in sorted({p for p, _ in chosen}):
            offsets = sorted(o for p, o in chosen if p == partition)
            for first, last in _runs(offsets):
                async for records in reader.read(partition, first, last + 1, 500):
                    found.update(
                        {
                            (partition, r.offset): r
                            for r in records
                            if (partition, r.offset) in chosen
                        }
                    )
    finally:
        await reader.close()
    return found


def _runs(offsets: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted offsets as (first, last) ranges, a new range where a gap exceeds 1,000 records."""
    runs: list[tuple[int, int]] = []
    for offset in offsets:
        if runs and offset - runs[-1][1] <= 1000:
            runs[-1] = (runs[-1][0], offset)
        else:
            runs.append((offset, offset))
    return runs


async def redrive(
    bootstrap: str, topics: Topics, selection: Selection, *, dry_run: bool
) -> Redrive:
    codec = decision_codec()
    decisions = [codec.decode(r.value) for r in await read_topic(bootstrap, topics.quarantine)]
    chosen = selected(decisions, selection, topics.events)
    records = await refused_records(bootstrap, topics, chosen)
    result = Redrive(len(chosen), Counter(reason for d in chosen.values() for reason in d.reasons))
    intact, gone = {}, []
    for position, decision in sorted(chosen.items()):
        record = records.get(position)
        if record is None:
            gone.append(position)
        elif not matches(record, decision):
            result.changed.append(position)
        else:
            intact[position] = record
    to_send = one_per_event(intact, topics.events)
    originals = {origin for origin, _ in to_send}
    result.missing = [position for position in gone if position not in originals]
    result.copies = len(intact) - len(to_send)
    result.sendable = len(to_send)
    if not dry_run:
        await _send(bootstrap, topics.events, to_send)
        result.sent = True
    return result


async def _send(bootstrap: str, topic: str, records: Sequence[tuple[Position, Any]]) -> None:
    """Each record again, unchanged, to its key's partition (its own, unless it was refused as
    `wrong_partition`; a record without a key to its own), naming the event's original position
    (a copy's earlier `uac-redriven-from` header is replaced)."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        client_id="uac-redrive",
        **kafka_options(),
    )
    await producer.start()
    try:
        deliveries = []
        for (partition, offset), record in records:
            kept = [header for header in record.headers or () if header[0] != REDRIVEN_FROM]
            headers = [*kept, (REDRIVEN_FROM, f"{topic}/{partition}/{offset}".encode())]
            deliveries.append(
                await producer.send(
                    topic,
                    record.value,
                    key=record.key,
                    partition=record.partition if record.key is None else None,
                    headers=headers,
                )
            )
        await asyncio.gather(*deliveries)
    finally:
        await producer.stop()
