"""A cluster that authorizes by ACLs (a broker of its own, with KRaft's StandardAuthorizer):
the ACLs docs/operator.md lists are all the whole pipeline needs (worker, sink, publish, alerts,
lag, check-log), a producer needs only Write and Describe on the events topic, and an account
without ACLs is refused in one line."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams import local_kafka
from tests.integration.harness import Pipeline, new_pipeline, running, sasl_settings
from tests.integration.test_pipeline import SAMPLE, run_sample_through

pytestmark = pytest.mark.integration
APP, PRODUCER, NOBODY = "uac-app", "uac-producer", "uac-nobody"
PASSWORD = secrets.token_hex(16)
TOPIC_OPERATIONS = ("Read", "Write", "Describe", "Create", "DescribeConfigs")
GROUP_OPERATIONS = ("Read", "Describe")


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local_kafka.BrokerInfo]:
    with local_kafka.running_broker(
        tmp_path_factory.mktemp("kafka-acl"),
        sasl_users={APP: PASSWORD, PRODUCER: PASSWORD, NOBODY: PASSWORD},
        super_users=(),
    ) as info:
        yield info


def grant_pipeline(broker: local_kafka.BrokerInfo, pipeline: Pipeline) -> None:
    """docs/operator.md's ACLs for the account every UaC process of a deployment uses."""
    topics = (pipeline.prefix, f"{pipeline.app_id}-")
    local_kafka.grant(broker.bootstrap, f"User:{APP}", "topic", topics, TOPIC_OPERATIONS)
    groups = (pipeline.app_id,)
    local_kafka.grant(broker.bootstrap, f"User:{APP}", "group", groups, GROUP_OPERATIONS)


def as_account(broker: local_kafka.BrokerInfo, user: str) -> dict[str, str]:
    assert broker.sasl_bootstrap is not None
    return sasl_settings(broker.sasl_bootstrap, PASSWORD, user=user)


def test_given_an_authorizer_then_the_documented_acls_are_all_the_pipeline_needs(
    acl_broker: local_kafka.BrokerInfo, tmp_path: Path
) -> None:
    with running(new_pipeline(acl_broker.bootstrap, tmp_path)) as pipeline:
        grant_pipeline(acl_broker, pipeline)
        pipeline.settings.update(as_account(acl_broker, APP))
        run_sample_through(pipeline)
        for command in (("lag",), ("check-log",)):
            done = pipeline.uac(*command)
            assert done.returncode == 0, done.stderr

        events_topic = (pipeline.topics.events,)
        producer = f"User:{PRODUCER}"
        local_kafka.grant(
            acl_broker.bootstrap, producer, "topic", events_topic, ("Write", "Describe")
        )
        pipeline.settings.update(as_account(acl_broker, PRODUCER))
        again = pipeline.uac("publish", str(SAMPLE))
        assert again.returncode == 0, again.stderr

        pipeline.settings.update(as_account(acl_broker, NOBODY))
        for command in (("publish", str(SAMPLE)), ("alerts", "--json"), ("lag",)):
            refused = pipeline.uac(*command)
            assert refused.returncode == 3, (command, refused.stdout)
            assert "may not describe topic" in refused.stderr
            assert "Traceback" not in refused.stderr
