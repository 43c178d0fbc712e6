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
from streams.topics import Replication, Topics, TopicsNotCreated, TopicSpec, check_created


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


BROKER_DEFAULTS = {
    "cleanup.policy": "delete",
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "max.message.bytes": "1048588",
}
"""A topic's effective configs on a broker with Kafka's defaults (kept a week)."""
TOPICS = Topics("uac.", 4)


def _spec(name: str) -> TopicSpec:
    return next(spec for spec in TOPICS.specs() if spec.name == name)


def _as_created(spec: TopicSpec) -> dict[str, str]:
    """The effective configs of a topic UaC created: the broker's defaults and its own."""
    return BROKER_DEFAULTS | spec.configs


def test_given_the_topics_as_uac_creates_them_then_no_problem() -> None:
    specs = TOPICS.specs() + changelog_specs("uac", 4)
    assert [problem for spec in specs for problem in spec.config_problems(_as_created(spec))] == []


@pytest.mark.parametrize(
    ("topic", "changed", "problem"),
    [
        pytest.param(
            "uac.events.accepted",
            {"retention.ms": "60000"},
            "uac.events.accepted has retention.ms=60000, UaC needs -1 (its records are kept "
            "forever)",
            id="given accepted events deleted after a minute then named",
        ),
        pytest.param(
            "uac.events",
            {"retention.bytes": "1073741824"},
            "uac.events has retention.bytes=1073741824, UaC needs -1",
            id="given events deleted past a size then named",
        ),
        pytest.param(
            "uac.state",
            {"max.message.bytes": "1000"},
            "uac.state has max.message.bytes=1000, UaC needs at least 67108864 (the largest "
            "record batch it writes there)",
            id="given checkpoints larger than the state topic takes then named",
        ),
        pytest.param(
            "uac.alerts",
            {"max.message.bytes": "100000"},
            "uac.alerts has max.message.bytes=100000, UaC needs at least 262144",
            id="given a topic that takes less than the worker's record batches then named",
        ),
        pytest.param(
            "uac.state",
            {"cleanup.policy": "delete"},
            "uac.state has cleanup.policy=delete, UaC needs compact",
            id="given the compacted state topic made to delete then named",
        ),
    ],
)
def test_given_an_existing_topic_that_would_lose_or_refuse_records_then_it_is_named(
    topic: str, changed: dict[str, str], problem: str
) -> None:
    spec = _spec(topic)
    problems = spec.config_problems(_as_created(spec) | changed)
    assert len(problems) == 1
    assert problems[0].startswith(problem)


def test_given_more_room_than_needed_or_a_retention_compaction_ignores_then_no_problem() -> None:
    """A compacted topic keeps each key's latest record whatever its retention.ms."""
    state = _spec("uac.state")
    roomier = {"max.message.bytes": str(128 * 1024 * 1024), "retention.ms": "60000"}
    assert state.config_problems(_as_created(state) | roomier) == []
    audit = _spec("uac.audit")
    assert audit.config_problems(_as_created(audit) | {"max.message.bytes": "16384"}) == []
