"""One real Apache Kafka broker for the whole test session (started and stopped here), with a
plaintext listener, a SASL_PLAINTEXT one, a SASL_SSL one and an SSL one that admits clients by
certificate (a certificate authority made for the session)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from streams import local_kafka
from tests.certificates import SessionCertificates, broker_certificates
from tests.integration.harness import SASL_PASSWORD, SASL_USER, Pipeline, new_pipeline, running


@pytest.fixture(scope="session")
def broker_ca(tmp_path_factory: pytest.TempPathFactory) -> SessionCertificates:
    """The session's certificate authority, the broker's keystore and a client certificate."""
    return broker_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session")
def broker(
    tmp_path_factory: pytest.TempPathFactory, broker_ca: SessionCertificates
) -> Iterator[local_kafka.BrokerInfo]:
    with local_kafka.running_broker(
        tmp_path_factory.mktemp("kafka"),
        sasl_users={SASL_USER: SASL_PASSWORD},
        keystore=broker_ca.keystore,
        client_ca=broker_ca.ca_file,
    ) as info:
        yield info


@pytest.fixture
def pipeline(broker: local_kafka.BrokerInfo, tmp_path: Path) -> Iterator[Pipeline]:
    with running(new_pipeline(broker.bootstrap, tmp_path)) as started:
        yield started
