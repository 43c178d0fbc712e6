"""A throwaway certificate authority and the local broker's TLS keystore, made for one test
session (the broker's SASL_SSL listener; clients trust the CA through UAC_KAFKA_SSL_CAFILE)."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

VALID_FOR = timedelta(days=1)


def broker_certificates(directory: Path) -> tuple[Path, Path]:
    """`ca.pem` (the authority's certificate) and `broker.pem` (the broker's unencrypted key
    and its certificate for 127.0.0.1 and localhost, signed by the authority)."""
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
    return ca_file, keystore


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
