"""The operator's `uac` commands: the local broker, the worker and the sink, consumer lag, the
log check, re-judging alerts and redriving refused events."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.table import Table

from rules.engine import default_rules
from rules.knowledge.bundled import load_bundled_knowledge
from rules.rejudge import Rejudgement
from streams import kafka_config, local_kafka
from streams.alert_output import (
    AlertFormat,
    alert_view,
    print_alerts,
)
from streams.cli_common import (
    EXIT_FAILED,
    err,
    out,
    reading_sealer,
    topics_of,
    utc_time,
)
from streams.console_text import styled
from streams.kafka_address import bootstrap_servers
from streams.lag import GroupLag, pipeline_groups, pipeline_lag
from streams.log_check import check_log
from streams.ports import HIGHEST_PORT
from streams.redrive import NotRedrivable, Redrive, Selection, redrivable, redrive
from streams.rejudge import WorkersRunning, rejudge
from streams.rulebook import Rulebook
from streams.settings import Settings
from streams.sink import serve_sink
from streams.worker import run_worker


def kafka_start() -> None:
    """Start the local broker under UAC_HOME (fetches the jars with Maven the first time)."""
    broker, started = local_kafka.start(Settings().kafka_state_dir)
    state = "started" if started else "already running"
    out.print(
        f"Kafka {kafka_config.KAFKA_VERSION} {state} at {broker.bootstrap} (pid {broker.pid})"
    )


def kafka_stop() -> None:
    """Stop the local broker this project started (by its recorded PID), and wait until its
    process has exited."""
    stopped = local_kafka.stop(Settings().kafka_state_dir)
    out.print("Kafka stopped" if stopped else "Kafka was not running")


def kafka_status() -> None:
    """Show whether the local broker runs, and where (exit 3 when it does not)."""
    found = local_kafka.recorded(Settings().kafka_state_dir)
    if found is None:
        out.print("Kafka is not running")
        raise typer.Exit(code=3)
    broker, running = found
    if running:
        out.print(f"Kafka running at {broker.bootstrap} (pid {broker.pid}, log {broker.log_file})")
        return
    out.print(
        f"Kafka is not running: the broker recorded in {kafka_config.record_path(broker.state_dir)} "
        f"(pid {broker.pid}, port {broker.port}) is no longer running; the record is stale "
        "(`uac kafka start` replaces it, `uac kafka stop` removes it)"
    )
    raise typer.Exit(code=3)


def worker(
    loglevel: Annotated[str, typer.Option(help="crit, error, warn, info or debug")] = "warn",
) -> None:
    """Run the stream worker: gate, fold, rules, alerts (until Ctrl-C / SIGTERM)."""
    logging.getLogger("aiokafka").setLevel(logging.NOTSET)
    run_worker(Settings(), loglevel)


def sink(
    port: Annotated[
        int,
        typer.Option(
            min=0,
            max=HIGHEST_PORT,
            help="HTTP port for /query, /explain, /health, /metrics (0 = any free).",
        ),
    ] = 0,
) -> None:
    """Run the ClickHouse sink: accepted events, decisions, alerts, checkpoints -> ClickHouse."""
    serve_sink(Settings(), http_port=port)


def rejudge_command(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the records; publish nothing.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON alert per line.")] = False,
) -> None:
    """After an upgrade of the rules or the drug knowledge, with the workers stopped: publish
    the alert records that bring the alerts topic in line with what they now find in every
    subject's state (newly found, graded differently, no longer found)."""
    settings = Settings()
    knowledge = load_bundled_knowledge()
    why = Rejudgement(f"knowledge:{knowledge.version}", datetime.now(UTC))
    rules = default_rules(knowledge)
    try:
        result = asyncio.run(
            rejudge(
                bootstrap_servers(settings),
                topics_of(settings),
                settings.app_id,
                reading_sealer(settings),
                rules,
                why,
                Rulebook.of(rules, knowledge.version),
                publish=not dry_run,
            )
        )
    except WorkersRunning as error:
        err.print(styled("failed", "red", f": {error}"))
        raise typer.Exit(code=EXIT_FAILED) from None
    counts = Counter(record.status.value for record in result.records)
    summary = (
        f"re-judged {result.subjects} subject(s) with {why.trigger_id}: "
        f"{counts['raised']} raised, {counts['resolved']} resolved, "
        f"{result.checkpoints} checkpoint(s) re-rendered"
        + (" (dry run: nothing published)" if dry_run else "")
    )
    if as_json:
        print_alerts(result.records, out, AlertFormat.JSON)
        err.print(summary)
        return
    if result.records:
        out.print(alert_view(result.records, out.width, "Re-judged alerts"))
    out.print(summary)


