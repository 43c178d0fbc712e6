"""The `uac` command line: thin commands over the pure core and the wiring."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from projections.document import state_document, state_from_checkpoint
from projections.gate import GateContext
from rules.batch import Submitted, replay_batch
from rules.engine import default_rules
from rules.knowledge.bundled import load_bundled_knowledge
from rules.knowledge.report import check_drug as judge_drug
from schemas.codec import alert_codec
from streams import local_kafka
from streams.alert_output import alert_json, print_alerts
from streams.event_files import read_ndjson_file
from streams.kafka_address import bootstrap_servers
from streams.publisher import EventPublisher, NotSent, Published
from streams.rebuild import checkpoint_of_subject, differences, latest_checkpoints, rebuild_states
from streams.replay_report import print_human, print_json, print_line_errors
from streams.settings import Settings
from streams.tenants import load_gate_policy
from streams.topic_reader import follow_topic, read_topic
from streams.topics import Topics
from streams.worker import run_worker

app = typer.Typer(no_args_is_help=True, add_completion=False)
kafka_app = typer.Typer(
    no_args_is_help=True, help="The local Apache Kafka broker (no Docker needed)."
)
app.add_typer(kafka_app, name="kafka")
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


class InputFormat(StrEnum):
    NDJSON = "ndjson"


READERS = {InputFormat.NDJSON: read_ndjson_file}


@app.callback()
def uac() -> None:
    """UaC keeps each person's memory as an event log, folds it into typed state, raises
    alerts and keeps the history for analysts."""


def _topics(settings: Settings) -> Topics:
    return Topics(settings.topic_prefix, settings.partitions)


@kafka_app.command("start")
def kafka_start() -> None:
    """Start the local broker under UAC_HOME (fetches the jars with Maven the first time)."""
    broker, started = local_kafka.start(Settings().kafka_state_dir)
    state = "started" if started else "already running"
    out.print(f"Kafka {local_kafka.KAFKA_VERSION} {state} at {broker.bootstrap} (pid {broker.pid})")


@kafka_app.command("stop")
def kafka_stop() -> None:
    """Stop the local broker this project started (by its recorded PID)."""
    stopped = local_kafka.stop(Settings().kafka_state_dir)
    out.print("Kafka stopped" if stopped else "Kafka was not running")


@kafka_app.command("status")
def kafka_status() -> None:
    """Show whether the local broker runs, and where."""
    broker = local_kafka.status(Settings().kafka_state_dir)
    if broker is None:
        out.print("Kafka is not running")
        raise typer.Exit(code=3)
    out.print(f"Kafka running at {broker.bootstrap} (pid {broker.pid}, log {broker.log_file})")


@app.command()
def worker(
    loglevel: Annotated[str, typer.Option(help="crit, error, warn, info or debug")] = "warn",
) -> None:
    """Run the stream worker: gate, fold, rules, alerts (until Ctrl-C / SIGTERM)."""
    run_worker(Settings(), loglevel)


@app.command()
def publish(
    files: Annotated[list[Path], typer.Argument(exists=True, dir_okay=False, help="Event files.")],
    input_format: Annotated[
        InputFormat, typer.Option("--format", help="Input format.")
    ] = InputFormat.NDJSON,
) -> None:
    """Validate events against the registered Avro schema and publish them (one result each)."""
    settings = Settings()
    batch: list[Submitted] = []
    failed = 0
    for path in files:
        submitted, errors = READERS[input_format](path)
        print_line_errors(errors, err)
        failed += len(errors)
        batch.extend(submitted)

    async def send() -> list[Published | NotSent]:
        async with EventPublisher(
            bootstrap_servers(settings), _topics(settings).events
        ) as publisher:
            return await publisher.publish_all(batch)

    for result in asyncio.run(send()):
        if isinstance(result, Published):
            out.print(
                f"sent {result.origin} {result.event_id} -> partition {result.partition} offset {result.offset}"
            )
        else:
            failed += 1
            err.print(f"[red]not sent[/red] {result.origin}: {result.reason}: {result.message}")
    if failed:
        err.print(f"{failed} record(s) rejected before sending")
        raise typer.Exit(code=1)


@app.command()
def alerts(
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new alerts.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON alert per line.")] = False,
) -> None:
    """Print the alerts topic (every lifecycle record), optionally following it."""
    settings = Settings()
    bootstrap, topic, codec = bootstrap_servers(settings), _topics(settings).alerts, alert_codec()
    if not follow:
        records = asyncio.run(read_topic(bootstrap, topic))
        print_alerts([codec.decode(r.value) for r in records], out, as_json)
        return

    async def tail() -> None:
        async for record in follow_topic(bootstrap, topic, asyncio.Event()):
            alert = codec.decode(record.value)
            if as_json:
                out.out(alert_json(alert), highlight=False)
            else:
                out.print(
                    f"{alert.status.value:>12} {alert.severity.value:<8} {alert.tenant_id}:{alert.subject_id}"
                    f" {alert.title}"
                )

    try:
        asyncio.run(tail())
    except KeyboardInterrupt:
        return


@app.command()
def state(
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant id.")],
    subject: Annotated[str, typer.Option("--subject", help="Subject id.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the state document as JSON.")
    ] = False,
) -> None:
    """Show one subject's current state (from the compacted state topic)."""
    settings = Settings()
    key = f"{tenant}:{subject}"
    checkpoint = asyncio.run(
        checkpoint_of_subject(
            bootstrap_servers(settings), _topics(settings).state, settings.partitions, key
        )
    )
    if checkpoint is None:
        err.print(f"no state for {key}")
        raise typer.Exit(code=4)
    document = state_document(state_from_checkpoint(checkpoint))
    document["state_hash"] = checkpoint.state_hash
    if as_json:
        out.out(json.dumps(document, ensure_ascii=False, sort_keys=True), highlight=False)
    else:
        out.print_json(data=document)


