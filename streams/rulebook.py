"""Which rules and drug knowledge judged the alerts on the alerts topic: the rulebook.

Rules fire on transitions, so after an upgrade (a new rule, a new rule version, a new knowledge
release) facts recorded before it are judged by the new build only once `uac rejudge` has run.
The rulebook topic (compacted, one record) says which build last judged every subject: `uac
rejudge` records its own once it has published, and a worker that starts on an empty pipeline
records its own (it judges every event from the first). A worker that finds another rulebook,
or none beside accepted events, logs what differs and what to run, and reports it as a metric;
it still processes events (stopping would leave every new fact unjudged instead).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from aiokafka import AIOKafkaProducer, TopicPartition

from rules.base import Rule
from streams.kafka_security import kafka_options
from streams.topic_reader import groupless_consumer, read_topic, topic_partitions

RULEBOOK_KEY = b"rulebook"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rulebook:
    rules: tuple[str, ...]
    """`<rule id> v<version>` of every rule in use, sorted."""
    knowledge: str

    @classmethod
    def of(cls, rules: Sequence[Rule], knowledge: str) -> Rulebook:
        return cls(tuple(sorted(f"{rule.ref.id} v{rule.ref.version}" for rule in rules)), knowledge)

    def encode(self) -> bytes:
        return json.dumps({"rules": list(self.rules), "knowledge": self.knowledge}).encode()

    @classmethod
    def decode(cls, value: bytes) -> Rulebook:
        document = json.loads(value)
        return cls(tuple(document["rules"]), str(document["knowledge"]))


def unjudged(recorded: Rulebook | None, current: Rulebook, history: bool) -> str | None:
    """What an operator must know when the alerts were not judged by `current` (None when they
    were, or when there is nothing to judge: no recorded rulebook and no `history`)."""
    rejudge = (
        "facts recorded before are not judged by it until the workers are stopped and `uac "
        "rejudge` has run (docs/operator.md, Replay and rebuild)"
    )
    if recorded == current:
        return None
    if recorded is None:
        if not history:
            return None
        return (
            "no record of the rules that judged the accepted events (a pipeline older than the "
            f"rulebook): this worker judges with {_described(current)}; {rejudge}"
        )
    changes = [
        *(f"new {rule}" for rule in current.rules if rule not in recorded.rules),
        *(f"no longer {rule}" for rule in recorded.rules if rule not in current.rules),
    ]
    if recorded.knowledge != current.knowledge:
        changes.append(f"knowledge {recorded.knowledge} -> {current.knowledge}")
    return f"the alerts were judged by another rulebook ({'; '.join(changes)}): {rejudge}"


def _described(rulebook: Rulebook) -> str:
    return f"{', '.join(rulebook.rules)} and knowledge {rulebook.knowledge}"


async def recorded_rulebook(bootstrap: str, topic: str) -> Rulebook | None:
    """The rulebook last recorded (None: none yet, or a record this build cannot read, which is
    logged: `uac rejudge` records a readable one)."""
    values = [r.value for r in await read_topic(bootstrap, topic) if r.key == RULEBOOK_KEY]
    if not values or values[-1] is None:
        return None
    try:
        return Rulebook.decode(values[-1])
    except (ValueError, KeyError, TypeError) as error:
        log.warning("rulebook: the record on %s cannot be read (%s)", topic, error)
        return None


async def record_rulebook(bootstrap: str, topic: str, rulebook: Rulebook) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", client_id="uac-rulebook", **kafka_options()
    )
    await producer.start()
    try:
        await producer.send_and_wait(topic, key=RULEBOOK_KEY, value=rulebook.encode())
    finally:
        await producer.stop()


async def holds_records(bootstrap: str, topic: str) -> bool:
    """Whether any record was ever written to `topic`."""
    consumer = groupless_consumer(bootstrap, "uac-rulebook")
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in await topic_partitions(bootstrap, topic)]
        ends = await consumer.end_offsets(partitions)
        return any(end > 0 for end in ends.values())
    finally:
        await consumer.stop()


async def check_rulebook(
    bootstrap: str, rulebook_topic: str, accepted_topic: str, current: Rulebook
) -> str | None:
    """At a worker's start: record `current` on an empty pipeline, else say (and log at
    WARNING) how the alerts were judged otherwise."""
    recorded = await recorded_rulebook(bootstrap, rulebook_topic)
    history = recorded is None and await holds_records(bootstrap, accepted_topic)
    if recorded is None and not history:
        await record_rulebook(bootstrap, rulebook_topic, current)
        return None
    warning = unjudged(recorded, current, history)
    if warning is not None:
        log.warning("rulebook: %s", warning)
    return warning
