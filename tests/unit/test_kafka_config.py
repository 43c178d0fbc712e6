"""The local broker's configuration: with SASL users it also listens with SASL_PLAINTEXT, and a
restart reuses its earlier plaintext and controller ports."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from streams import kafka_config


def test_given_sasl_users_then_a_second_listener_with_their_accounts(tmp_path: Path) -> None:
    sasl = kafka_config.SecuredListeners(19003, {"uac": "pw-1", "other": "pw-2"})
    path = kafka_config.write_server_properties(tmp_path, 19001, 19002, sasl)
    properties = kafka_config.read_properties(path)
    assert properties["advertised.listeners"] == (
        "PLAINTEXT://127.0.0.1:19001,SASL_PLAINTEXT://127.0.0.1:19003"
    )
    assert "CONTROLLER://127.0.0.1:19002" in properties["listeners"]
    assert "SASL_PLAINTEXT:SASL_PLAINTEXT" in properties["listener.security.protocol.map"]
    jaas = properties["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert 'user_uac="pw-1" user_other="pw-2";' in jaas
    assert properties["sasl.enabled.mechanisms"] == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    for mechanism in ("scram-sha-256", "scram-sha-512"):
        scram = properties[f"listener.name.sasl_plaintext.{mechanism}.sasl.jaas.config"]
        assert "ScramLoginModule required;" in scram
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert kafka_config.configured_ports(tmp_path) == (19001, 19002)


def test_given_no_sasl_users_then_plaintext_only(tmp_path: Path) -> None:
    path = kafka_config.write_server_properties(tmp_path, 19001, 19002, None)
    properties = kafka_config.read_properties(path)
    assert properties["advertised.listeners"] == "PLAINTEXT://127.0.0.1:19001"
    assert "sasl.enabled.mechanisms" not in properties
    assert kafka_config.configured_ports(tmp_path) == (19001, 19002)


def test_given_a_password_that_would_break_the_jaas_line_then_it_is_refused() -> None:
    with pytest.raises(kafka_config.KafkaLauncherError, match="letters, digits"):
        kafka_config.SecuredListeners(19003, {"uac": 'pw"; evil'})


def test_given_sasl_users_then_the_storage_format_creates_their_scram_credentials() -> None:
    sasl = kafka_config.SecuredListeners(19003, {"uac": "pw-1"})
    assert sasl.scram_credentials() == [
        "--add-scram",
        "SCRAM-SHA-256=[name=uac,password=pw-1]",
        "--add-scram",
        "SCRAM-SHA-512=[name=uac,password=pw-1]",
    ]


def test_given_a_keystore_then_the_same_accounts_also_listen_over_tls(tmp_path: Path) -> None:
    keystore = tmp_path / "broker.pem"
    sasl = kafka_config.SecuredListeners(19003, {"uac": "pw-1"}, ssl_port=19004, keystore=keystore)
    path = kafka_config.write_server_properties(tmp_path, 19001, 19002, sasl)
    properties = kafka_config.read_properties(path)
    assert properties["advertised.listeners"] == (
        "PLAINTEXT://127.0.0.1:19001,SASL_PLAINTEXT://127.0.0.1:19003,SASL_SSL://127.0.0.1:19004"
    )
    assert "SASL_SSL:SASL_SSL" in properties["listener.security.protocol.map"]
    assert properties["listener.name.sasl_ssl.ssl.keystore.type"] == "PEM"
    assert properties["listener.name.sasl_ssl.ssl.keystore.location"] == str(keystore)
    assert 'user_uac="pw-1"' in properties["listener.name.sasl_ssl.plain.sasl.jaas.config"]
    assert "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config" in properties


def test_given_a_client_authority_then_a_listener_admits_clients_by_certificate_only(
    tmp_path: Path,
) -> None:
    keystore, client_ca = tmp_path / "broker.pem", tmp_path / "ca.pem"
    listeners = kafka_config.SecuredListeners(
        19003,
        {"uac": "pw-1"},
        ssl_port=19004,
        keystore=keystore,
        mtls_port=19005,
        client_ca=client_ca,
    )
    path = kafka_config.write_server_properties(tmp_path, 19001, 19002, listeners)
    properties = kafka_config.read_properties(path)
    assert properties["advertised.listeners"].endswith(",SSL://127.0.0.1:19005")
    assert "SSL:SSL" in properties["listener.security.protocol.map"].split(",")
    assert properties["listener.name.ssl.ssl.client.auth"] == "required"
    assert properties["listener.name.ssl.ssl.truststore.location"] == str(client_ca)
    assert properties["listener.name.ssl.ssl.keystore.location"] == str(keystore)
    assert "listener.name.ssl.plain.sasl.jaas.config" not in properties
    assert "listener.name.sasl_ssl.ssl.client.auth" not in properties


def test_given_super_users_then_requests_are_authorized_by_acls(tmp_path: Path) -> None:
    listeners = kafka_config.SecuredListeners(19003, {"uac": "pw-1"}, super_users=("User:admin",))
    properties = kafka_config.read_properties(
        kafka_config.write_server_properties(tmp_path, 19001, 19002, listeners)
    )
    assert properties["authorizer.class.name"] == kafka_config.AUTHORIZER
    assert properties["super.users"] == "User:ANONYMOUS;User:admin"
    plain = kafka_config.SecuredListeners(19003, {"uac": "pw-1"})
    properties = kafka_config.read_properties(
        kafka_config.write_server_properties(tmp_path, 19001, 19002, plain)
    )
    assert "authorizer.class.name" not in properties
