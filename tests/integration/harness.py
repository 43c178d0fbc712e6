"""Running the real pipeline in tests: `uac` worker/sink processes against the session's broker,
each test with its own topic prefix, app id and home so tests never see each other's data."""

from __future__ import annotations

import asyncio
import itertools
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path
from typing import Any, TypeVar

from schemas.alerts import Alert
from schemas.codec import alert_codec, decision_codec, event_codec
from schemas.decisions import GateDecision
from schemas.events import Event
from streams.keys import FileKeyStore
from streams.publisher import EventPublisher
from streams.query_clients import SinkUnavailable, query_via_sink
from streams.sealing import Sealer, readable
from streams.topic_reader import read_topic
from streams.topics import Topics

T = TypeVar("T")
_names = itertools.count()

SASL_USER = "uac-pipeline"
SASL_PASSWORD = secrets.token_hex(16)
"""The account of the session broker's SASL_PLAINTEXT listener (a new password each session)."""


def sasl_settings(
    bootstrap: str,
    password: str = SASL_PASSWORD,
    mechanism: str = "PLAIN",
    ca_file: Path | None = None,
    user: str = SASL_USER,
) -> dict[str, str]:
    """The settings that make a `uac` process connect through a SASL listener as `user`:
    SASL_PLAINTEXT, or SASL_SSL trusting the certificate authority `ca_file`."""
    tls = {} if ca_file is None else {"UAC_KAFKA_SSL_CAFILE": str(ca_file)}
    return tls | {
        "UAC_KAFKA_BOOTSTRAP": bootstrap,
        "UAC_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT" if ca_file is None else "SASL_SSL",
        "UAC_KAFKA_SASL_MECHANISM": mechanism,
        "UAC_KAFKA_SASL_USERNAME": user,
        "UAC_KAFKA_SASL_PASSWORD": password,
    }


@dataclass
class Service:
    """A `uac` subprocess this test started; stopped by its PID only."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return self.process.returncode

    def log_tail(self, lines: int = 40) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class Pipeline:
    bootstrap: str
    home: Path
    prefix: str
    app_id: str
    partitions: int = 4
    services: list[Service] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)
    """More UAC_* settings for every process this pipeline starts."""

    @property
    def topics(self) -> Topics:
        return Topics(self.prefix, self.partitions)

    @property
    def env(self) -> dict[str, str]:
        return (
            os.environ
            | {
                "UAC_HOME": str(self.home),
                "UAC_KAFKA_BOOTSTRAP": self.bootstrap,
                "UAC_TOPIC_PREFIX": self.prefix,
                "UAC_APP_ID": self.app_id,
                "UAC_PARTITIONS": str(self.partitions),
                "UAC_BATCH_SECONDS": "0.05",
                "UAC_SINK_BATCH_SECONDS": "0.2",
            }
            | self.settings
        )

    def start(self, *command: str, env: dict[str, str] | None = None) -> Service:
        log = self.home / f"{command[0]}-{len(self.services)}.log"
        self.home.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as output:
            process = subprocess.Popen(
                [sys.executable, "-m", "streams.cli", *command],
                env=self.env | (env or {}),
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        service = Service(command[0], process, log)
        self.services.append(service)
        return service

    def uac(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "streams.cli", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def stop_all(self) -> None:
        for service in reversed(self.services):
            service.stop()

    @property
    def sealer(self) -> Sealer:
        """The key store the pipeline's processes share (UAC_HOME/keys)."""
        return Sealer(FileKeyStore(self.home / "keys"))

    def publish(self, events: list[Event]) -> None:
        """Publish as a producer using the UaC publisher does: validated and sealed."""

        async def send() -> None:
            async with EventPublisher(self.bootstrap, self.topics.events, self.sealer) as publisher:
                for event in events:
                    await publisher.publish(event)

        asyncio.run(send())

    def publish_raw(self, messages: list[tuple[bytes | None, bytes]]) -> None:
        async def send() -> None:
            async with EventPublisher(self.bootstrap, self.topics.events, None) as publisher:
                for key, value in messages:
                    await publisher.send_raw(key, value)

        asyncio.run(send())

    def read(self, topic: str) -> list[Any]:
        return asyncio.run(read_topic(self.bootstrap, topic))

    def opened(self, topic: str) -> list[bytes]:
        """The framed records of `topic` this pipeline can still read (erased subjects: none)."""
        sealer = self.sealer
        return [framed for record in self.read(topic) if (framed := readable(sealer, record.value))]

    def accepted(self) -> list[Event]:
        codec = event_codec()
        return [codec.decode(framed) for framed in self.opened(self.topics.accepted)]

    def quarantined(self) -> list[GateDecision]:
        codec = decision_codec()
        return [codec.decode(r.value) for r in self.read(self.topics.quarantine)]

    def clickhouse(self, sql: str, tenant: str, purpose: str = "care") -> list[list[Any]]:
        """Rows of an analyst query, through the running sink (0 rows while it starts)."""
        try:
            return query_via_sink(self.home, sql, tenant, purpose).rows
        except SinkUnavailable:
            return []

    def alerts(self) -> list[Alert]:
        codec = alert_codec()
        return [codec.decode(framed) for framed in self.opened(self.topics.alerts)]


def new_pipeline(bootstrap: str, root: Path) -> Pipeline:
    number = next(_names)
    name = f"t{os.getpid()}x{number}"
    return Pipeline(bootstrap=bootstrap, home=root / name, prefix=f"{name}.", app_id=f"uac-{name}")


@contextmanager
def running(pipeline: Pipeline) -> Iterator[Pipeline]:
    """Stops every service afterwards and prints their log tails (pytest shows them on failure)."""
    try:
        yield pipeline
    finally:
        pipeline.stop_all()
        for service in pipeline.services:
            print(
                f"--- {service.name} (exit {service.process.returncode}) ---\n{service.log_tail()}"
            )


def replace_tenants_file(worker: Service, path: Path, content: bytes) -> None:
    """The tenants file replaced whole (renamed into place, as a config map or a deploy tool
    does), and the running worker enforcing it."""
    staged = path.with_suffix(".staged")
    staged.write_bytes(content)
    staged.replace(path)
    wait_for(
        lambda: worker.log.read_text(encoding="utf-8"),
        lambda log: f"enforcing sha256 {sha256(content).hexdigest()}" in log,
        what="the running worker enforcing the new tenants file",
    )


def wait_for(
    probe: Callable[[], T], done: Callable[[T], bool], timeout: float = 90.0, what: str = ""
) -> T:
    """Poll `probe` until `done(result)`; fail with the last result after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    result = probe()
    while not done(result):
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out waiting for {what or 'condition'}; last: {result!r}"[:2000]
            )
        time.sleep(0.5)
        result = probe()
    return result
