"""The local broker's configuration: the layout of its state directory, its loopback ports,
and the `server.properties` a start writes (KRaft, one node acting as broker and controller,
settings fit for tests on a small machine; optional SASL, TLS and mutual-TLS listeners)."""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

KAFKA_VERSION = "3.9.1"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")

NODE_ID = 1
HOST = "127.0.0.1"


class KafkaLauncherError(RuntimeError):
    """The local Kafka broker could not be fetched, started or stopped."""


def server_properties_path(state_dir: Path) -> Path:
    return state_dir / "server.properties"


def record_path(state_dir: Path) -> Path:
    return state_dir / "broker.json"


def log_path(state_dir: Path) -> Path:
    return state_dir / "broker.log"


def data_dir(state_dir: Path) -> Path:
    return state_dir / "data"


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Java sets SO_REUSEADDR on its server sockets, so TIME_WAIT is no obstacle.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def _pick_free_ports() -> tuple[int, int]:
    """Two distinct free loopback ports (both held open while choosing)."""
    with (
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as first,
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as second,
    ):
        first.bind((HOST, 0))
        second.bind((HOST, 0))
        return int(first.getsockname()[1]), int(second.getsockname()[1])


def free_port_besides(*taken: int) -> int:
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((HOST, 0))
            port = int(probe.getsockname()[1])
        if port not in taken:
            return port


def read_properties(path: Path) -> dict[str, str]:
    properties: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return properties
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line or line.startswith(("#", "!")) or "=" not in line:
            continue
        key, _, value = line.partition("=")
        properties[key.strip()] = value.strip()
    return properties


def configured_ports(state_dir: Path) -> tuple[int, int] | None:
    """The (client, controller) ports of an earlier ``server.properties``, if any."""
    properties = read_properties(server_properties_path(state_dir))
    try:
        advertised = properties["advertised.listeners"].split(",")
        plaintext = next(item for item in advertised if item.startswith("PLAINTEXT://"))
        port = int(plaintext.rsplit(":", 1)[1])
        controller_port = int(properties["controller.quorum.voters"].rsplit(":", 1)[1])
    except (KeyError, IndexError, ValueError, StopIteration):
        return None
    return port, controller_port


def choose_ports(state_dir: Path) -> tuple[int, int]:
    previous = configured_ports(state_dir)
    if previous is not None and all(_port_is_free(port) for port in previous):
        return previous
    return _pick_free_ports()


AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@dataclass(frozen=True)
class SecuredListeners:
    """A SASL_PLAINTEXT listener with the PLAIN and SCRAM mechanisms: its port, and user ->
    password; with a `keystore` (a PEM file holding the broker's unencrypted private key and its
    certificate chain) the same accounts over TLS on `ssl_port` (SASL_SSL); with a `client_ca`
    as well (a PEM file of the authorities whose certificates identify clients) an SSL listener
    on `mtls_port` that admits only clients presenting such a certificate (mutual TLS, no SASL).
    PLAIN accounts live in the listeners' configuration (rewritten at each start); SCRAM
    credentials are written into the cluster metadata when the storage is formatted, so a
    broker keeps the SCRAM accounts of its first start."""

    port: int
    users: Mapping[str, str]
    ssl_port: int | None = None
    keystore: Path | None = None
    mtls_port: int | None = None
    client_ca: Path | None = None
    super_users: tuple[str, ...] | None = None
    """With principals here (`User:name`), the broker authorizes every request by ACLs
    (KRaft's StandardAuthorizer): these principals and the plaintext and controller listeners'
    anonymous one may do anything; every other account only what ACLs grant it."""

    def __post_init__(self) -> None:
        for word in (*self.users, *self.users.values()):
            if not word or not re.fullmatch(r"[A-Za-z0-9._-]+", word):
                raise KafkaLauncherError(
                    "SASL user names and passwords of the local broker are letters, digits, "
                    "'.', '_' or '-' (they are written into its JAAS configuration)"
                )

    @property
    def tls(self) -> bool:
        return self.ssl_port is not None and self.keystore is not None

    @property
    def mutual_tls(self) -> bool:
        return self.tls and self.mtls_port is not None and self.client_ca is not None

    def listeners(self) -> dict[str, int]:
        """Each listener's security protocol (also its name) and port."""
        found = {"SASL_PLAINTEXT": self.port}
        if self.tls and self.ssl_port is not None:
            found["SASL_SSL"] = self.ssl_port
        if self.mutual_tls and self.mtls_port is not None:
            found["SSL"] = self.mtls_port
        return found

    def settings(self) -> dict[str, str | int]:
        accounts = " ".join(f'user_{user}="{password}"' for user, password in self.users.items())
        settings: dict[str, str | int] = {
            "sasl.enabled.mechanisms": ",".join(("PLAIN", *SCRAM_MECHANISMS)),
        }
        for listener in ("sasl_plaintext", "sasl_ssl") if self.tls else ("sasl_plaintext",):
            settings[f"listener.name.{listener}.plain.sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {accounts};"
            )
            for mechanism in SCRAM_MECHANISMS:
                settings[f"listener.name.{listener}.{mechanism.lower()}.sasl.jaas.config"] = (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                )
        for listener in (name.lower() for name in self.listeners() if name.endswith("SSL")):
            settings[f"listener.name.{listener}.ssl.keystore.type"] = "PEM"
            settings[f"listener.name.{listener}.ssl.keystore.location"] = str(self.keystore)
        if self.super_users is not None:
            settings["authorizer.class.name"] = AUTHORIZER
            settings["super.users"] = ";".join(("User:ANONYMOUS", *self.super_users))
        if self.mutual_tls:
            settings["listener.name.ssl.ssl.client.auth"] = "required"
            settings["listener.name.ssl.ssl.truststore.type"] = "PEM"
            settings["listener.name.ssl.ssl.truststore.location"] = str(self.client_ca)
        return settings

    def scram_credentials(self) -> list[str]:
        """The storage tool's arguments that create each user's SCRAM credentials (on its
        command line, so other local users can read them while it runs: this broker's accounts
        are for tests on one machine, never for a shared host)."""
        return [
            argument
            for user, password in self.users.items()
            for mechanism in SCRAM_MECHANISMS
            for argument in ("--add-scram", f"{mechanism}=[name={user},password={password}]")
        ]


def _server_properties(
    state_dir: Path, port: int, controller_port: int, secured: SecuredListeners | None = None
) -> str:
    listeners = [f"PLAINTEXT://{HOST}:{port}"]
    protocols = ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
    if secured is not None:
        for protocol, listener_port in secured.listeners().items():
            listeners.append(f"{protocol}://{HOST}:{listener_port}")
            protocols.append(f"{protocol}:{protocol}")
    settings: dict[str, str | int] = {
        # KRaft, one process acting as broker and controller.
        "process.roles": "broker,controller",
        "node.id": NODE_ID,
        "controller.quorum.voters": f"{NODE_ID}@{HOST}:{controller_port}",
        "listeners": ",".join([*listeners, f"CONTROLLER://{HOST}:{controller_port}"]),
        "advertised.listeners": ",".join(listeners),
        "listener.security.protocol.map": ",".join(protocols),
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(data_dir(state_dir)),
        # Single node: every replication factor is 1.
        "num.partitions": 1,
        "default.replication.factor": 1,
        "min.insync.replicas": 1,
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 8,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "transaction.state.log.num.partitions": 4,
        # Topics are created explicitly (faust and tests use the admin API).
        "auto.create.topics.enable": "false",
        "delete.topic.enable": "true",
        "group.initial.rebalance.delay.ms": 0,
        # Small machine: fewer threads, smaller segments and cleaner buffer.
        "num.network.threads": 2,
        "num.io.threads": 4,
        "num.recovery.threads.per.data.dir": 1,
        "log.segment.bytes": 16 * 1024 * 1024,
        "log.cleaner.dedupe.buffer.size": 16 * 1024 * 1024,
        # Compaction reacts quickly; it still never removes a key's latest value.
        "log.cleaner.backoff.ms": 1000,
        # Local data is kept until deleted explicitly (topics may override).
        "log.retention.ms": -1,
    }
    if secured is not None:
        settings |= secured.settings()
    lines = [f"# Written by streams/kafka_config.py (Kafka {KAFKA_VERSION}); rewritten on start."]
    lines += [f"{key}={value}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def write_server_properties(
    state_dir: Path, port: int, controller_port: int, secured: SecuredListeners | None
) -> Path:
    path = server_properties_path(state_dir)
    write_atomically(path, _server_properties(state_dir, port, controller_port, secured))
    path.chmod(0o600)
    return path
