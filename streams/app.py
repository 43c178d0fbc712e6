"""Construction of the Faust application: settings in, app with topics, table and agents out.
No processing logic lives here (see `streams/processing.py` and `streams/agents.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import faust

from streams.settings import Settings
from streams.table_codecs import StoredStateType, SubjectKeyType, register_table_codecs
from streams.topics import Topics

STATE_TABLE = "user-state"


@dataclass(frozen=True)
class Pipeline:
    """The Faust objects the agents use."""

    app: faust.App
    topics: Topics
    events: Any
    accepted: Any
    quarantine: Any
    alerts: Any
    state: Any
    states: Any


def create_app(settings: Settings, bootstrap: str) -> Pipeline:
    register_table_codecs()
    topics = Topics(settings.topic_prefix, settings.partitions)
    app = faust.App(
        settings.app_id,
        broker=f"kafka://{bootstrap}",
        store="memory://",
        datadir=str(settings.home / "faust"),
        topic_partitions=settings.partitions,
        topic_replication_factor=1,
        consumer_auto_offset_reset="earliest",
        producer_linger=0.005,
        broker_commit_interval=1.0,
        broker_session_timeout=settings.session_timeout_seconds,
        broker_heartbeat_interval=settings.session_timeout_seconds / 4,
        web_enabled=False,
        processing_guarantee="at_least_once",
    )

    def raw_topic(name: str) -> Any:
        return app.topic(
            name, key_serializer="raw", value_serializer="raw", partitions=settings.partitions
        )

    states = app.Table(
        STATE_TABLE,
        partitions=settings.partitions,
        use_partitioner=True,
        key_type=SubjectKeyType,
        value_type=StoredStateType,
    )
    return Pipeline(
        app=app,
        topics=topics,
        events=raw_topic(topics.events),
        accepted=raw_topic(topics.accepted),
        quarantine=raw_topic(topics.quarantine),
        alerts=raw_topic(topics.alerts),
        state=raw_topic(topics.state),
        states=states,
    )
