"""How every UaC Kafka client connects: PLAINTEXT (the local broker), SSL (with a client
certificate where the brokers ask for one), or SASL (PLAIN or SCRAM) over plaintext or TLS, from
the `UAC_KAFKA_*` settings.

The CLI picks the security of its process once at start-up (`use_kafka_security`), as it
picks the schema registry; every aiokafka client the process builds takes `kafka_options()`,
and the worker's Faust app takes `faust_credentials()` from the same settings.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faust
from aiokafka.helpers import create_ssl_context

from streams.settings import Settings


class KafkaSecurityError(ValueError):
    """TLS files of the settings that cannot be used (named, with why)."""


@dataclass(frozen=True)
class KafkaSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = None
    cafile: Path | None = None
    certfile: Path | None = None
    keyfile: Path | None = None
    key_password: str | None = None

    @classmethod
    def of(cls, settings: Settings) -> KafkaSecurity:
        password, key_password = settings.kafka_sasl_password, settings.kafka_ssl_key_password
        return cls(
            protocol=settings.kafka_security_protocol,
            mechanism=settings.kafka_sasl_mechanism,
            username=settings.kafka_sasl_username,
            password=None if password is None else password.get_secret_value(),
            cafile=settings.kafka_ssl_cafile,
            certfile=settings.kafka_ssl_certfile,
            keyfile=settings.kafka_ssl_keyfile,
            key_password=None if key_password is None else key_password.get_secret_value(),
        )

    def checked(self) -> KafkaSecurity:
        """This security, once its TLS files load (KafkaSecurityError otherwise), so that a
        missing or mismatched certificate or key stops a command at its start, in one line."""
        if self.tls:
            try:
                self._ssl_context()
            except (OSError, ssl.SSLError) as error:
                files = ", ".join(str(f) for f in (self.cafile, self.certfile, self.keyfile) if f)
                raise KafkaSecurityError(
                    f"the TLS files of UAC_KAFKA_SSL_* ({files or 'none set'}) cannot be used: "
                    f"{error}"
                ) from None
        return self

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for an aiokafka producer, consumer or admin client."""
        options: dict[str, Any] = {"security_protocol": self.protocol}
        if self.tls:
            options["ssl_context"] = self._ssl_context()
        if self.sasl:
            options |= {
                "sasl_mechanism": self.mechanism,
                "sasl_plain_username": self.username,
                "sasl_plain_password": self.password,
            }
        return options

    def faust_credentials(self) -> faust.SASLCredentials | faust.SSLCredentials | None:
        """The same, as Faust's `broker_credentials` (None for PLAINTEXT)."""
        if self.sasl:
            return faust.SASLCredentials(
                username=self.username,
                password=self.password,
                mechanism=self.mechanism,
                ssl_context=self._ssl_context() if self.tls else None,
            )
        return faust.SSLCredentials(self._ssl_context()) if self.tls else None

    def _ssl_context(self) -> Any:
        """Trusting `cafile` (or the system's authorities), presenting the client certificate
        when one is set."""
        return create_ssl_context(
            cafile=None if self.cafile is None else str(self.cafile),
            certfile=None if self.certfile is None else str(self.certfile),
            keyfile=None if self.keyfile is None else str(self.keyfile),
            password=self.key_password,
        )


_security = KafkaSecurity()


def use_kafka_security(security: KafkaSecurity) -> None:
    """Set how this process's Kafka clients connect (the CLI does, from the settings)."""
    global _security  # noqa: PLW0603 (one choice per process, made at start-up)
    _security = security


def kafka_options() -> dict[str, Any]:
    """The connection options of this process's Kafka clients."""
    return _security.client_options()
