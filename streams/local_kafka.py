"""Run a local single-node Apache Kafka broker without Docker.

The broker is the official Apache Kafka distribution, fetched as jars from
Maven Central with ``deploy/local/kafka/pom.xml`` and started with the
system ``java`` as one KRaft process acting as both broker and controller,
listening only on 127.0.0.1.

Why Kafka 3.9.1 and not 4.x: Kafka 4.0 removed old protocol API versions
(KIP-896), but the Metadata v0-v3 versions that aiokafka still used were put
back before the 4.0 release (KAFKA-18648, apache/kafka#18716) and aiokafka
0.14 with faust-streaming 0.15.3 also worked against a 4.0.0 broker in a
quick check, so 3.9.1 (from 3.9, the final 3.x line; configured with log4j 1.x
properties, and the version this launcher is tested with) is a conservative
pin rather than a protocol requirement.

Layout of a state directory (default ``$UAC_HOME/kafka``)::

    server.properties   written by :func:`start` on every start
    data/               KRaft metadata log and topic data (``log.dirs``)
    broker.log          the JVM's stdout and stderr, appended to
    broker.json         pid, ports and start time of the running broker
    .lock               serialises start/stop of this state directory

Ports: the first start picks two free loopback ports (client and
controller). Later starts reuse the ports written in ``server.properties``
when both are still free, so clients keep their bootstrap address. If one is
taken, new ports are picked and the existing data is kept: with a static
quorum (``controller.quorum.voters``) the KRaft storage records only the
voter's node id, not its address, so the storage stays valid when the
ports change.

Only the PID recorded in ``broker.json`` is ever signalled, and only after
``/proc/<pid>/cmdline`` shows a java ``kafka.Kafka`` process using this state
directory's ``server.properties``.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Literal

from streams.kafka_config import (
    HOST,
    KAFKA_VERSION,
    NODE_ID,
    KafkaLauncherError,
    SecuredListeners,
    choose_ports,
    data_dir,
    free_port_besides,
    log_path,
    record_path,
    server_properties_path,
    write_atomically,
    write_server_properties,
)
from streams.kafka_jars import (
    POM_PATH,
    default_cache_dir,
    ensure_jars,
    exclusive_lock,
    require_executable,
    run_tool,
    tail,
)

LOG4J_PATH = POM_PATH.with_name("log4j.properties")

# Modest heap; SerialGC and C1-only JIT start faster and use fewer threads on
# small (2-core) machines, which matters more here than peak throughput.
JVM_OPTIONS: tuple[str, ...] = (
    "-Xms256m",
    "-Xmx768m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
)

FORMAT_TIMEOUT_S = 120.0
PROBE_TIMEOUT_S = 5.0
POLL_INTERVAL_S = 0.25
KILL_WAIT_S = 10.0
REAP_WAIT_S = 5.0
"""How long `stop` waits, once the broker has exited, for its PID to be collected by the
process's parent (the system, for a broker a `uac kafka start` launched)."""


# Brokers launched by this Python process, kept so that stop() can reap them
# (and Popen does not warn that they are "still running" when collected).
_STARTED_HERE: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class BrokerInfo:
    """A running local broker, as recorded in ``broker.json``."""

    pid: int
    port: int
    controller_port: int
    bootstrap: str
    state_dir: Path
    log_file: Path
    sasl_bootstrap: str | None = None
    """A SASL_PLAINTEXT listener (mechanisms PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512) for the
    `sasl_users` the broker was started with, when it was."""
    sasl_ssl_bootstrap: str | None = None
    """The same accounts over TLS (SASL_SSL), when the broker was also given a keystore."""
    ssl_bootstrap: str | None = None
    """A mutual-TLS listener (SSL: clients present a certificate signed by the `client_ca` the
    broker was started with), when it was."""


# --------------------------------------------------------------------------
# Default locations and the broker log
# --------------------------------------------------------------------------


def default_state_dir() -> Path:
    """The CLI's broker state directory: ``$UAC_HOME/kafka`` (``./.uac/kafka``)."""
    return Path(os.environ.get("UAC_HOME", ".uac")).expanduser() / "kafka"