@app.command()
def replay(
    file: Annotated[
        Path | None,
        typer.Option("--file", exists=True, dir_okay=False, help="Events, one JSON per line."),
    ] = None,
    from_kafka: Annotated[
        bool,
        typer.Option("--from-kafka", help="Rebuild from the accepted-events topic and compare."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Fold events through gate + fold + rules (--file), or rebuild every subject from Kafka and
    compare its state_hash with the live state (--from-kafka)."""
    if (file is None) == (not from_kafka):
        err.print("give exactly one of --file FILE or --from-kafka")
        raise typer.Exit(code=2)
    if file is not None:
        _replay_file(file, as_json)
    else:
        _replay_from_kafka(as_json)


def _replay_file(file: Path, as_json: bool) -> None:
    settings = Settings()
    policy = load_gate_policy(
        settings.tenants_file,
        max_future_skew_seconds=settings.max_future_skew_seconds,
        max_event_bytes=settings.max_event_bytes,
    )
    now = datetime.now(UTC)

    def context_for(item: Submitted, owners: dict[str, str]) -> GateContext:
        return GateContext(
            now=now, policy=policy, encoded_size=item.encoded_size, claim_owners=owners
        )

    submitted, errors = read_ndjson_file(file)
    results = replay_batch(submitted, context_for, default_rules(load_bundled_knowledge()))
    print_line_errors(errors, err)
    (print_json if as_json else print_human)(results, out)
    rejected = sum(len(result.rejections) for result in results.values())
    if errors or rejected:
        err.print(f"{len(errors)} unreadable line(s), {rejected} rejected event(s)")
        raise typer.Exit(code=1)


def _replay_from_kafka(as_json: bool) -> None:
    settings = Settings()
    bootstrap, topics = bootstrap_servers(settings), _topics(settings)

    async def compare() -> tuple[int, list[object]]:
        rebuilt = await rebuild_states(bootstrap, topics.accepted)
        live = await latest_checkpoints(bootstrap, topics.state)
        return len(rebuilt.keys() | live.keys()), list(differences(live, rebuilt))

    subjects, found = asyncio.run(compare())
    if as_json:
        out.out(
            json.dumps({"subjects": subjects, "differences": [vars(d) for d in found]}),
            highlight=False,
        )
    else:
        out.print(
            f"rebuilt {subjects} subject(s) from {topics.accepted}: {len(found)} difference(s)"
        )
        for difference in found:
            out.print(f"  {difference}")
    if found:
        raise typer.Exit(code=1)


@app.command("check-drug")
def check_drug(
    allergy: Annotated[
        str, typer.Option("--allergy", help="Allergen as recorded (name, class, brand).")
    ],
    drug: Annotated[
        str, typer.Option("--drug", help="Drug as prescribed (name, brand, strength...).")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
) -> None:
    """Judge one allergy/drug pair with the drug knowledge layer."""
    verdict = judge_drug(load_bundled_knowledge(), allergy, drug)
    if as_json:
        out.out(json.dumps(verdict, ensure_ascii=False, sort_keys=True), highlight=False)
        return
    for name, value in verdict.items():
        out.print(f"{name:>18}: {value}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
