"""Construction of the Faust application: settings in, app with topics, table and agents out.
No processing logic lives here (see `streams/processing.py` and `streams/agents.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streams.delivery import InlineDeliveryApp
from streams.kafka_security import KafkaSecurity
from streams.keys import SubjectKeys
from streams.ledger import ErasureLedger
from streams.sealing import Sealer
from streams.settings import KAFKA_REQUEST_SECONDS, Settings
from streams.table_codecs import (
    PartitionProgressTable,
    StoredStateType,
    SubjectKeyType,
    SubjectTable,
    register_table_codecs,
)
from streams.topics import (
    PRODUCER_BATCH_BYTES,
    STATE_MESSAGE_BYTES,
    STATE_REQUEST_BYTES,
    Topics,
    TopicSpec,
)

STATE_TABLE = "user-state"
PROGRESS_TABLE = "events-progress"
STATE_TABLE_CONFIGS = {"max.message.bytes": str(STATE_MESSAGE_BYTES)}


def changelog_specs(app_id: str, partitions: int) -> tuple[TopicSpec, ...]:
    """The tables' changelog topics, named as Faust names them: the worker creates and checks
    them with the pipeline's topics (Faust itself declares no topic, so an account without
    Create runs once the topics exist)."""
    compacted = {"cleanup.policy": "compact"}
    return (
        TopicSpec(f"{app_id}-{STATE_TABLE}-changelog", partitions, compacted | STATE_TABLE_CONFIGS),
        TopicSpec(f"{app_id}-{PROGRESS_TABLE}-changelog", partitions, compacted),
    )


@dataclass(frozen=True)
class Pipeline:
    """The Faust objects and the key material the agents use."""

    app: InlineDeliveryApp
    topics: Topics
    events: Any
    accepted: Any
    quarantine: Any
    alerts: Any
    state: Any
    erasures: Any
    states: Any
    progress: Any
    """Events partition -> the next offset the agent expects there (`streams.continuity`)."""
    keys: SubjectKeys
    sealer: Sealer
    ledger: ErasureLedger


def create_app(
    settings: Settings, bootstrap: str, keys: SubjectKeys, ledger: ErasureLedger
) -> Pipeline:
    sealer = Sealer(keys)
    register_table_codecs(sealer)
    topics = Topics(settings.topic_prefix, settings.partitions)
    app = InlineDeliveryApp(
        settings.app_id,
        broker=f"kafka://{bootstrap}",
        store="memory://",
        datadir=str(settings.home / "faust"),
        topic_partitions=settings.partitions,
        topic_replication_factor=1,
        consumer_auto_offset_reset="earliest",
        producer_linger=0.005,
        broker_commit_interval=1.0,
        broker_request_timeout=KAFKA_REQUEST_SECONDS,
        broker_session_timeout=settings.session_timeout_seconds,
        broker_heartbeat_interval=settings.session_timeout_seconds / 4,
        web_enabled=False,
        broker_credentials=KafkaSecurity.of(settings).faust_credentials(),
        processing_guarantee="at_least_once",
        producer_max_request_size=STATE_REQUEST_BYTES,
        producer_max_batch_size=PRODUCER_BATCH_BYTES,
        consumer_max_fetch_size=STATE_REQUEST_BYTES,
        Table=SubjectTable,
        topic_allow_declare=False,
        topic_disable_leader=True,
    )

    def raw_topic(name: str, partitions: int = settings.partitions) -> Any:
        return app.topic(name, key_serializer="raw", value_serializer="raw", partitions=partitions)

    states = app.Table(
        STATE_TABLE,
        partitions=settings.partitions,
        use_partitioner=True,
        key_type=SubjectKeyType,
        value_type=StoredStateType,
        extra_topic_configs=STATE_TABLE_CONFIGS,
    )
    progress = app.tables.add(
        PartitionProgressTable(
            app,
            name=PROGRESS_TABLE,
            beacon=app.tables.beacon,
            partitions=settings.partitions,
            use_partitioner=True,
            key_type=int,  # type: ignore[arg-type]  # Faust decodes int (its annotation omits it)
            value_type=int,  # type: ignore[arg-type]
        )
    )
    return Pipeline(
        app=app,
        topics=topics,
        events=raw_topic(topics.events),
        accepted=raw_topic(topics.accepted),
        quarantine=raw_topic(topics.quarantine),
        alerts=raw_topic(topics.alerts),
        state=raw_topic(topics.state),
        erasures=raw_topic(topics.erasures, 1),
        states=states,
        progress=progress,
        keys=keys,
        sealer=sealer,
        ledger=ledger,
    )
