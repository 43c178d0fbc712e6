"""The topics UaC owns: names under a prefix, explicit partitions and configs, created at
start-up and checked so a mismatch fails fast with a message instead of a crash loop. A cluster
that refuses to create a missing topic (no Create ACL, a replication it cannot reach) is named
with its reason, with what the topic needs, so an administrator can create it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import TopicAlreadyExistsError, for_code

from streams.kafka_security import kafka_options

FOREVER = "-1"
STATE_MESSAGE_BYTES = 64 * 1024 * 1024
"""The largest record on the compacted state topic, whose checkpoints carry a subject's whole
state and so grow with its history (Kafka's default 1 MB would cap it at a few thousand
claims). The state table's changelog gets the same limit, though its records stay near
`table_codecs.SEGMENT_BYTES`. Producers and consumers are sized to match
(`STATE_REQUEST_BYTES`, with room for the request around it)."""
STATE_REQUEST_BYTES = STATE_MESSAGE_BYTES + 64 * 1024
PRODUCER_BATCH_BYTES = 256 * 1024
"""Room in one record batch of the worker (Faust's default is 16 KiB): a processed batch's
outputs go out as one record batch per partition (`streams.record_batches`), and below about
128 KiB the cost per batch dominates (24 µs of CPU per 500-byte record at 16 KiB, 8 µs at 128
KiB and above). Well under the brokers' default limit of a record batch (1 MiB); a topic the
worker writes whose `max.message.bytes` is below it is refused at start."""
CLIENT_BATCH_BYTES = 16 * 1024
"""aiokafka's default record batch: the most the commands' own producers (read audits, the
rulebook) send to a topic at once."""
DURABLE_REPLICAS = 3
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    largest_batch: int = PRODUCER_BATCH_BYTES
    """The largest record batch UaC writes to the topic: its `max.message.bytes` (Kafka's limit
    of a record batch) must be at least this, or the topic's own setting when UaC sets one."""

    @property
    def cleanup_policy(self) -> str:
        return self.configs.get("cleanup.policy", "delete")

    @property
    def needed_message_bytes(self) -> int:
        return max(self.largest_batch, int(self.configs.get("max.message.bytes", "0")))

    def config_problems(self, found: Mapping[str, str]) -> list[str]:
        """What in the topic's effective configs `found` (as the broker describes them) breaks
        what UaC needs of it: another cleanup policy, a retention that deletes records UaC keeps
        forever, a record batch limit below what UaC writes there."""
        problems = []
        policy = found.get("cleanup.policy")
        if policy != self.cleanup_policy:
            problems.append(
                f"{self.name} has cleanup.policy={policy}, UaC needs {self.cleanup_policy}"
            )
        for setting in ("retention.ms", "retention.bytes"):
            if self.configs.get(setting) == FOREVER and found.get(setting) != FOREVER:
                problems.append(
                    f"{self.name} has {setting}={found.get(setting)}, UaC needs {FOREVER} "
                    "(its records are kept forever)"
                )
        limit = found.get("max.message.bytes")
        if limit is None or int(limit) < self.needed_message_bytes:
            problems.append(
                f"{self.name} has max.message.bytes={limit}, UaC needs at least "
                f"{self.needed_message_bytes} (the largest record batch it writes there)"
            )
        return problems

    def described(self) -> str:
        configs = ", ".join(f"{name}={value}" for name, value in sorted(self.configs.items()))
        return f"{self.name} ({self.partitions} partitions; {configs})"


@dataclass(frozen=True)
class Topics:
    """Names of the pipeline's topics (all keyed by `tenant:subject`)."""

    prefix: str
    partitions: int

    @property
    def events(self) -> str:
        return f"{self.prefix}events"

    @property
    def accepted(self) -> str:
        return f"{self.prefix}events.accepted"

    @property
    def quarantine(self) -> str:
        return f"{self.prefix}events.quarantine"

    @property
    def alerts(self) -> str:
        return f"{self.prefix}alerts"

    @property
    def state(self) -> str:
        return f"{self.prefix}state"

    @property
    def erasures(self) -> str:
        """The erasure ledger (compacted, keyed by subject_ref)."""
        return f"{self.prefix}erasures"

    @property
    def rulebook(self) -> str:
        """Which rules and drug knowledge judged the alerts (`streams.rulebook`; one record)."""
        return f"{self.prefix}rulebook"

    @property
    def audit(self) -> str:
        """Records of reads of personal data (who, tenant, subject, purpose, when; no data)."""
        return f"{self.prefix}audit"

    @property
    def sink_inputs(self) -> tuple[str, ...]:
        """The topics the ClickHouse sink consumes: those it writes rows from, and the erasure
        ledger."""
        return (self.accepted, self.quarantine, self.alerts, self.state, self.audit, self.erasures)

    def specs(self) -> tuple[TopicSpec, ...]:
        """Every topic with its settings. The log of events is kept forever; state is compacted."""
        keep = {"cleanup.policy": "delete", "retention.ms": FOREVER, "retention.bytes": FOREVER}
        return (
            TopicSpec(self.events, self.partitions, keep),
            TopicSpec(self.accepted, self.partitions, keep),
            TopicSpec(self.quarantine, self.partitions, keep),
            TopicSpec(self.alerts, self.partitions, keep),
            TopicSpec(
                self.state,
                self.partitions,
                {"cleanup.policy": "compact", "max.message.bytes": str(STATE_MESSAGE_BYTES)},
            ),
            TopicSpec(self.erasures, 1, {"cleanup.policy": "compact"}),
            TopicSpec(self.audit, 1, keep, CLIENT_BATCH_BYTES),
            TopicSpec(self.rulebook, 1, {"cleanup.policy": "compact"}, CLIENT_BATCH_BYTES),
        )


class TopicMismatch(RuntimeError):
    """An existing topic does not have the partitions or configs UaC needs."""


class TopicsNotCreated(RuntimeError):
    """Topics UaC needs are missing and the cluster refused to create them."""


@dataclass(frozen=True)
class Replication:
    """How many copies of each partition the topics UaC creates get, and whether that number
    was asked for (UAC_TOPIC_REPLICATION_FACTOR) or chosen from the cluster's size."""

    factor: int
    configured: bool

    @classmethod
    def for_cluster(cls, brokers: int, configured: int | None) -> Replication:
        """The configured factor, or as many copies as the cluster holds, up to three."""
        if configured is not None:
            return cls(configured, configured=True)
        return cls(max(1, min(DURABLE_REPLICAS, brokers)), configured=False)

    @property
    def configs(self) -> dict[str, str]:
        """With three copies or more, a write acknowledged by all in-sync replicas (the
        producers' acks=all) is on at least two brokers."""
        return {"min.insync.replicas": "2"} if self.factor >= DURABLE_REPLICAS else {}


async def ensure_topics(
    bootstrap: str, specs: tuple[TopicSpec, ...], replication: int | None = None
) -> list[str]:
    """Create missing topics (`replication` copies of each partition; unset: as many as the
    cluster has brokers, up to three); raise TopicsNotCreated if the cluster refuses, and
    TopicMismatch if an existing topic differs. Returns the topics created."""
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap, client_id="uac-topics", **kafka_options()
    )
    await admin.start()
    try:
        brokers = len((await admin.describe_cluster())["brokers"])
        copies = Replication.for_cluster(brokers, replication)
        existing = set(await admin.list_topics())
        missing = [spec for spec in specs if spec.name not in existing]
        if missing:
            new = [
                NewTopic(
                    s.name, s.partitions, copies.factor, topic_configs=copies.configs | s.configs
                )
                for s in missing
            ]
            check_created(await admin.create_topics(new), missing)
        await _wait_for_leaders(admin, specs)
        await _check(admin, specs, copies)
        return [spec.name for spec in missing]
    finally:
        await admin.close()


