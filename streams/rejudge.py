"""`uac rejudge`: after an upgrade brings new rules or drug knowledge, bring the alerts topic in
line with what they find in every subject's current state (`rules.rejudge`).

States are rebuilt from the accepted-events topic (as `uac replay --from-kafka` does, so erased
subjects are absent) and each subject's active alerts are read from the alerts topic. The
records `rejudged` returns are sealed with the subject's key and published on the alerts topic
keyed by subject, as the worker publishes, so alert consumers receive them and the sink writes
them to ClickHouse. Running it again publishes nothing: the stream already agrees.

A release may also render the state document differently (a field added, a view derived
otherwise): the checkpoints an earlier build wrote then differ from this build's only in their
rendering (`streams.rebuild.Cause.RENDERING`), and are republished so the state topic and
ClickHouse hold this build's document; a subject whose history differs is left as it is.

The workers must be stopped: a worker folding events meanwhile would move states past the
ones judged here. The command checks that the worker group has no members and refuses to run
otherwise. Once it has published, it records the rulebook it judged with (`streams.rulebook`),
so workers of this build start without warning that the alerts were judged otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aiokafka import AIOKafkaProducer

from projections.document import checkpoint_of
from projections.state import UserState
from rules.base import Rule
from rules.rejudge import Rejudgement, latest_records, rejudged
from schemas.alerts import Alert
from schemas.codec import alert_codec, checkpoint_codec
from streams.alert_output import readable_alerts
from streams.kafka_security import kafka_options
from streams.liveness import group_member_count
from streams.rebuild import latest_checkpoints, rebuild_states, rerendered
from streams.rulebook import Rulebook, record_rulebook
from streams.sealing import Sealer
from streams.topic_reader import read_topic
from streams.topics import Topics


class WorkersRunning(RuntimeError):
    """The worker group has members; re-judging now would race their transitions."""


@dataclass(frozen=True)
class Rejudged:
    subjects: int
    records: list[Alert]
    checkpoints: int
    """Checkpoints republished because this build renders the state document otherwise."""


async def rejudge(
    bootstrap: str,
    topics: Topics,
    worker_group: str,
    sealer: Sealer,
    rules: Sequence[Rule],
    why: Rejudgement,
    rulebook: Rulebook,
    *,
    publish: bool,
) -> Rejudged:
    members = await group_member_count(bootstrap, worker_group)
    if members:
        raise WorkersRunning(
            f"{members} worker(s) of group {worker_group} are running; stop them first"
        )
    states = await rebuild_states(bootstrap, topics.accepted, sealer)
    by_subject = await alerts_by_subject(bootstrap, topics.alerts, sealer)
    records = [
        record
        for key, state in sorted(states.items())
        for record in rejudged(state, latest_records(by_subject.get(key, [])), rules, why)
    ]
    stale = rerendered(await latest_checkpoints(bootstrap, topics.state, sealer), states)
    if publish:
        if records:
            await publish_alerts(bootstrap, topics.alerts, sealer, records)
        if stale:
            await publish_checkpoints(bootstrap, topics.state, sealer, stale)
        await record_rulebook(bootstrap, topics.rulebook, rulebook)
    return Rejudged(len(states), records, len(stale))


async def alerts_by_subject(bootstrap: str, topic: str, sealer: Sealer) -> dict[str, list[Alert]]:
    """Every readable alert record, per `tenant:subject`, in the order of the stream."""
    found: dict[str, list[Alert]] = {}
    for alert in readable_alerts(await read_topic(bootstrap, topic), sealer):
        found.setdefault(alert.key, []).append(alert)
    return found


async def publish_alerts(bootstrap: str, topic: str, sealer: Sealer, alerts: list[Alert]) -> None:
    """Sealed and keyed as the worker publishes them; returns once Kafka has every one."""
    codec = alert_codec()
    await publish_sealed(
        bootstrap, topic, sealer, [(alert.key, codec.encode(alert)) for alert in alerts]
    )


async def publish_checkpoints(
    bootstrap: str, topic: str, sealer: Sealer, states: list[UserState]
) -> None:
    """This build's checkpoints of `states`, sealed and keyed as the worker publishes them."""
    codec = checkpoint_codec()
    await publish_sealed(
        bootstrap,
        topic,
        sealer,
        [(state.key, codec.encode(checkpoint_of(state))) for state in states],
    )


async def publish_sealed(
    bootstrap: str, topic: str, sealer: Sealer, records: list[tuple[str, bytes]]
) -> None:
    """Each framed record sealed with its subject's key and keyed by it; returns once Kafka has
    every one."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", client_id="uac-rejudge", **kafka_options()
    )
    await producer.start()
    try:
        deliveries = [
            await producer.send(topic, key=key.encode(), value=sealer.seal(key, framed))
            for key, framed in records
        ]
        for delivery in deliveries:
            await delivery
    finally:
        await producer.stop()
