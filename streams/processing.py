"""One batch of raw messages from the events topic through decode, gate, fold and rules.

Kafka-free and Faust-free so it can be tested directly; the agent only moves bytes in and out.
Nothing raises out of `process_batch`: a message that fails in any way becomes a quarantine
decision with a reason code, and the rest of the batch goes on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple, Protocol
from uuid import NAMESPACE_URL, UUID, uuid5

from projections.gate import GateContext, GatePolicy, Rejected
from projections.state import UserState, initial_state
from projections.views import DEFAULT_POLICY, FoldPolicy
from rules.base import Rule
from rules.engine import process
from schemas.alerts import Alert
from schemas.codec import AvroCodec
from schemas.decisions import GateDecision, GateOutcome
from schemas.errors import DecodeError, RegistryUnavailable
from schemas.events import ErasureRequested, Event, subject_key
from schemas.reasons import ReasonCode
from streams.keys import SubjectErased
from streams.sealing import Sealer, SealError, is_sealed, too_long_to_seal
from streams.signatures import ActorKeys, Headers

DECISION_NAMESPACE = uuid5(NAMESPACE_URL, "https://uac.example/gate-decision")


@dataclass(frozen=True)
class Incoming:
    """A message as read from the events topic, with where it sits in the log."""

    key: bytes | None
    value: bytes | None
    topic: str
    partition: int
    offset: int
    headers: Headers = ()


@dataclass(frozen=True)
class AcceptedEvent:
    key: str
    value: bytes
    """The message as received (sealed): forwarded unchanged to the accepted topic."""
    framed: bytes
    """The opened, framed Avro record (what the state table keeps, sealed again as a whole)."""
    event: Event
    decision_id: UUID
    source: Incoming


@dataclass
class BatchOutput:
    accepted: list[AcceptedEvent] = field(default_factory=list)
    quarantined: list[GateDecision] = field(default_factory=list)
    alerts: list[Alert] = field(default_factory=list)
    states: dict[str, UserState] = field(default_factory=dict)
    erasures: list[Event] = field(default_factory=list)
    erased: set[str] = field(default_factory=set)
    history_bytes: dict[str, int] = field(default_factory=dict)
    """Encoded event bytes each subject's history holds after this batch (subjects seen)."""


def decision_id(message: Incoming, outcome: GateOutcome, reasons: Sequence[str] = ()) -> UUID:
    """Deciding the same message (topic, partition, offset) the same way gives the same id, so a
    redelivery is idempotent; a different decision about it (the duplicate_event_id rejection of
    an accepted event that is redelivered after a crash) is a decision of its own."""
    where = f"{message.topic}/{message.partition}/{message.offset}"
    return uuid5(DECISION_NAMESPACE, f"{where}/{outcome.value}/{','.join(reasons)}")


def message_sha256(message: Incoming) -> str:
    return hashlib.sha256(message.value or b"").hexdigest()


def _key_text(message: Incoming) -> str | None:
    try:
        return None if message.key is None else message.key.decode("utf-8")
    except UnicodeDecodeError:
        return None


MAX_KEPT_ID = 1_024
"""The longest tenant id, subject id or actor a quarantine record copies from the message it
refuses; a longer one is left out and its length named in the detail."""
MAX_KEPT_DETAIL = 8_192
"""The longest detail a quarantine record keeps (a detail quotes ids and names it was given)."""


def rejection(
    message: Incoming,
    reasons: Sequence[ReasonCode],
    detail: str,
    now: datetime,
    event: Event | None = None,
) -> GateDecision:
    """The quarantine record of a refused message. It copies ids and detail only up to a bound,
    so that it fits a Kafka message whatever the message held (a tenant id of half a megabyte,
    quoted in the detail as well, would otherwise make a record the broker refuses)."""
    tenant, subject = (event.tenant_id, event.subject_id) if event else _split_key(message)
    actor = event.actor if event else None
    ids = {"tenant id": tenant, "subject id": subject, "actor": actor}
    overlong = {name: len(text) for name, text in ids.items() if text and len(text) > MAX_KEPT_ID}
    if len(detail) > MAX_KEPT_DETAIL:
        detail = f"{detail[:MAX_KEPT_DETAIL]}… ({len(detail) - MAX_KEPT_DETAIL:,} characters more)"
    for name, length in overlong.items():
        detail += f"; the {name} ({length:,} characters) is too long to be kept in this record"
    codes = tuple(reason.value for reason in reasons)
    return GateDecision(
        decision_id=decision_id(message, GateOutcome.REJECTED, codes),
        outcome=GateOutcome.REJECTED,
        reasons=codes,
        detail=detail,
        event_id=event.id if event else None,
        tenant_id=None if "tenant id" in overlong else tenant,
        subject_id=None if "subject id" in overlong else subject,
        actor=None if "actor" in overlong else actor,
        event_type=event.type.value if event else None,
        message_sha256=message_sha256(message),
        source_topic=message.topic,
        source_partition=message.partition,
        source_offset=message.offset,
        decided_at=now,
    )