def _read_log_tail(log_file: Path, offset: int = 0) -> str:
    try:
        with log_file.open("rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except OSError:
        return "(no broker log)"
    return tail(data.decode("utf-8", errors="replace")) or "(broker log is empty)"


# --------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------


def _read_cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", errors="replace") for part in raw.split(b"\0") if part]


def _is_our_broker(pid: int, state_dir: Path) -> bool:
    """True if ``pid`` is a live java ``kafka.Kafka`` using this state dir's properties.

    Zombies have an empty cmdline, so an exited but unreaped broker is not ours.
    """
    argv = _read_cmdline(pid)
    if not argv or Path(argv[0]).name != "java":
        return False
    properties = str(server_properties_path(state_dir))
    return "kafka.Kafka" in argv and properties in argv


def _reap_if_child(pid: int, timeout: float = 2.0) -> None:
    """Collect the exit status of an exiting broker started by this process.

    Only matters when one process both starts and stops the broker (tests):
    the child would otherwise linger as a zombie. Other PIDs: no-op.
    """
    process = _STARTED_HERE.pop(pid, None)
    if process is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout)


class ProcessState(StrEnum):
    """What is left of a broker process `stop` signalled."""

    RUNNING = "running"
    EXITED = "exited"
    """Every thread has exited; the PID stays until the process's parent collects it."""
    GONE = "gone"
    """No such process, or the PID now names a process started at another time."""


def _start_time(pid: int) -> str | None:
    """When process `pid` started (clock ticks after boot, `/proc/<pid>/stat`), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def _process_state(pid: int, started: str) -> ProcessState:
    """Whether process `pid`, started at `started`, still runs a thread: the JVM's main thread
    exits first, and its other threads go on closing files and sockets (the broker's port
    too) for a moment."""
    if _start_time(pid) != started:
        return ProcessState.GONE
    for task in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            thread_state = task.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if thread_state.rpartition(")")[2].split()[0] not in ("Z", "X"):
            return ProcessState.RUNNING
    return ProcessState.GONE if _start_time(pid) != started else ProcessState.EXITED


def _wait_until_exited(pid: int, started: str, timeout: float) -> bool:
    """Wait up to `timeout` until no thread of the process runs (False if one still does);
    then up to REAP_WAIT_S for its PID to go, collected by its parent (this process when it
    started the broker: reaped here; else the system), so that no listing shows it once the
    broker is reported stopped."""
    deadline = time.monotonic() + timeout
    while _process_state(pid, started) is ProcessState.RUNNING:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    _reap_if_child(pid)
    collected_by = time.monotonic() + REAP_WAIT_S
    while _process_state(pid, started) is ProcessState.EXITED:
        if time.monotonic() >= collected_by:
            break
        time.sleep(0.1)
    return True


def _terminate(pid: int, timeout: float) -> None:
    """SIGTERM the broker and wait until it has exited; SIGKILL it if a thread of it still
    runs after ``timeout``. The process is pinned by its start time, so a PID the system has
    since given to another process is never signalled."""
    started = _start_time(pid)
    if started is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if _wait_until_exited(pid, started, timeout):
        return
    if _process_state(pid, started) is ProcessState.RUNNING:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if not _wait_until_exited(pid, started, KILL_WAIT_S):
        raise KafkaLauncherError(f"Kafka broker pid {pid} survived SIGKILL")


# --------------------------------------------------------------------------
# broker.json
# --------------------------------------------------------------------------


def _read_record(state_dir: Path) -> BrokerInfo | None:
    try:
        data = json.loads(record_path(state_dir).read_text(encoding="utf-8"))
        return BrokerInfo(
            pid=int(data["pid"]),
            port=int(data["port"]),
            controller_port=int(data["controller_port"]),
            bootstrap=str(data["bootstrap"]),
            state_dir=state_dir,
            log_file=log_path(state_dir),
            sasl_bootstrap=data.get("sasl_bootstrap"),
            sasl_ssl_bootstrap=data.get("sasl_ssl_bootstrap"),
            ssl_bootstrap=data.get("ssl_bootstrap"),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_record(info: BrokerInfo) -> None:
    record = {
        "pid": info.pid,
        "port": info.port,
        "controller_port": info.controller_port,
        "bootstrap": info.bootstrap,
        "sasl_bootstrap": info.sasl_bootstrap,
        "sasl_ssl_bootstrap": info.sasl_ssl_bootstrap,
        "ssl_bootstrap": info.ssl_bootstrap,
        "kafka_version": KAFKA_VERSION,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "server_properties": str(server_properties_path(info.state_dir)),
    }
    write_atomically(record_path(info.state_dir), json.dumps(record, indent=2) + "\n")


def _remove_record(state_dir: Path) -> None:
    record_path(state_dir).unlink(missing_ok=True)


# --------------------------------------------------------------------------
# Java commands
# --------------------------------------------------------------------------


def _java_command(libs_dir: Path, main_class: str, *args: str) -> list[str]:
    java = require_executable("java", "to run the Kafka broker (install JDK 17+)")
    return [
        java,
        *JVM_OPTIONS,
        f"-Dlog4j.configuration={LOG4J_PATH.as_uri()}",
        "-cp",
        str(libs_dir / "*"),
        main_class,
        *args,
    ]


def _random_cluster_id() -> str:
    """A Kafka ``Uuid`` string: URL-safe base64 of 16 random bytes, no padding."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _is_formatted(state_dir: Path) -> bool:
    return (data_dir(state_dir) / "meta.properties").is_file()


