"""How UaC's Kafka clients connect to a secured cluster (SSL, SASL PLAIN/SCRAM), and settings
that cannot work refused with one line before anything connects."""

from __future__ import annotations

import secrets
import ssl
from pathlib import Path

import faust
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from streams.cli_app import app
from streams.kafka_security import KafkaSecurity, KafkaSecurityError
from streams.settings import Settings
from tests.certificates import broker_certificates

PASSWORD = secrets.token_hex(8)


def test_given_the_defaults_then_plaintext_and_no_faust_credentials() -> None:
    security = KafkaSecurity.of(Settings())
    assert security.client_options() == {"security_protocol": "PLAINTEXT"}
    assert security.faust_credentials() is None


def test_given_sasl_over_tls_then_every_client_authenticates_and_verifies_the_broker() -> None:
    settings = Settings(
        kafka_security_protocol="SASL_SSL",
        kafka_sasl_mechanism="SCRAM-SHA-512",
        kafka_sasl_username="uac-worker",
        kafka_sasl_password=PASSWORD,
    )
    options = KafkaSecurity.of(settings).client_options()
    assert options["security_protocol"] == "SASL_SSL"
    assert options["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (options["sasl_plain_username"], options["sasl_plain_password"]) == (
        "uac-worker",
        PASSWORD,
    )
    assert isinstance(options["ssl_context"], ssl.SSLContext)
    assert options["ssl_context"].verify_mode is ssl.CERT_REQUIRED
    credentials = KafkaSecurity.of(settings).faust_credentials()
    assert isinstance(credentials, faust.SASLCredentials)
    assert credentials.mechanism.value == "SCRAM-SHA-512"
    assert credentials.ssl_context is not None


def test_given_sasl_over_plaintext_then_no_tls() -> None:
    settings = Settings(
        kafka_security_protocol="SASL_PLAINTEXT",
        kafka_sasl_username="uac",
        kafka_sasl_password=PASSWORD,
    )
    assert "ssl_context" not in KafkaSecurity.of(settings).client_options()
    credentials = KafkaSecurity.of(settings).faust_credentials()
    assert isinstance(credentials, faust.SASLCredentials)
    assert credentials.ssl_context is None


def test_given_tls_only_then_faust_gets_ssl_credentials() -> None:
    security = KafkaSecurity.of(Settings(kafka_security_protocol="SSL"))
    assert "sasl_mechanism" not in security.client_options()
    assert isinstance(security.faust_credentials(), faust.SSLCredentials)


def test_the_password_is_not_shown_with_the_settings() -> None:
    settings = Settings(
        kafka_security_protocol="SASL_SSL", kafka_sasl_username="u", kafka_sasl_password=PASSWORD
    )
    assert PASSWORD not in repr(settings)


@pytest.mark.parametrize("missing", ["kafka_sasl_username", "kafka_sasl_password"])
def test_given_sasl_without_a_credential_then_the_settings_are_refused(missing: str) -> None:
    given = {"kafka_sasl_username": "u", "kafka_sasl_password": "p"} | {missing: ""}
    with pytest.raises(ValidationError, match="needs UAC_KAFKA_SASL_USERNAME"):
        Settings(
            kafka_security_protocol="SASL_SSL",
            kafka_sasl_username=given["kafka_sasl_username"],
            kafka_sasl_password=given["kafka_sasl_password"],
        )


def test_given_invalid_settings_then_every_command_says_which_in_one_line(tmp_path: Path) -> None:
    env = {"UAC_HOME": str(tmp_path), "UAC_PARTITIONS": "0", "UAC_KAFKA_SECURITY_PROTOCOL": "TLS"}
    result = CliRunner().invoke(app, ["lag"], env=env)
    assert result.exit_code == 3
    assert "invalid setting UAC_PARTITIONS: Input should be greater than or equal to 1" in (
        result.stderr
    )
    assert "invalid setting UAC_KAFKA_SECURITY_PROTOCOL" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("given", "refusal"),
    [
        ({"kafka_ssl_certfile": "c.pem"}, "go together"),
        ({"kafka_ssl_keyfile": "k.pem"}, "go together"),
        (
            {
                "kafka_ssl_certfile": "c.pem",
                "kafka_ssl_keyfile": "k.pem",
                "kafka_security_protocol": "PLAINTEXT",
            },
            "over TLS only",
        ),
    ],
    ids=["a certificate without its key", "a key without its certificate", "not over TLS"],
)
def test_given_half_a_client_certificate_or_no_tls_then_the_settings_are_refused(
    given: dict[str, str], refusal: str
) -> None:
    with pytest.raises(ValidationError, match=refusal):
        Settings(**{"kafka_security_protocol": "SSL"} | given)  # type: ignore[arg-type]


def test_given_a_client_certificate_then_every_client_presents_it(tmp_path: Path) -> None:
    certificates = broker_certificates(tmp_path)
    settings = Settings(
        kafka_security_protocol="SSL",
        kafka_ssl_cafile=certificates.ca_file,
        kafka_ssl_certfile=certificates.client_certificate,
        kafka_ssl_keyfile=certificates.client_key,
    )
    security = KafkaSecurity.of(settings).checked()
    context = security.client_options()["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode is ssl.CERT_REQUIRED
    credentials = security.faust_credentials()
    assert isinstance(credentials, faust.SSLCredentials)


def test_given_client_certificate_files_that_do_not_load_then_every_command_stops_in_one_line(
    tmp_path: Path,
) -> None:
    certificates = broker_certificates(tmp_path)
    env = {
        "UAC_HOME": str(tmp_path),
        "UAC_KAFKA_SECURITY_PROTOCOL": "SSL",
        "UAC_KAFKA_SSL_CERTFILE": str(certificates.client_certificate),
        "UAC_KAFKA_SSL_KEYFILE": str(certificates.keystore.with_name("no-such-key.pem")),
    }
    result = CliRunner().invoke(app, ["lag"], env=env)
    assert result.exit_code == 3
    assert "invalid setting the TLS files of UAC_KAFKA_SSL_*" in result.stderr
    assert "cannot be used" in result.stderr
    with pytest.raises(KafkaSecurityError, match="cannot be used"):
        KafkaSecurity.of(
            Settings(
                kafka_security_protocol="SSL",
                kafka_ssl_certfile=certificates.client_certificate,
                kafka_ssl_keyfile=certificates.ca_file,
            )
        ).checked()