def check_created(response: object, missing: list[TopicSpec]) -> None:
    """Raise TopicsNotCreated for each topic the cluster refused (one that exists by now, made
    by another process meanwhile, is no refusal)."""
    wanted = {spec.name: spec for spec in missing}
    refused = []
    for topic_error in getattr(response, "topic_errors", []):
        name, code = topic_error[0], topic_error[1]
        message = topic_error[2] if len(topic_error) > 2 else None
        if code in (0, TopicAlreadyExistsError.errno):
            continue
        why = for_code(code).__name__ + (f": {message}" if message else "")
        refused.append(f"{wanted[name].described() if name in wanted else name}: {why}")
    if refused:
        raise TopicsNotCreated(
            "the Kafka cluster refused to create topics UaC needs (create them as listed, or "
            "grant this account Create on them; docs/operator.md, Topics): " + "; ".join(refused)
        )


async def _wait_for_leaders(
    admin: AIOKafkaAdminClient, specs: tuple[TopicSpec, ...], timeout: float = 30.0
) -> None:
    """Return once every partition of every topic has a leader: a consumer group that joins
    before then can be assigned nothing for a topic created a moment ago."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        described = await admin.describe_topics([spec.name for spec in specs])
        ready = all(
            topic["partitions"] and all(p["leader"] >= 0 for p in topic["partitions"])
            for topic in described
        )
        if ready:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise TopicMismatch("topics were created but their partitions have no leader yet")
        await asyncio.sleep(0.2)


async def _check(
    admin: AIOKafkaAdminClient, specs: tuple[TopicSpec, ...], copies: Replication
) -> None:
    described = {d["topic"]: d for d in await admin.describe_topics([s.name for s in specs])}
    resources = [ConfigResource(ConfigResourceType.TOPIC, s.name) for s in specs]
    configs = _topic_configs(await admin.describe_configs(resources))
    problems = []
    for spec in specs:
        partitions = described[spec.name]["partitions"]
        if len(partitions) != spec.partitions:
            problems.append(
                f"{spec.name} has {len(partitions)} partitions, UaC needs {spec.partitions}"
            )
        problems.extend(spec.config_problems(configs.get(spec.name, {})))
        fewest = min(len(partition["replicas"]) for partition in partitions)
        if fewest < copies.factor:
            problem = f"{spec.name} has replication factor {fewest}, UaC needs {copies.factor}"
            if copies.configured:
                problems.append(problem)
            else:
                log.warning("%s (set UAC_TOPIC_REPLICATION_FACTOR to accept it)", problem)
    if problems:
        raise TopicMismatch(
            "existing topics do not match this configuration (set UAC_PARTITIONS / "
            "UAC_TOPIC_PREFIX to match, or change their configs or recreate them): "
            + "; ".join(problems)
        )


def _topic_configs(responses: list[object]) -> dict[str, dict[str, str]]:
    """Each topic's effective configs (name -> value) from DescribeConfigs responses."""
    configs: dict[str, dict[str, str]] = {}
    for response in responses:
        for resource in getattr(response, "resources", []):
            _error, _error_message, _kind, name, entries = resource[:5]
            configs[name] = {entry[0]: entry[1] for entry in entries}
    return configs