def _run_java_tool(libs_dir: Path, what: str, main_class: str, *args: str) -> None:
    """Run one of Kafka's command-line tools to its end; KafkaLauncherError, naming `what` it
    was doing, when it fails or takes longer than FORMAT_TIMEOUT_S."""
    run_tool(_java_command(libs_dir, main_class, *args), what, FORMAT_TIMEOUT_S)


def _format_storage(libs_dir: Path, properties: Path, extra: list[str]) -> None:
    _run_java_tool(
        libs_dir,
        "formatting KRaft storage",
        "kafka.tools.StorageTool",
        "format",
        "--ignore-formatted",
        "-t",
        _random_cluster_id(),
        "-c",
        str(properties),
        *extra,
    )


def _launch_broker(libs_dir: Path, properties: Path, log_file: Path) -> subprocess.Popen[bytes]:
    command = _java_command(libs_dir, "kafka.Kafka", str(properties))
    with log_file.open("ab") as log:
        log.write(f"\n==== {datetime.now(UTC).isoformat()} starting Kafka broker\n".encode())
        log.flush()
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=properties.parent,
            start_new_session=True,
        )


def grant(
    bootstrap: str,
    principal: str,
    resource: Literal["topic", "group"],
    prefixes: Sequence[str],
    operations: Sequence[str],
    cache_dir: Path | None = None,
) -> None:
    """Allow `principal` (`User:name`) the `operations` (Kafka's names: Read, Write, Describe,
    Create, DescribeConfigs, ...) on every topic or group whose name starts with one of
    `prefixes`, on a broker started with `super_users` (through its plaintext listener, whose
    anonymous principal may do it)."""
    _run_java_tool(
        ensure_jars(cache_dir if cache_dir is not None else default_cache_dir()),
        "granting ACLs",
        "kafka.admin.AclCommand",
        "--bootstrap-server",
        bootstrap,
        "--add",
        "--allow-principal",
        principal,
        "--resource-pattern-type",
        "prefixed",
        *(argument for operation in operations for argument in ("--operation", operation)),
        *(argument for prefix in prefixes for argument in (f"--{resource}", prefix)),
    )


# --------------------------------------------------------------------------
# Readiness
# --------------------------------------------------------------------------


def _port_accepts(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1.0):
            return True
    except OSError:
        return False


READINESS_GROUP = "uac-local-kafka-readiness"
"""Describing a consumer group needs the group coordinator, whose __consumer_offsets topic a
fresh broker creates on first use: a broker is ready only once groups can work."""


async def _broker_ids(bootstrap: str) -> list[int]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap,
        client_id="uac-local-kafka-probe",
        request_timeout_ms=int(PROBE_TIMEOUT_S * 1000),
    )
    try:
        await admin.start()
        cluster = await admin.describe_cluster()
        await admin.describe_consumer_groups([READINESS_GROUP])
    finally:
        await admin.close()
    return [int(broker["node_id"]) for broker in cluster["brokers"]]


