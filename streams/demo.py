"""`uac demo`: the whole pipeline on embedded defaults, from nothing to alerts and analyst
answers, then everything it started is stopped again.

It owns `UAC_HOME/demo` (wiped at the start): a local Kafka broker, a worker and a sink run
from there, the sample events are published, and the demo waits (with progress) until every
event has been decided and the sink has written the history and every subject's final state
(its latest checkpoint, which the analyst views read) to ClickHouse.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

from rules.batch import Submitted, in_processing_order
from schemas.events import subject_key
from streams import local_kafka
from streams.alert_output import alert_view, readable_alerts
from streams.checkout import existing, in_checkout
from streams.console_text import styled
from streams.event_files import read_ndjson_file
from streams.kafka_security import KafkaSecurity, use_kafka_security
from streams.keys import FileKeyStore
from streams.publisher import EventPublisher
from streams.query_clients import open_query_client
from streams.result_view import result_view
from streams.sealing import Sealer
from streams.settings import Settings
from streams.topic_reader import read_topic
from streams.topics import Topics, ensure_topics

EXAMPLES = in_checkout("examples")
SAMPLE_FILES = (EXAMPLES / "events.ndjson", EXAMPLES / "rejected.ndjson")
ANALYST_QUESTIONS: tuple[tuple[str, str, str, str], ...] = (
    (
        "clinic-a",
        "care",
        "International trips per subject per year",
        "SELECT subject_id, toYear(departure_date) AS year, countIf(international) AS international_trips,"
        " count() AS trips FROM trips GROUP BY subject_id, year ORDER BY subject_id, year",
    ),
    (
        "travel-assistant",
        "personalization",
        "International trips per subject per year",
        "SELECT subject_id, toYear(departure_date) AS year, countIf(international) AS international_trips,"
        " count() AS trips FROM trips GROUP BY subject_id, year ORDER BY subject_id, year",
    ),
    (
        "clinic-a",
        "care",
        "Active allergies",
        "SELECT subject_id, substance, criticality, verification_status FROM allergies"
        " WHERE active ORDER BY subject_id, substance",
    ),
    (
        "clinic-a",
        "care",
        "Open alerts by severity",
        "SELECT severity, rule_id, count() AS alerts FROM open_alerts GROUP BY severity, rule_id"
        " ORDER BY severity, rule_id",
    ),
    (
        "clinic-a",
        "care",
        "Gate decisions",
        "SELECT outcome, if(empty(reasons), '-', arrayStringConcat(reasons, ',')) AS why,"
        " count() AS decisions FROM gate_decisions GROUP BY outcome, why ORDER BY outcome, why",
    ),
)


DEMO = "uac-demo"


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    log: Path


def _environment(settings: Settings, bootstrap: str) -> dict[str, str]:
    return os.environ | {
        "UAC_HOME": str(settings.home),
        "UAC_KAFKA_BOOTSTRAP": bootstrap,
        "UAC_KAFKA_SECURITY_PROTOCOL": "PLAINTEXT",
        "UAC_BATCH_SECONDS": "0.05",
        "UAC_SINK_BATCH_SECONDS": "0.3",
    }


def _spawn(name: str, settings: Settings, bootstrap: str) -> Child:
    log = settings.home / "logs" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "streams.cli", name],
            env=_environment(settings, bootstrap),
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Child(name, process, log)


def _stop(child: Child, timeout: float = 30.0) -> None:
    if child.process.poll() is not None:
        return
    child.process.send_signal(signal.SIGTERM)
    try:
        child.process.wait(timeout)
    except subprocess.TimeoutExpired:
        child.process.kill()
        child.process.wait(10)


@contextmanager
def _children(settings: Settings, bootstrap: str) -> Iterator[list[Child]]:
    children = [_spawn("worker", settings, bootstrap), _spawn("sink", settings, bootstrap)]
    try:
        yield children
    finally:
        for child in reversed(children):
            _stop(child)


def _count(bootstrap: str, topic: str) -> int:
    return len(asyncio.run(read_topic(bootstrap, topic)))


def _final_versions(bootstrap: str, topics: Topics) -> dict[str, int]:
    """Subject key -> the version its state reaches: one per accepted event of the subject."""
    accepted = asyncio.run(read_topic(bootstrap, topics.accepted))
    return dict(Counter(record.key.decode() for record in accepted))


def _ingested(settings: Settings, versions: Mapping[str, int]) -> int:
    """Gate decisions plus subjects whose final state the sink has written (what the report
    reads: the current views come from each subject's latest checkpoint)."""
    total = 0
    tenants = {key.split(":", 1)[0] for key in versions}
    with open_query_client(settings) as client:
        for tenant in sorted(tenants):
            decisions = client.query("SELECT count() FROM gate_decisions", tenant, actor=DEMO)
            states = client.query(
                "SELECT subject_id, version FROM current_state", tenant, actor=DEMO
            )
            total += int(decisions.rows[0][0])
            total += sum(
                1
                for subject, version in states.rows
                if int(version) >= versions.get(subject_key(tenant, subject), 0)
            )
    return total


def _wait(
    progress: Progress, label: str, target: int, measure: Callable[[], int], children: list[Child]
) -> None:
    task = progress.add_task(label, total=target)
    deadline = time.monotonic() + 180
    while (done := measure()) < target:
        progress.update(task, completed=done)
        for child in children:
            if child.process.poll() is not None:
                raise RuntimeError(f"the {child.name} stopped; see {child.log}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{label}: {done} of {target} after 180 s")
        time.sleep(0.5)
    progress.update(task, completed=target)


def _sample_events() -> list[Submitted]:
    """The sample events in the order a live system would learn them (recorded_at)."""
    submitted: list[Submitted] = []
    for path in SAMPLE_FILES:
        events, errors = read_ndjson_file(existing(path, "the demo's sample file"))
        if errors:
            raise ValueError(f"{path} has unreadable lines: {errors}")
        submitted.extend(events)
    return in_processing_order(submitted)


def run_demo(console: Console) -> None:
    settings = Settings(home=Settings().home / "demo")
    use_kafka_security(KafkaSecurity())  # the demo's own local broker listens in plaintext
    shutil.rmtree(settings.home, ignore_errors=True)
    submitted = _sample_events()
    topics = Topics(settings.topic_prefix, settings.partitions)
    console.print(styled("Starting local Kafka", "bold", f" under {settings.kafka_state_dir} ..."))
    broker, _ = local_kafka.start(settings.kafka_state_dir)
    try:
        asyncio.run(ensure_topics(broker.bootstrap, topics.specs()))
        with _children(settings, broker.bootstrap) as children:
            console.print(
                styled("Worker and sink started", "bold", "; publishing the sample events ...")
            )

            async def send() -> None:
                sealer = Sealer(FileKeyStore(settings.keys_dir))
                async with EventPublisher(broker.bootstrap, topics.events, sealer) as publisher:
                    await publisher.publish_all(submitted)

            asyncio.run(send())
            with Progress(console=console, transient=False) as progress:

                def decided() -> int:
                    return _count(broker.bootstrap, topics.accepted) + _count(
                        broker.bootstrap, topics.quarantine
                    )

                _wait(progress, "events decided by the gate", len(submitted), decided, children)
                versions = _final_versions(broker.bootstrap, topics)
                _wait(
                    progress,
                    "history and states written to ClickHouse",
                    len(submitted) + len(versions),
                    lambda: _ingested(settings, versions),
                    children,
                )
            _report(console, settings, broker.bootstrap, topics)
    finally:
        local_kafka.stop(settings.kafka_state_dir)
        console.print(styled("Stopped", "bold", " the sink, the worker and Kafka."))


def _report(console: Console, settings: Settings, bootstrap: str, topics: Topics) -> None:
    sealer = Sealer(FileKeyStore(settings.keys_dir))
    alerts = readable_alerts(asyncio.run(read_topic(bootstrap, topics.alerts)), sealer)
    console.print(alert_view(alerts, console.width, f"Alerts on {topics.alerts}"))
    with open_query_client(settings) as client:
        for tenant, purpose, title, sql in ANALYST_QUESTIONS:
            result = client.query(sql, tenant, purpose)
            heading = f"{title} (purpose: {purpose}) — tenant {tenant}"
            console.print(result_view(result, console.width, heading))