def quarantine_key(decision: GateDecision) -> str:
    """The Kafka key of a quarantine record: its subject's `tenant_id:subject_id` (so it lands
    on the subject's partition), or `unknown` when the record does not name both."""
    if decision.tenant_id and decision.subject_id:
        return subject_key(decision.tenant_id, decision.subject_id)
    return "unknown"


def _split_key(message: Incoming) -> tuple[str | None, str | None]:
    """The tenant and subject a key names: a tenant id holds no colon, so the tenant is what
    precedes the first one (a record keyed `clinic-a:a:b` stays the tenant's to see), and the
    subject what follows when it is one id."""
    text = _key_text(message)
    if text is None or ":" not in text:
        return None, None
    tenant, _, subject = text.partition(":")
    return tenant or None, subject if subject and ":" not in subject else None


Refusal = tuple[ReasonCode, str]


class SubjectErasedCheck(Protocol):
    """Whether a subject was erased; `key_in_use` when a record was just opened with its key
    (the key store need not be asked again)."""

    def __call__(self, subject: str, /, *, key_in_use: bool = False) -> bool: ...


def _never_erased(_subject: str, *, key_in_use: bool = False) -> bool:  # noqa: ARG001 (the SubjectErasedCheck signature)
    return False


class Known(NamedTuple):
    """What the wiring knows about subjects before the batch."""

    state: Callable[[str], UserState | None]
    is_erased: SubjectErasedCheck
    history_bytes: Callable[[str], int]


