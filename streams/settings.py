"""Configuration from environment variables (prefix `UAC_`). Defaults give the embedded setup:
a local Kafka started by `uac kafka start`, in-process ClickHouse (chDB) under `UAC_HOME`."""

from __future__ import annotations

from pathlib import Path
from typing import Final, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from projections.gate import DEFAULT_MAX_EVENT_BYTES
from streams.checkout import in_checkout
from streams.ports import bootstrap_port_problems, port_problem, url_port_problem

KAFKA_REQUEST_SECONDS: Final = 90.0
"""How long the worker's Kafka client waits for any answer of the broker (Faust's default,
passed to it explicitly): Faust refuses a consumer session longer than it."""
SHORTEST_SESSION_SECONDS: Final = 6.0
"""Kafka's default `group.min.session.timeout.ms`: a broker refuses a shorter session
(InvalidSessionTimeoutError), and a worker asking for one logs it once and never joins."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="UAC_", frozen=True)

    home: Path = Field(default=Path(".uac"), description="Where local state lives (Kafka, chDB).")
    kafka_bootstrap: str | None = Field(
        default=None, description="host:port of Kafka; unset = the local broker under UAC_HOME."
    )
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        default="PLAINTEXT",
        description="How every UaC Kafka client connects (SASL_SSL for most managed clusters).",
    )
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "PLAIN"
    kafka_sasl_username: str | None = None
    kafka_sasl_password: SecretStr | None = None
    kafka_ssl_cafile: Path | None = Field(
        default=None, description="CA bundle that signed the brokers' certificates (SSL)."
    )
    kafka_ssl_certfile: Path | None = Field(
        default=None,
        description="This client's certificate (PEM, with its chain), for brokers that "
        "authenticate clients by certificate (mutual TLS); needs UAC_KAFKA_SSL_KEYFILE.",
    )
    kafka_ssl_keyfile: Path | None = Field(
        default=None, description="The private key of UAC_KAFKA_SSL_CERTFILE (PEM)."
    )
    kafka_ssl_key_password: SecretStr | None = Field(
        default=None, description="The password of UAC_KAFKA_SSL_KEYFILE, if it is encrypted."
    )
    clickhouse_url: str | None = Field(
        default=None, description="http(s)://user:password@host:port of a ClickHouse server."
    )
    clickhouse_path: Path | None = Field(
        default=None, description="chDB data path when no URL is set (default UAC_HOME/chdb)."
    )
    schema_registry_url: str | None = Field(
        default=None,
        description="http(s)://[user:password@]host:port of a Confluent-compatible schema "
        "registry; unset = the committed manifest schemas/avro/registry.json.",
    )
    schema_registry_auto_register: bool = Field(
        default=True,
        description="Register this build's schemas when the registry does not hold them yet.",
    )
    tenants_file: Path = in_checkout("deploy/config/tenants.json")
    tenants_reload_seconds: float = Field(
        default=5.0,
        gt=0,
        description="How often a running worker reads the tenants file again; a changed file "
        "it can use is enforced from the next batch on (streams/tenants_watch.py).",
    )
    topic_prefix: str = "uac."
    topic_replication_factor: int | None = Field(
        default=None,
        ge=1,
        description="Copies of each partition of the topics UaC creates; unset = as many as "
        "the cluster has brokers, up to 3 (with 3 or more, min.insync.replicas=2). Existing "
        "topics with fewer copies stop a process at start when this is set.",
    )
    partitions: int = Field(default=4, ge=1)
    app_id: str = "uac"
    topic_wait_seconds: float = Field(
        default=30.0,
        ge=0,
        description="How long `uac publish` and `uac erase` wait for the events topic to be "
        "created by a starting pipeline before they give up (exit 3).",
    )
    batch_size: int = Field(default=500, ge=1)
    batch_seconds: float = Field(default=0.05, gt=0)
    checkpoint_seconds: float = Field(
        default=1.0,
        gt=0,
        description="How often changed subjects' checkpoints reach the state topic.",
    )
    clock_seconds: float = Field(
        default=30.0,
        gt=0,
        description="How often the worker's clock publishes a ClockAdvanced event for each "
        "subject whose next validity bound (a claim's valid_from or valid_until) has passed.",
    )
    sink_batch_rows: int = Field(default=10_000, ge=1)
    sink_batch_seconds: float = Field(default=1.0, gt=0)
    session_timeout_seconds: float = Field(
        default=10.0,
        description="How soon a dead worker's partitions move to another: from "
        "SHORTEST_SESSION_SECONDS to KAFKA_REQUEST_SECONDS.",
    )
    worker_metrics_port: int | None = Field(
        default=None,
        description="Serve the worker's /metrics and /health on this port (1-65535; port 0, "
        "any free port, would leave probes and scrapers nothing to find).",
    )
    worker_metrics_host: str = Field(
        default="127.0.0.1",
        description="The address the worker's /metrics and /health listen on (0.0.0.0 in a "
        "container whose probes and scraper come from outside it).",
    )
    stall_restart_seconds: float = Field(
        default=30.0,
        ge=5.0,
        description="Restart the worker in place when its partitions have unprocessed events "
        "and nothing moved for this long (see streams/liveness.py).",
    )
    require_sealed: bool = Field(
        default=True, description="Refuse personal events not sealed with their subject's key."
    )
    max_future_skew_seconds: int = 300
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    max_subject_history_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=1024,
        description="Most encoded event bytes one subject's history may hold; further events "
        "are quarantined as subject_history_full (a checkpoint is one bounded Kafka record).",
    )

    @field_validator("session_timeout_seconds")
    @classmethod
    def _session_within_requests(cls, seconds: float) -> float:
        if not SHORTEST_SESSION_SECONDS <= seconds <= KAFKA_REQUEST_SECONDS:
            raise ValueError(
                f"{seconds:g} is out of range: from {SHORTEST_SESSION_SECONDS:g} (the shortest "
                f"session Kafka brokers accept by default) to {KAFKA_REQUEST_SECONDS:g} seconds "
                "(the worker's Kafka request timeout, which a session may not outlast)"
            )
        return seconds

    @field_validator("worker_metrics_port")
    @classmethod
    def _a_port(cls, port: int | None) -> int | None:
        problem = None if port is None else port_problem(port)
        if problem is not None:
            raise ValueError(problem)
        return port

    @field_validator("kafka_bootstrap")
    @classmethod
    def _bootstrap_ports(cls, bootstrap: str | None) -> str | None:
        problems = [] if bootstrap is None else bootstrap_port_problems(bootstrap)
        if problems:
            raise ValueError("; ".join(problems))
        return bootstrap

    @field_validator("clickhouse_url", "schema_registry_url")
    @classmethod
    def _url_port(cls, url: str | None) -> str | None:
        problem = None if url is None else url_port_problem(url)
        if problem is not None:
            raise ValueError(problem)
        return url

    @model_validator(mode="after")
    def _sasl_needs_credentials(self) -> Settings:
        sasl = self.kafka_security_protocol.startswith("SASL")
        if sasl and not (self.kafka_sasl_username and self.kafka_sasl_password):
            raise ValueError(
                f"UAC_KAFKA_SECURITY_PROTOCOL={self.kafka_security_protocol} needs "
                "UAC_KAFKA_SASL_USERNAME and UAC_KAFKA_SASL_PASSWORD"
            )
        return self

    @model_validator(mode="after")
    def _client_certificate_whole(self) -> Settings:
        if (self.kafka_ssl_certfile is None) != (self.kafka_ssl_keyfile is None):
            raise ValueError("UAC_KAFKA_SSL_CERTFILE and UAC_KAFKA_SSL_KEYFILE go together")
        if self.kafka_ssl_certfile is not None and not self.kafka_security_protocol.endswith("SSL"):
            raise ValueError(
                "a client certificate (UAC_KAFKA_SSL_CERTFILE) is presented over TLS only: "
                "set UAC_KAFKA_SECURITY_PROTOCOL to SSL or SASL_SSL"
            )
        return self

    @property
    def sink_group(self) -> str:
        """The consumer group of the ClickHouse sink (the workers' group is `app_id`)."""
        return f"{self.app_id}-sink"

    @property
    def chdb_path(self) -> Path:
        return self.clickhouse_path or self.home / "chdb"

    @property
    def kafka_state_dir(self) -> Path:
        return self.home / "kafka"

    @property
    def keys_dir(self) -> Path:
        """The embedded per-subject key store (shared by the processes of one machine)."""
        return self.home / "keys"
