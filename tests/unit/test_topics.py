"""The topics UaC creates and checks before Faust starts: the worker's tables' changelogs under
the names Faust gives them (its Faust app declares no topic itself, so an account without
Create runs once the topics exist), as many copies as the cluster can hold up to three, and a
refusal that names each topic with what it needs."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiokafka.errors import TopicAuthorizationFailedError
from aiokafka.protocol.admin import CreateTopicsResponse_v1

from streams.app import changelog_specs, create_app
from streams.keys import FileKeyStore
from streams.ledger import ErasureLedger
from streams.settings import Settings
from streams.topics import Replication, TopicsNotCreated, TopicSpec, check_created


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


@pytest.mark.parametrize(
    ("brokers", "configured", "factor", "configs"),
    [
        pytest.param(1, None, 1, {}, id="one broker, as the local one: one copy"),
        pytest.param(2, None, 2, {}, id="two brokers: two copies"),
        pytest.param(5, None, 3, {"min.insync.replicas": "2"}, id="five brokers: three copies"),
        pytest.param(5, 2, 2, {}, id="configured: what was asked for"),
        pytest.param(1, 3, 3, {"min.insync.replicas": "2"}, id="configured beyond the cluster"),
    ],
)
def test_topics_get_as_many_copies_as_the_cluster_holds_up_to_three(
    brokers: int, configured: int | None, factor: int, configs: dict[str, str]
) -> None:
    copies = Replication.for_cluster(brokers, configured)
    assert (copies.factor, copies.configs, copies.configured) == (
        factor,
        configs,
        configured is not None,
    )