def _answers_metadata(bootstrap: str) -> bool:
    """True if the broker answers a Metadata request listing itself.

    Runs the aiokafka client on its own event loop in a worker thread, so
    this works whether or not the caller already runs an event loop.
    """
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(asyncio.run, _broker_ids(bootstrap))
        try:
            return NODE_ID in future.result(timeout=PROBE_TIMEOUT_S * 3)
        except Exception:  # noqa: BLE001 (any failure just means "not ready yet")
            return False


def _is_ready(port: int, bootstrap: str) -> bool:
    return _port_accepts(port) and _answers_metadata(bootstrap)


def _wait_ready(
    process: subprocess.Popen[bytes], info: BrokerInfo, timeout: float, log_offset: int
) -> None:
    """Wait for the broker just launched to answer.

    Raises with the log tail if the process exits or does not answer in time.
    Liveness comes from ``process.poll()``: right after ``exec`` the child's
    ``/proc/<pid>/cmdline`` can briefly be empty.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise KafkaLauncherError(
                f"Kafka broker pid {info.pid} exited with status {process.returncode} "
                f"during start-up; tail of {info.log_file}:\n"
                f"{_read_log_tail(info.log_file, log_offset)}"
            )
        if _is_ready(info.port, info.bootstrap):
            return
        time.sleep(POLL_INTERVAL_S)
    raise KafkaLauncherError(
        f"Kafka broker pid {info.pid} did not answer on {info.bootstrap} within "
        f"{timeout:.0f}s; tail of {info.log_file}:\n"
        f"{_read_log_tail(info.log_file, log_offset)}"
    )


# --------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------


def status(state_dir: Path) -> BrokerInfo | None:
    """The broker recorded in ``state_dir``, if its process is still running.

    Checks the process (PID and cmdline), not the network; read-only.
    """
    found = recorded(state_dir)
    return found[0] if found is not None and found[1] else None


def recorded(state_dir: Path) -> tuple[BrokerInfo, bool] | None:
    """The broker ``broker.json`` records and whether its process still runs (a record whose
    broker was killed, or whose machine restarted, is stale: :func:`start` replaces it and
    :func:`stop` removes it); None when there is no record. Read-only."""
    state_dir = state_dir.resolve()
    info = _read_record(state_dir)
    return None if info is None else (info, _is_our_broker(info.pid, state_dir))


def _existing_broker(state_dir: Path, timeout: float) -> BrokerInfo | None:
    """The recorded broker if it is alive (waiting for it to answer); clears a stale record."""
    info = _read_record(state_dir)
    if info is None:
        return None
    if not _is_our_broker(info.pid, state_dir):
        _reap_if_child(info.pid)
        _remove_record(state_dir)
        return None
    deadline = time.monotonic() + timeout
    while not _is_ready(info.port, info.bootstrap):
        if not _is_our_broker(info.pid, state_dir) or time.monotonic() >= deadline:
            raise KafkaLauncherError(
                f"Kafka broker pid {info.pid} is recorded in {state_dir} but does not "
                f"answer on {info.bootstrap}; stop it and start again. Tail of "
                f"{info.log_file}:\n{_read_log_tail(info.log_file)}"
            )
        time.sleep(POLL_INTERVAL_S)
    return info


def _start_new_broker(
    state_dir: Path,
    libs_dir: Path,
    timeout: float,
    sasl_users: Mapping[str, str] | None,
    keystore: Path | None,
    client_ca: Path | None,
    super_users: tuple[str, ...] | None,
) -> BrokerInfo:
    port, controller_port = choose_ports(state_dir)
    secured = None
    if sasl_users:
        sasl_port = free_port_besides(port, controller_port)
        ssl_port = None if keystore is None else free_port_besides(port, controller_port, sasl_port)
        mtls_port = (
            None
            if ssl_port is None or client_ca is None
            else free_port_besides(port, controller_port, sasl_port, ssl_port)
        )
        secured = SecuredListeners(
            sasl_port, sasl_users, ssl_port, keystore, mtls_port, client_ca, super_users
        )
    properties = write_server_properties(state_dir, port, controller_port, secured)
    if not _is_formatted(state_dir):
        _format_storage(
            libs_dir, properties, [] if secured is None else secured.scram_credentials()
        )
    log_file = log_path(state_dir)
    log_offset = log_file.stat().st_size if log_file.exists() else 0
    process = _launch_broker(libs_dir, properties, log_file)
    info = BrokerInfo(
        pid=process.pid,
        port=port,
        controller_port=controller_port,
        bootstrap=f"{HOST}:{port}",
        state_dir=state_dir,
        log_file=log_file,
        sasl_bootstrap=None if secured is None else f"{HOST}:{secured.port}",
        sasl_ssl_bootstrap=None
        if secured is None or not secured.tls
        else f"{HOST}:{secured.ssl_port}",
        ssl_bootstrap=None
        if secured is None or not secured.mutual_tls
        else f"{HOST}:{secured.mtls_port}",
    )
    _write_record(info)
    try:
        _wait_ready(process, info, timeout, log_offset)
    except BaseException:
        process.kill()
        process.wait()
        _remove_record(state_dir)
        raise
    _STARTED_HERE[process.pid] = process
    return info


def start(
    state_dir: Path,
    *,
    cache_dir: Path | None = None,
    timeout: float = 90.0,
    sasl_users: Mapping[str, str] | None = None,
    keystore: Path | None = None,
    client_ca: Path | None = None,
    super_users: tuple[str, ...] | None = None,
) -> tuple[BrokerInfo, bool]:
    """Start the broker for ``state_dir`` unless it already runs.

    Returns ``(info, True)`` if a broker was started now and ``(info, False)``
    if the recorded broker was already running and answering. Raises
    :class:`KafkaLauncherError` (with the broker log tail) if the broker
    exits or does not answer a Metadata request within ``timeout`` seconds;
    the process started by this call is then killed. With ``sasl_users``
    (user -> password), a broker started now also listens with SASL_PLAINTEXT
    (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) on another free loopback port
    (``BrokerInfo.sasl_bootstrap``), and with a ``keystore`` as well (a PEM file:
    unencrypted private key and certificate chain) with SASL_SSL on a third
    (``BrokerInfo.sasl_ssl_bootstrap``), and with a ``client_ca`` too (PEM certificates of the
    authorities that sign client certificates) with mutual TLS on a fourth
    (``BrokerInfo.ssl_bootstrap``). With ``super_users`` (``User:name`` principals) as well,
    requests are authorized by ACLs (``grant``): the super users and the anonymous principal of
    the plaintext listener may do anything, the other accounts what they were granted.
    """
    state_dir = state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(state_dir / ".lock"):
        existing = _existing_broker(state_dir, timeout)
        if existing is not None:
            return existing, False
        libs_dir = ensure_jars(cache_dir if cache_dir is not None else default_cache_dir())
        return (
            _start_new_broker(
                state_dir, libs_dir, timeout, sasl_users, keystore, client_ca, super_users
            ),
            True,
        )


def stop(state_dir: Path, timeout: float = 30.0) -> bool:
    """Stop the broker recorded in ``state_dir``; True if one was running.

    Signals only the recorded PID, and only if its cmdline shows this state
    directory's broker: SIGTERM (controlled shutdown), then SIGKILL after
    ``timeout`` seconds. A record whose PID is gone or now belongs to another
    process is stale: it is removed, nothing is signalled, and False is
    returned.
    """
    state_dir = state_dir.resolve()
    if not record_path(state_dir).exists():
        return False
    with exclusive_lock(state_dir / ".lock"):
        info = _read_record(state_dir)
        if info is None or not _is_our_broker(info.pid, state_dir):
            if info is not None:
                _reap_if_child(info.pid)
            _remove_record(state_dir)
            return False
        _terminate(info.pid, timeout)
        _remove_record(state_dir)
        return True


@contextlib.contextmanager
def running_broker(
    state_dir: Path,
    cache_dir: Path | None = None,
    sasl_users: Mapping[str, str] | None = None,
    keystore: Path | None = None,
    client_ca: Path | None = None,
    super_users: tuple[str, ...] | None = None,
) -> Iterator[BrokerInfo]:
    """Run a broker for the duration of the block (e.g. a pytest session fixture).

    Stops the broker on exit, even on exceptions, but only if this call
    started it; a broker that was already running is left running.
    """
    info, started = start(
        state_dir,
        cache_dir=cache_dir,
        sasl_users=sasl_users,
        keystore=keystore,
        client_ca=client_ca,
        super_users=super_users,
    )
    try:
        yield info
    finally:
        if started:
            stop(state_dir)