def redrive_command(
    tenant: Annotated[str, typer.Option("--tenant", help="Whose refused events.")],
    reasons: Annotated[
        list[str],
        typer.Option(
            "--reason",
            help="A reason code whose cause was mended (repeatable); a refusal is redriven "
            "only when every one of its reasons is given.",
        ),
    ],
    since: Annotated[
        str | None,
        typer.Option(help="Only refusals decided at or after (ISO 8601; UTC if no zone)."),
    ] = None,
    until: Annotated[
        str | None, typer.Option(help="Only refusals decided before (ISO 8601; UTC if no zone).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would be sent; send nothing.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Send events the gate refused for a cause since mended (an actor added to the tenants
    file, a key registered again, a schema registered, a limit raised, a referenced claim
    arrived) through the gate again: the records, unchanged, from the events topic. Exit 1 when
    a chosen record is no longer in the log or not the one refused."""
    settings = Settings()
    try:
        asked = redrivable(reasons)
    except NotRedrivable as error:
        raise typer.BadParameter(str(error), param_hint="--reason") from None
    selection = Selection(tenant, asked, utc_time(since, "--since"), utc_time(until, "--until"))
    try:
        result = asyncio.run(
            redrive(bootstrap_servers(settings), topics_of(settings), selection, dry_run=dry_run)
        )
    except LookupError as error:
        err.print(styled("failed", "red", f": {error}"))
        raise typer.Exit(code=EXIT_FAILED) from None
    if as_json:
        out.out(json.dumps(result.as_json(), sort_keys=True), highlight=False)
    else:
        _print_redrive(result, tenant, dry_run)
    if result.missing or result.changed:
        raise typer.Exit(code=1)


def _print_redrive(result: Redrive, tenant: str, dry_run: bool) -> None:
    by_reason = ", ".join(f"{n} {reason}" for reason, n in sorted(result.by_reason.items()))
    out.print(f"{result.chosen} refused event(s) of {tenant} chosen ({by_reason or 'none'})")
    verb = "would be sent again (dry run)" if dry_run else "sent again"
    out.print(f"{result.sendable} {verb}; {result.copies} redriven copies left out")
    for what, positions in (("no longer in the log", result.missing), ("changed", result.changed)):
        if positions:
            listed = ", ".join(f"{p}/{o}" for p, o in positions[:20])
            out.print(f"{len(positions)} {what}: {listed}")


def check_log_command(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Check that every event the workers moved past (below their group's committed offset)
    has a gate decision: accepted or quarantined. Exit 1 when one has none."""
    settings = Settings()
    try:
        result = asyncio.run(
            check_log(bootstrap_servers(settings), topics_of(settings), settings.app_id)
        )
    except LookupError as error:
        err.print(styled("failed", "red", f": {error}"))
        raise typer.Exit(code=EXIT_FAILED) from None
    undecided = [{"partition": p, "offset": o} for p, o in result.undecided]
    if as_json:
        report = {
            "committed": result.committed,
            "events_below_committed": result.events_below,
            "undecided": undecided,
        }
        out.out(json.dumps(report, sort_keys=True), highlight=False)
    else:
        checked = sum(result.events_below.values())
        out.print(f"{checked} event(s) below the committed offsets: {len(undecided)} undecided")
        for position in undecided[:50]:
            out.print(f"  partition {position['partition']} offset {position['offset']}")
    if undecided:
        raise typer.Exit(code=1)


def lag_command(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    max_lag: Annotated[
        int | None,
        typer.Option("--max-lag", min=0, help="Exit 1 when a group is more records behind."),
    ] = None,
) -> None:
    """How far the workers' and the sink's consumer groups are behind the end of their topics
    (records between the committed offset and the end, per partition), and their members."""
    settings = Settings()
    groups = pipeline_groups(settings, topics_of(settings))
    found = asyncio.run(pipeline_lag(bootstrap_servers(settings), groups))
    if as_json:
        report = {"groups": [group.as_json() for group in found]}
        out.out(json.dumps(report, sort_keys=True), highlight=False)
    else:
        out.print(lag_table(found))
    if max_lag is not None and any(group.lag > max_lag for group in found):
        raise typer.Exit(code=1)


def lag_table(groups: list[GroupLag]) -> Table:
    """One row per group and topic: its lag and the partitions that are behind."""
    table = Table(title="Consumer lag (records between the committed offset and the end)")
    table.add_column("group", no_wrap=True)
    table.add_column("members", justify="right")
    table.add_column("topic", no_wrap=True)
    table.add_column("lag", justify="right")
    table.add_column("partitions behind")
    for group in groups:
        for topic in dict.fromkeys(p.topic for p in group.partitions):
            held = [p for p in group.partitions if p.topic == topic]
            behind = ", ".join(f"{p.partition} ({p.lag})" for p in held if p.lag)
            lag = sum(p.lag for p in held)
            table.add_row(group.group, str(group.members), topic, str(lag), behind or "-")
    return table
