"""The topics the worker creates and checks before Faust starts: its tables' changelogs, under
the names Faust gives them, so the worker's Faust app declares no topic itself (an account
without Create runs once the topics exist) and uses no leader topic."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiokafka.errors import TopicAuthorizationFailedError
from aiokafka.protocol.admin import CreateTopicsResponse_v1

from streams.app import changelog_specs, create_app
from streams.keys import FileKeyStore
from streams.ledger import ErasureLedger
from streams.settings import Settings
from streams.topics import TopicsNotCreated, TopicSpec, check_created


def test_the_changelogs_the_worker_creates_are_the_ones_its_tables_use(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, app_id="uac-test", partitions=6)
    keys = FileKeyStore(tmp_path / "keys")
    pipeline = create_app(settings, "127.0.0.1:9092", keys, ErasureLedger(keys))
    tables = {
        table.changelog_topic.get_topic_name(): table.partitions
        for table in pipeline.app.tables.values()
    }
    specs = changelog_specs(settings.app_id, settings.partitions)
    assert {spec.name: spec.partitions for spec in specs} == tables
    assert {spec.cleanup_policy for spec in specs} == {"compact"}
    assert not pipeline.app.conf.topic_allow_declare
    assert pipeline.app.conf.topic_disable_leader


def test_given_a_cluster_that_refuses_a_topic_then_it_is_named_with_what_it_needs() -> None:
    spec = TopicSpec("uac.events", 4, {"cleanup.policy": "delete"})
    response = CreateTopicsResponse_v1(
        topic_errors=[
            ("uac.events", TopicAuthorizationFailedError.errno, "Authorization failed."),
            ("uac.alerts", 36, "Topic 'uac.alerts' already exists."),
        ]
    )
    with pytest.raises(TopicsNotCreated) as refused:
        check_created(response, [spec, TopicSpec("uac.alerts", 4)])
    assert "uac.events (4 partitions; cleanup.policy=delete): " in str(refused.value)
    assert "TopicAuthorizationFailedError: Authorization failed." in str(refused.value)
    assert "uac.alerts" not in str(refused.value)