@dataclass
class BatchProcessor:
    codec: AvroCodec[Event]
    rules: Sequence[Rule]
    gate_policy: GatePolicy
    sealer: Sealer | None = None
    fold_policy: FoldPolicy = DEFAULT_POLICY
    actor_keys: ActorKeys = field(default_factory=ActorKeys)
    """Public keys of the actors that sign (`streams.signatures`)."""
    home_partition: Callable[[bytes], int] | None = None
    """The events topic's partition of a key (Kafka's default partitioner): a record on
    another one is refused, since its subject's state lives with that partition. None for
    records that were never on a topic (`uac replay --file`)."""

    def process_batch(
        self,
        messages: Sequence[Incoming],
        load_state: Callable[[str], UserState | None],
        now: datetime,
        is_erased: SubjectErasedCheck = _never_erased,
        history_bytes: Callable[[str], int] = lambda _key: 0,
    ) -> BatchOutput:
        """Decide and fold every message. `history_bytes(key)` is what the subject's stored
        history already holds (the gate's capacity check)."""
        output = BatchOutput()
        known = Known(load_state, is_erased, history_bytes)
        for message in messages:
            try:
                self._process_one(message, known, now, output)
            except RegistryUnavailable:
                raise
            except Exception as error:  # noqa: BLE001 (a bug must quarantine, never lose)
                detail = (
                    f"processing failed with {type(error).__name__}; the message is kept in the log"
                )
                output.quarantined.append(
                    rejection(message, [ReasonCode.PROCESSING_ERROR], detail, now)
                )
        return output

    def _opened(self, key: str | None, value: bytes) -> bytes | Refusal:
        """The framed record of a (possibly sealed) message with this key, or why it cannot be
        read."""
        if not is_sealed(value):
            return value
        if self.sealer is None:
            return ReasonCode.UNREADABLE_SEAL, "this worker has no key store to open sealed records"
        try:
            subject, framed = self.sealer.open(value)
        except SubjectErased:
            return ReasonCode.SUBJECT_ERASED, "the subject was erased; its key no longer exists"
        except SealError as error:
            return ReasonCode.UNREADABLE_SEAL, str(error)
        if key is None:
            detail = (
                "the message has no key in UTF-8; it must be the subject the record is sealed for"
            )
            return ReasonCode.KEY_MISMATCH, detail
        if subject != key:
            return ReasonCode.KEY_MISMATCH, "the record is sealed for another subject than its key"
        return framed

    def _misplaced(self, message: Incoming) -> str | None:
        """Why a keyed record is on the wrong partition of the events topic, or None. Another
        worker may own its subject's partition (and state): judged here, it would be judged
        against a state that is not the subject's, and a copy on the right partition not
        known as a duplicate."""
        if self.home_partition is None or message.key is None:
            return None
        home = self.home_partition(message.key)
        if home == message.partition:
            return None
        return (
            f"the record is on partition {message.partition}, its key belongs on partition "
            f"{home} (Kafka's default murmur2 partitioner, as the Java client and the UaC "
            "publisher use; with librdkafka set partitioner=murmur2_random); send it without "
            "choosing a partition, or redrive it (`uac redrive --reason wrong_partition`)"
        )

    def _sealed_copy(self, key: str, value: bytes, framed: bytes) -> bytes:
        """What the accepted topic gets: the producer's sealed bytes, or a sealed copy of an
        unsealed record the gate let through (an erasure request), so no accepted copy outlives
        an erasure in clear."""
        if value is not framed or self.sealer is None:
            return value
        return self.sealer.seal(key, framed)

    def _process_one(
        self, message: Incoming, known: Known, now: datetime, output: BatchOutput
    ) -> None:
        if message.value is None:
            output.quarantined.append(
                rejection(message, [ReasonCode.BAD_FRAMING], "empty message", now)
            )
            return
        misplaced = self._misplaced(message)
        if misplaced is not None:
            output.quarantined.append(
                rejection(message, [ReasonCode.WRONG_PARTITION], misplaced, now)
            )
            return
        key = _key_text(message)
        opened = self._opened(key, message.value)
        if isinstance(opened, tuple):
            output.quarantined.append(rejection(message, [opened[0]], opened[1], now))
            return
        try:
            event = self.codec.decode(opened)
        except DecodeError as error:
            output.quarantined.append(rejection(message, [error.reason], str(error), now))
            return
        if key != event.key:
            detail = "the message key must be tenant_id:subject_id of the event"
            output.quarantined.append(
                rejection(message, [ReasonCode.KEY_MISMATCH], detail, now, event)
            )
            return
        state = output.states.get(key) or known.state(key)
        state = state or initial_state(event.tenant_id, event.subject_id)
        held = output.history_bytes.get(key)
        held = known.history_bytes(key) if held is None else held
        sealed = opened is not message.value
        context = GateContext(
            now=now,
            policy=self.gate_policy,
            encoded_size=len(opened),
            erased=key in output.erased or known.is_erased(key, key_in_use=sealed),
            sealed=sealed,
            history_bytes=held,
            signature=self.actor_keys.check(event, message.key, message.value, message.headers),
        )
        outcome = process(state, event, context, self.rules, self.fold_policy)
        if isinstance(outcome.decision, Rejected):
            decision = outcome.decision
            output.quarantined.append(
                rejection(message, decision.reasons, decision.detail, now, event)
            )
            return
        unsealable = None if self.sealer is None else too_long_to_seal(key)
        if unsealable is not None:
            detail = f"the subject's state and alerts could not be sealed: {unsealable}"
            output.quarantined.append(rejection(message, [ReasonCode.OVERSIZE], detail, now, event))
            return
        output.states[key] = outcome.after
        output.history_bytes[key] = held + len(opened)
        accepted_id = decision_id(message, GateOutcome.ACCEPTED)
        output.accepted.append(
            AcceptedEvent(key, message.value, opened, event, accepted_id, message)
        )
        output.alerts.extend(outcome.alerts)
        if isinstance(event.payload, ErasureRequested):
            output.erasures.append(event)
            output.erased.add(key)
