"""A throwaway certificate authority, the local broker's TLS keystore and a client certificate,
made for one test session (the broker's SASL_SSL listener, and its SSL listener that admits
clients by a certificate of the same authority; clients trust the CA through
UAC_KAFKA_SSL_CAFILE and present theirs through UAC_KAFKA_SSL_CERTFILE/KEYFILE)."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NamedTuple

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

VALID_FOR = timedelta(days=1)


CLIENT_COMMON_NAME = "uac-client"
"""The client certificate's CN: its Kafka principal is `User:CN=uac-client`."""


class SessionCertificates(NamedTuple):
    ca_file: Path
    """The authority's certificate."""
    keystore: Path
    """The broker's unencrypted key and its certificate for 127.0.0.1 and localhost."""
    client_certificate: Path
    client_key: Path


def broker_certificates(directory: Path) -> SessionCertificates:
    """The authority, the broker's keystore and a client's certificate and key (`uac-client`),
    the two certificates signed by the authority."""
    now = datetime.now(UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "uac test CA")])
    ca = (
        _certificate(ca_name, ca_name, ca_key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    broker_key = ec.generate_private_key(ec.SECP256R1())
    broker_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    broker = (
        _certificate(broker_name, ca_name, broker_key.public_key(), now)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_file, keystore = directory / "ca.pem", directory / "broker.pem"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    key = broker_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    keystore.write_bytes(key + broker.public_bytes(serialization.Encoding.PEM))
    keystore.chmod(0o600)
    client_key = ec.generate_private_key(ec.SECP256R1())
    client_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CLIENT_COMMON_NAME)])
    client = _certificate(client_name, ca_name, client_key.public_key(), now).sign(
        ca_key, hashes.SHA256()
    )
    certificate_file, key_file = directory / "client.pem", directory / "client-key.pem"
    certificate_file.write_bytes(client.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        client_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_file.chmod(0o600)
    return SessionCertificates(ca_file, keystore, certificate_file, key_file)


def _certificate(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePublicKey, now: datetime
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + VALID_FOR)
    )
