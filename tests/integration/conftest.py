"""One real Apache Kafka broker for the whole test session (started and stopped here), with a
plaintext listener, a SASL_PLAINTEXT one and a SASL_SSL one (a certificate authority made for
the session)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from streams import local_kafka
from tests.integration.certificates import broker_certificates
from tests.integration.harness import SASL_PASSWORD, SASL_USER, Pipeline, new_pipeline, running


@pytest.fixture(scope="session")
def broker_ca(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The session's certificate authority (`ca.pem`) and the broker's keystore."""
    return broker_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session")
def broker(
    tmp_path_factory: pytest.TempPathFactory, broker_ca: tuple[Path, Path]
) -> Iterator[local_kafka.BrokerInfo]:
    with local_kafka.running_broker(
        tmp_path_factory.mktemp("kafka"),
        sasl_users={SASL_USER: SASL_PASSWORD},
        keystore=broker_ca[1],
    ) as info:
        yield info


@pytest.fixture
def pipeline(broker: local_kafka.BrokerInfo, tmp_path: Path) -> Iterator[Pipeline]:
    with running(new_pipeline(broker.bootstrap, tmp_path)) as started:
        yield started
