"""A cluster that authorizes by ACLs (a broker of its own, with KRaft's StandardAuthorizer):
the ACLs docs/operator.md lists are all the whole pipeline needs (worker, sink, publish, alerts,
lag, check-log), granted to a SASL user or to a client certificate's distinguished name; a
producer needs only Write and Describe on the events topic; an account without ACLs, or without
its consumer group's, is refused in one line."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams import local_kafka
from streams.app import changelog_specs
from streams.topics import ensure_topics
from tests.certificates import CLIENT_COMMON_NAME, SessionCertificates
from tests.integration.harness import Pipeline, new_pipeline, running, sasl_settings, wait_for
from tests.integration.test_pipeline import SAMPLE, run_sample_through

pytestmark = pytest.mark.integration
APP, PRODUCER, NOBODY = "uac-app", "uac-producer", "uac-nobody"
GROUPLESS, CREATELESS, DESCRIBER = "uac-groupless", "uac-createless", "uac-describer"
READLESS = "uac-readless"
PASSWORD = secrets.token_hex(16)
TOPIC_OPERATIONS = ("Read", "Write", "Describe", "Create", "DescribeConfigs")
GROUP_OPERATIONS = ("Read", "Describe")


@pytest.fixture(scope="module")
def acl_broker(
    tmp_path_factory: pytest.TempPathFactory, broker_ca: SessionCertificates
) -> Iterator[local_kafka.BrokerInfo]:
    with local_kafka.running_broker(
        tmp_path_factory.mktemp("kafka-acl"),
        sasl_users=dict.fromkeys(
            (APP, PRODUCER, NOBODY, GROUPLESS, CREATELESS, DESCRIBER, READLESS), PASSWORD
        ),
        keystore=broker_ca.keystore,
        client_ca=broker_ca.ca_file,
        super_users=(),
    ) as info:
        yield info


def grant_pipeline(
    broker: local_kafka.BrokerInfo,
    pipeline: Pipeline,
    principal: str = f"User:{APP}",
    topic_operations: tuple[str, ...] = TOPIC_OPERATIONS,
    group_operations: tuple[str, ...] = GROUP_OPERATIONS,
) -> None:
    """docs/operator.md's ACLs for the account every UaC process of a deployment uses (or the
    operations given instead)."""
    topics = (pipeline.prefix, f"{pipeline.app_id}-")
    local_kafka.grant(broker.bootstrap, principal, "topic", topics, topic_operations)
    if group_operations:
        groups = (pipeline.app_id,)
        local_kafka.grant(broker.bootstrap, principal, "group", groups, group_operations)


def refused_at_start(
    broker: local_kafka.BrokerInfo, pipeline: Pipeline, process: str, account: str
) -> tuple[int | None, str]:
    """Start `process` as `account`; its exit code once it stopped, and its log."""
    pipeline.settings.update(as_account(broker, account))
    service = pipeline.start(process)
    stopped = wait_for(
        service.process.poll,
        lambda code: code is not None,
        timeout=120,
        what=f"the {process} stopping",
    )
    return stopped, service.log.read_text(encoding="utf-8")


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
        for refused_command in (
            ("publish", str(SAMPLE)),
            ("alerts", "--tenant", "clinic-a", "--json"),
            ("lag",),
        ):
            refused = pipeline.uac(*refused_command)
            assert refused.returncode == 3, (refused_command, refused.stdout)
            assert "may not describe topic" in refused.stderr
            assert "Traceback" not in refused.stderr


def test_given_clients_known_by_certificate_then_the_acls_name_its_distinguished_name(
    acl_broker: local_kafka.BrokerInfo, broker_ca: SessionCertificates, tmp_path: Path
) -> None:
    """Over mutual TLS the account is the client certificate's distinguished name: the same
    ACLs, granted to `User:CN=uac-client`, are all the pipeline needs."""
    assert acl_broker.ssl_bootstrap is not None
    with running(new_pipeline(acl_broker.bootstrap, tmp_path)) as pipeline:
        grant_pipeline(acl_broker, pipeline, principal=f"User:CN={CLIENT_COMMON_NAME}")
        pipeline.settings.update(
            {
                "UAC_KAFKA_BOOTSTRAP": acl_broker.ssl_bootstrap,
                "UAC_KAFKA_SECURITY_PROTOCOL": "SSL",
                "UAC_KAFKA_SSL_CAFILE": str(broker_ca.ca_file),
                "UAC_KAFKA_SSL_CERTFILE": str(broker_ca.client_certificate),
                "UAC_KAFKA_SSL_KEYFILE": str(broker_ca.client_key),
            }
        )
        run_sample_through(pipeline)


def test_given_an_account_without_create_then_the_pipeline_runs_once_the_topics_exist(
    acl_broker: local_kafka.BrokerInfo, tmp_path: Path
) -> None:
    """Where only an administrator creates topics: a worker whose account may not create them
    names the missing topics with what each needs (exit 3); once they exist, the same account
    runs the whole pipeline (the worker's Faust app declares no topic of its own)."""
    with running(new_pipeline(acl_broker.bootstrap, tmp_path)) as pipeline:
        without_create = tuple(op for op in TOPIC_OPERATIONS if op != "Create")
        grant_pipeline(acl_broker, pipeline, f"User:{CREATELESS}", without_create)
        pipeline.settings.update(as_account(acl_broker, CREATELESS))
        refused = pipeline.uac("worker", timeout=120)
        assert refused.returncode == 3, refused.stdout + refused.stderr
        changelog = f"{pipeline.app_id}-user-state-changelog"
        for needed in (f"{pipeline.topics.events} (4 partitions; ", f"{changelog} (4 partitions"):
            assert needed in refused.stderr
        assert "TopicAuthorizationFailedError" in refused.stderr
        assert "Traceback" not in refused.stderr

        specs = pipeline.topics.specs() + changelog_specs(pipeline.app_id, pipeline.partitions)
        asyncio.run(ensure_topics(acl_broker.bootstrap, specs))
        run_sample_through(pipeline)


@pytest.mark.parametrize("process", ["worker", "sink"])
@pytest.mark.parametrize(
    ("account", "group_operations"),
    [
        pytest.param(GROUPLESS, (), id="no group ACL"),
        pytest.param(DESCRIBER, ("Describe",), id="Describe without Read"),
    ],
)
def test_given_no_read_on_the_consumer_group_then_the_process_stops_and_names_it(
    acl_broker: local_kafka.BrokerInfo,
    tmp_path: Path,
    process: str,
    account: str,
    group_operations: tuple[str, ...],
) -> None:
    """An account that may use the topics but not read as the process's consumer group (no
    ACL on it, or Describe alone, as a monitoring grant on every group gives): the worker or
    the sink stops with one line naming the group (exit 3), instead of running without
    consuming."""
    with running(new_pipeline(acl_broker.bootstrap, tmp_path)) as pipeline:
        grant_pipeline(acl_broker, pipeline, f"User:{account}", group_operations=group_operations)
        stopped, log = refused_at_start(acl_broker, pipeline, process, account)
        group = pipeline.app_id if process == "worker" else f"{pipeline.app_id}-sink"
        assert stopped == 3, log
        assert f"consumer group '{group}'" in log, log
        assert "Traceback" not in log


@pytest.mark.parametrize("process", ["worker", "sink"])
def test_given_no_read_on_the_topics_then_the_process_stops_and_names_them(
    acl_broker: local_kafka.BrokerInfo, tmp_path: Path, process: str
) -> None:
    """An account that may describe and write the topics but not read them (a producer's
    account reused for a worker): the worker or the sink stops at start with one line naming a
    topic it may not read (exit 3), instead of a crash inside the consumer."""
    with running(new_pipeline(acl_broker.bootstrap, tmp_path)) as pipeline:
        without_read = tuple(op for op in TOPIC_OPERATIONS if op != "Read")
        grant_pipeline(acl_broker, pipeline, f"User:{READLESS}", without_read)
        stopped, log = refused_at_start(acl_broker, pipeline, process, READLESS)
        assert stopped == 3, log
        (refusal,) = [line for line in log.splitlines() if line.startswith("failed: ")]
        assert "may not read topic" in refusal, log
        assert pipeline.prefix.rstrip(".") in refusal
        assert "grant it Read on the topic" in refusal
        assert "Traceback" not in log
