"""The `uac` command line: thin commands over the pure core and the wiring."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections import Counter
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from aiokafka.errors import (
    GroupAuthorizationFailedError,
    KafkaConnectionError,
    TopicAuthorizationFailedError,
)
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from projections.document import plain, state_from_checkpoint
from projections.gate import GateContext
from projections.reads import DEFAULT_PURPOSE, readable_document
from projections.state import UserState, initial_state
from rules.batch import Submitted, processing_order, replay_batch
from rules.engine import default_rules
from rules.knowledge.bundled import load_bundled_knowledge
from rules.knowledge.model import Coding
from rules.knowledge.report import check_drug as judge_drug
from rules.knowledge.tables import KnowledgeDataError, parse_coding
from rules.rejudge import Rejudgement
from schemas.alerts import Alert
from schemas.codec import alert_codec
from schemas.errors import RegistryUnavailable
from schemas.events import ErasureRequested, Event, EventType, Origin
from schemas.registry import use_registry
from streams import kafka_config, local_kafka
from streams.alert_lineage import AlertNotFound
from streams.alert_output import (
    AlertFormat,
    alert_table,
    print_alert,
    print_alerts,
    readable_alerts,
)
from streams.analytics import QueryFailed, TenantRequired
from streams.audit import publish_read, read_record, reader_identity
from streams.checkout import CheckoutFileMissing
from streams.demo import run_demo
from streams.event_files import LineError, read_ndjson_file
from streams.export import erasure_receipts, export_document, write_csv, write_json
from streams.fhir_files import read_fhir_files
from streams.group_access import GroupNotAuthorized, not_authorized
from streams.json_out import json_line
from streams.kafka_address import KafkaNotFound, bootstrap_servers
from streams.kafka_security import KafkaSecurity, KafkaSecurityError, use_kafka_security
from streams.keys import FileKeyStore, SubjectErased
from streams.lag import GroupLag, pipeline_groups, pipeline_lag
from streams.log_check import check_log
from streams.publisher import EventPublisher, NotSent, Published
from streams.query_clients import SinkUnavailable, open_query_client
from streams.rebuild import checkpoint_of_subject, differences, latest_checkpoints, rebuild_states
from streams.redrive import NotRedrivable, Redrive, Selection, redrivable, redrive
from streams.rejudge import WorkersRunning, rejudge
from streams.replay_report import print_human, print_json, print_line_errors
from streams.runtime import collector_paused
from streams.schema_registry import RegistryRefused, registry_of
from streams.sealing import Sealer, readable
from streams.settings import Settings
from streams.signatures import Signer, SigningKeyError
from streams.signatures import new_signing_key as new_signing_key_file
from streams.sink import serve_sink
from streams.sql_guard import QueryRefused
from streams.tenants import TenantsFileError, gate_policy_of, load_gate_policy
from streams.topic_reader import TopicMissing, TopicNotAuthorized, follow_topic, read_topic
from streams.topics import TopicMismatch, Topics, TopicsNotCreated
from streams.worker import run_worker
from streams.worker_http import PortUnavailable

app = typer.Typer(no_args_is_help=True, add_completion=False)
kafka_app = typer.Typer(
    no_args_is_help=True, help="The local Apache Kafka broker (no Docker needed)."
)
app.add_typer(kafka_app, name="kafka")
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


READ_ERRORS = (QueryRefused, TenantRequired, QueryFailed, AlertNotFound, SinkUnavailable)
EXIT_FAILED = 3
"""The exit code after `failed: ...`: a query failed, or the sink or the broker did not answer."""


def read_failed(error: Exception) -> typer.Exit:
    """A clear one-line message and the exit code of a read that could not be served:
    2 refused (no tenant, a refused query or purpose), 3 the query failed or the sink did not
    answer, 4 no such alert."""
    if isinstance(error, QueryRefused | TenantRequired):
        err.print(f"[red]refused[/red]: {error}")
        return typer.Exit(code=2)
    if isinstance(error, AlertNotFound):
        err.print(str(error))
        return typer.Exit(code=4)
    err.print(f"[red]failed[/red]: {error}")
    return typer.Exit(code=EXIT_FAILED)


class InputFormat(StrEnum):
    NDJSON = "ndjson"
    FHIR = "fhir"


class ExportFormat(StrEnum):
    JSON = "json"
    CSV = "csv"


FormatOption = Annotated[
    InputFormat,
    typer.Option(
        "--format", help="ndjson: UaC events; fhir: FHIR R4 Bundles/resources/bulk NDJSON."
    ),
]
PurposeOption = Annotated[
    str,
    typer.Option(
        "--purpose", help="What the data will be used for (default: care); only claims it may use."
    ),
]
ReaderOption = Annotated[
    str | None, typer.Option("--actor", help="Who reads (audited; default: your login).")
]
TenantOption = Annotated[
    str, typer.Option("--tenant", help="Tenant of FHIR input (events carry their own).")
]
ActorOption = Annotated[str, typer.Option("--actor", help="Actor that FHIR input is published as.")]
SigningKeyOption = Annotated[
    Path | None,
    typer.Option(
        "--signing-key",
        envvar="UAC_SIGNING_KEY_FILE",
        dir_okay=False,
        help="Sign every record with this Ed25519 private key (PEM; see new-signing-key).",
    ),
]


def read_events(
    paths: list[Path], input_format: InputFormat, tenant: str, actor: str
) -> tuple[list[Submitted], list[LineError]]:
    """Events and per-record errors from files; FHIR skips are reported, never silent."""
    if input_format is InputFormat.NDJSON:
        submitted: list[Submitted] = []
        errors: list[LineError] = []
        for path in paths:
            found, problems = read_ndjson_file(path)
            submitted.extend(found)
            errors.extend(problems)
        return submitted, errors
    files = read_fhir_files(
        paths,
        tenant_id=tenant,
        actor=actor,
        fallback_time=datetime.now(UTC),
        max_event_bytes=Settings().max_event_bytes,
    )
    for reason, count in sorted(Counter(skip.reason for skip in files.skipped).items()):
        err.print(f"skipped {count} resource(s): {reason}")
    for notice in files.notes:
        err.print(notice.message(), markup=False, highlight=False)
    return files.submitted, files.errors


@app.callback()
def uac() -> None:
    """UaC keeps each person's memory as an event log, folds it into typed state, raises
    alerts and keeps the history for analysts."""
    try:
        settings = Settings()
    except ValidationError as error:
        for problem in error.errors():
            setting = "_".join(str(part) for part in problem["loc"]).upper()
            name = f"UAC_{setting}: " if setting else ""
            message = problem["msg"].removeprefix("Value error, ")
            err.print(f"[red]invalid setting[/red] {name}{message}")
        raise typer.Exit(code=EXIT_FAILED) from None
    use_registry(registry_of(settings))
    try:
        use_kafka_security(KafkaSecurity.of(settings).checked())
    except KafkaSecurityError as error:
        err.print(f"[red]invalid setting[/red] {error}")
        raise typer.Exit(code=EXIT_FAILED) from None


def _signer(signing_key: Path | None) -> Signer | None:
    """The producer's key, loaded before anything is read or sent (an unusable one fails here)."""
    return None if signing_key is None else Signer.from_file(signing_key)


def _publisher(settings: Settings, signer: Signer | None) -> EventPublisher:
    """The events topic's publisher of the settings: sealing, and signing with `signer`."""
    return EventPublisher(
        bootstrap_servers(settings),
        _topics(settings).events,
        _sealer(settings),
        topic_wait=settings.topic_wait_seconds,
        signer=signer,
    )


def _topics(settings: Settings) -> Topics:
    return Topics(settings.topic_prefix, settings.partitions)


def _sealer(settings: Settings) -> Sealer:
    return Sealer(FileKeyStore(settings.keys_dir))


def _alerts_of(settings: Settings, records: list[Any]) -> list[Alert]:
    codec, sealer = alert_codec(), _sealer(settings)
    return [
        codec.decode(framed) for record in records if (framed := readable(sealer, record.value))
    ]


@kafka_app.command("start")
def kafka_start() -> None:
    """Start the local broker under UAC_HOME (fetches the jars with Maven the first time)."""
    broker, started = local_kafka.start(Settings().kafka_state_dir)
    state = "started" if started else "already running"
    out.print(
        f"Kafka {kafka_config.KAFKA_VERSION} {state} at {broker.bootstrap} (pid {broker.pid})"
    )


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
    logging.getLogger("aiokafka").setLevel(logging.NOTSET)
    run_worker(Settings(), loglevel)


@app.command()
def sink(
    port: Annotated[
        int, typer.Option(help="HTTP port for /query, /health, /metrics (0 = any free).")
    ] = 0,
) -> None:
    """Run the ClickHouse sink: accepted events, decisions, alerts, checkpoints -> ClickHouse."""
    serve_sink(Settings(), http_port=port)


@app.command()
def query(
    sql: Annotated[
        str, typer.Argument(help="ClickHouse SQL over the analyst relations (see docs/analyst.md).")
    ],
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant whose data the query may see.")],
    purpose: PurposeOption = DEFAULT_PURPOSE,
    actor: ReaderOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print {columns, rows} as JSON.")] = False,
) -> None:
    """Run an analyst query scoped to one tenant and one purpose (audited; works while the
    pipeline runs or is stopped)."""
    try:
        with open_query_client(Settings()) as client:
            result = client.query(sql, tenant, purpose, actor=reader_identity(actor))
    except READ_ERRORS as error:
        raise read_failed(error) from None
    if as_json:
        out.out(json_line(result.to_json(), sort_keys=False), highlight=False)
        return
    table = Table()
    for column in result.columns:
        table.add_column(column)
    for row in result.rows:
        table.add_row(*(str(value) for value in row))
    out.print(table)


@app.command()
def demo() -> None:
    """The main job on embedded defaults: local Kafka, worker and sink, the sample events,
    alerts and analyst answers; stops everything it started."""
    run_demo(out)


@app.command()
def publish(
    files: Annotated[list[Path], typer.Argument(exists=True, dir_okay=False, help="Event files.")],
    input_format: FormatOption = InputFormat.NDJSON,
    tenant: TenantOption = "clinic-a",
    actor: ActorOption = "fhir-import",
    signing_key: SigningKeyOption = None,
) -> None:
    """Validate events against the registered Avro schema and publish them (one result each),
    in the order `uac replay --file` folds them, so the stream raises the alerts it prints."""
    settings = Settings()
    signer = _signer(signing_key)
    found, errors = read_events(files, input_format, tenant, actor)
    batch = sorted(found, key=processing_order)
    print_line_errors(errors, err)
    failed = len(errors)

    async def send() -> list[Published | NotSent]:
        async with _publisher(settings, signer) as publisher:
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
        err.print(f"{failed} record(s) not sent")
        raise typer.Exit(code=1)


@app.command()
def new_signing_key(
    path: Annotated[Path, typer.Argument(dir_okay=False, help="Where to write the private key.")],
) -> None:
    """Make an Ed25519 key pair for a producer: the private key goes to PATH (owner-only; an
    existing file is never overwritten), the public key is printed for the tenants file's
    `actor_keys`."""
    public_key = new_signing_key_file(path)
    out.print(f"private key written to {path}")
    out.print(f"public key (tenants file, actor_keys): {public_key}")


@app.command()
def alerts(
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new alerts.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON alert per line (= --format json).")
    ] = False,
    output: Annotated[
        AlertFormat,
        typer.Option(
            "--format",
            help="table; json (one alert per line); fhir (a Bundle of DetectedIssue resources, "
            "with --follow one DetectedIssue per line).",
        ),
    ] = AlertFormat.TABLE,
) -> None:
    """Print the alerts topic (every lifecycle record), optionally following it."""
    settings = Settings()
    bootstrap, topic = bootstrap_servers(settings), _topics(settings).alerts
    sealer, output = _sealer(settings), AlertFormat.JSON if as_json else output
    if not follow:
        records = asyncio.run(read_topic(bootstrap, topic))
        print_alerts(readable_alerts(records, sealer), out, output)
        return

    async def tail() -> None:
        async for record in follow_topic(bootstrap, topic, asyncio.Event()):
            for alert in readable_alerts([record], sealer):
                print_alert(alert, out, output)

    try:
        asyncio.run(tail())
    except KeyboardInterrupt:
        return


def _subject_state(settings: Settings, key: str) -> tuple[UserState, str] | None:
    checkpoint = asyncio.run(
        checkpoint_of_subject(
            bootstrap_servers(settings),
            _topics(settings).state,
            settings.partitions,
            key,
            _sealer(settings),
        )
    )
    return (
        None if checkpoint is None else (state_from_checkpoint(checkpoint), checkpoint.state_hash)
    )


def _audit(
    settings: Settings,
    tenant: str,
    subject: str | None,
    actor: str | None,
    purpose: str,
    action: str,
) -> None:
    detail = f"uac {action}" + ("" if subject is None else " of one subject")
    record = read_record(tenant, subject, reader_identity(actor), purpose, action, detail)
    asyncio.run(publish_read(bootstrap_servers(settings), _topics(settings).audit, record))


@app.command()
def state(
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant id.")],
    subject: Annotated[str, typer.Option("--subject", help="Subject id.")],
    purpose: PurposeOption = DEFAULT_PURPOSE,
    actor: ReaderOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the state document as JSON.")
    ] = False,
) -> None:
    """Show what one subject's memory holds that `--purpose` may use (read is audited)."""
    settings = Settings()
    found = _subject_state(settings, f"{tenant}:{subject}")
    _audit(settings, tenant, subject, actor, purpose, "state")
    if found is None:
        err.print(f"no state for {tenant}:{subject}")
        raise typer.Exit(code=4)
    subject_state, hash_ = found
    tenant_policy = gate_policy_of(settings).tenants.get(tenant)
    document = readable_document(subject_state, purpose, tenant_policy, read_at=datetime.now(UTC))
    document["state_hash"] = hash_
    if as_json:
        out.out(json_line(document), highlight=False)
    else:
        out.print_json(data=document)


@app.command()
def export(
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant id.")],
    subject: Annotated[str, typer.Option("--subject", help="Subject id.")],
    out_dir: Annotated[
        Path, typer.Option("--out", file_okay=False, help="Directory to write the export to.")
    ],
    output: Annotated[
        ExportFormat, typer.Option("--format", help="json or csv.")
    ] = ExportFormat.JSON,
    actor: ReaderOption = None,
) -> None:
    """Everything held about one subject (a data-subject access request), with provenance."""
    settings = Settings()
    key = f"{tenant}:{subject}"
    found = _subject_state(settings, key)
    _audit(settings, tenant, subject, actor, "subject_access", "export")
    receipts = erasure_receipts(settings, tenant, subject, reader_identity(actor))
    if found is None and not receipts:
        err.print(f"nothing is held about {key}")
        raise typer.Exit(code=4)
    subject_state = found[0] if found else initial_state(tenant, subject)
    alerts = [
        a
        for a in _alerts_of(
            settings, asyncio.run(read_topic(bootstrap_servers(settings), _topics(settings).alerts))
        )
        if a.key == key
    ]
    document = export_document(subject_state, alerts, receipts, plain(datetime.now(UTC)))
    written = (write_json if output is ExportFormat.JSON else write_csv)(document, out_dir)
    for path in written:
        out.print(f"wrote {path}")


@app.command()
def erase(
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant id.")],
    subject: Annotated[str, typer.Option("--subject", help="Subject id.")],
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (kept in the request).")
    ] = None,
    actor: Annotated[
        str, typer.Option("--actor", help="Actor the request is sent as.")
    ] = "uac-cli",
    signing_key: SigningKeyOption = None,
) -> None:
    """Erase a subject everywhere: the worker records it in the erasure ledger, destroys the
    subject's key (shredding every Kafka copy), tombstones its state; the sink deletes its rows
    from ClickHouse and writes a receipt."""
    settings = Settings()
    signer = _signer(signing_key)
    now = datetime.now(UTC)
    request = Event(
        event_id=str(uuid.uuid4()),
        tenant_id=tenant,
        subject_id=subject,
        actor=actor,
        type=EventType.ERASURE_REQUESTED,
        occurred_at=now,
        recorded_at=now,
        origin=Origin.EXPLICIT_STATEMENT,
        confidence=1.0,
        purpose="erasure",
        payload=ErasureRequested(reason=reason),
    )

    async def send() -> Published:
        async with _publisher(settings, signer) as publisher:
            return await publisher.publish(request)

    try:
        sent = asyncio.run(send())
    except SubjectErased:
        out.print(f"{tenant}:{subject} is already erased (its key is destroyed); nothing to do.")
        return
    out.print(
        f"erasure of {tenant}:{subject} requested (event {sent.event_id}); follow it with `uac query`."
    )


@app.command()
def explain(
    alert_id: Annotated[str, typer.Argument(help="The alert to explain.")],
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant of the alert.")],
    purpose: PurposeOption = DEFAULT_PURPOSE,
    actor: ReaderOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the chain as JSON.")] = False,
) -> None:
    """Why an alert fired: its lifecycle, rule and version, causing claims, and where each
    source event sits in the log (audited)."""
    try:
        with open_query_client(Settings()) as client:
            chain = client.explain(alert_id, tenant, purpose, actor=reader_identity(actor))
    except READ_ERRORS as error:
        raise read_failed(error) from None
    if as_json:
        out.out(json_line(chain, default=str), highlight=False)
    else:
        out.print_json(data=chain, default=str)


@app.command()
def replay(
    files: Annotated[
        list[Path] | None,
        typer.Option(
            "--file", exists=True, dir_okay=False, help="Event file(s); repeat for several."
        ),
    ] = None,
    input_format: FormatOption = InputFormat.NDJSON,
    tenant: TenantOption = "clinic-a",
    actor: ActorOption = "fhir-import",
    from_kafka: Annotated[
        bool,
        typer.Option("--from-kafka", help="Rebuild from the accepted-events topic and compare."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Fold events through gate + fold + rules (--file), or rebuild every subject from Kafka and
    compare its state_hash with the live state (--from-kafka)."""
    if bool(files) == from_kafka:
        err.print("give exactly one of --file FILE or --from-kafka")
        raise typer.Exit(code=2)
    if files:
        submitted, errors = read_events(files, input_format, tenant, actor)
        _replay_events(submitted, errors, as_json)
    else:
        _replay_from_kafka(as_json)


def _replay_events(submitted: list[Submitted], errors: list[LineError], as_json: bool) -> None:
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

    with collector_paused():
        results = replay_batch(submitted, context_for, default_rules(load_bundled_knowledge()))
    print_line_errors(errors, err)
    (print_json if as_json else print_human)(results, out)
    rejected = sum(len(result.rejections) for result in results.values())
    if errors or rejected:
        err.print(f"{len(errors)} input error(s), {rejected} rejected event(s)")
        raise typer.Exit(code=1)


def _replay_from_kafka(as_json: bool) -> None:
    settings = Settings()
    bootstrap, topics = bootstrap_servers(settings), _topics(settings)

    async def compare() -> tuple[int, list[object]]:
        sealer = _sealer(settings)
        rebuilt = await rebuild_states(bootstrap, topics.accepted, sealer)
        live = await latest_checkpoints(bootstrap, topics.state, sealer)
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


@app.command("rejudge")
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
    try:
        result = asyncio.run(
            rejudge(
                bootstrap_servers(settings),
                _topics(settings),
                settings.app_id,
                _sealer(settings),
                default_rules(knowledge),
                why,
                publish=not dry_run,
            )
        )
    except WorkersRunning as error:
        err.print(f"[red]failed[/red]: {error}")
        raise typer.Exit(code=EXIT_FAILED) from None
    counts = Counter(record.status.value for record in result.records)
    summary = (
        f"re-judged {result.subjects} subject(s) with {why.trigger_id}: "
        f"{counts['raised']} raised, {counts['resolved']} resolved"
        + (" (dry run: nothing published)" if dry_run else "")
    )
    if as_json:
        print_alerts(result.records, out, AlertFormat.JSON)
        err.print(summary)
        return
    if result.records:
        out.print(alert_table(result.records, title="Re-judged alerts"))
    out.print(summary)


@app.command("redrive")
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
    selection = Selection(tenant, asked, _utc_time(since, "--since"), _utc_time(until, "--until"))
    try:
        result = asyncio.run(
            redrive(bootstrap_servers(settings), _topics(settings), selection, dry_run=dry_run)
        )
    except LookupError as error:
        err.print(f"[red]failed[/red]: {error}")
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


def _utc_time(text: str | None, option: str) -> datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(f"not an ISO 8601 time: {text!r}", param_hint=option) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@app.command("check-log")
def check_log_command(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Check that every event the workers moved past (below their group's committed offset)
    has a gate decision: accepted or quarantined. Exit 1 when one has none."""
    settings = Settings()
    try:
        result = asyncio.run(
            check_log(bootstrap_servers(settings), _topics(settings), settings.app_id)
        )
    except LookupError as error:
        err.print(f"[red]failed[/red]: {error}")
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


@app.command("lag")
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
    groups = pipeline_groups(settings, _topics(settings))
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


@app.command("check-drug")
def check_drug(
    allergy: Annotated[
        str | None, typer.Option("--allergy", help="Allergen as recorded (name, class, brand).")
    ] = None,
    drug: Annotated[
        str | None, typer.Option("--drug", help="Drug as prescribed (name, brand, strength...).")
    ] = None,
    allergy_codes: Annotated[
        list[str] | None,
        typer.Option(
            "--allergy-code",
            help="Allergen coding system|code (rxnorm, ndc, snomed, cvx or a URI); repeatable.",
        ),
    ] = None,
    drug_codes: Annotated[
        list[str] | None,
        typer.Option(
            "--drug-code",
            help="Drug coding system|code, e.g. rxnorm|723 or cvx|21; repeatable.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
) -> None:
    """Judge one allergy/drug pair with the drug knowledge layer (by name, code, or both)."""
    allergen, allergen_codings = _named_or_coded(allergy, allergy_codes or [], "allergy")
    medicine, medicine_codings = _named_or_coded(drug, drug_codes or [], "drug")
    verdict = judge_drug(
        load_bundled_knowledge(), allergen, medicine, allergen_codings, medicine_codings
    )
    if as_json:
        out.out(json_line(verdict), highlight=False)
        return
    for name, value in verdict.items():
        out.print(f"{name:>18}: {value}")


def _named_or_coded(
    name: str | None, codes: list[str], option: str
) -> tuple[str, tuple[Coding, ...]]:
    """The name and codings of one side of a check; without a name, its codes name it."""
    try:
        codings = tuple(parse_coding(code) for code in codes)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint=f"--{option}-code") from None
    if not (name or "").strip() and not codings:
        raise typer.BadParameter("give a name or a code", param_hint=f"--{option}")
    return (name or "").strip() or " ".join(codes), codings


def main() -> None:
    """The `uac` command: a broker that is unknown or does not answer, a pipeline whose topics
    do not exist yet, an account the cluster's ACLs refuse (a topic or a consumer group), a
    worker port that is taken, a tenants file, signing key or drug knowledge data that cannot be
    used, a local Kafka that cannot be launched, or a file of the source checkout that is not
    there, is a one-line message and exit code 3, not a traceback."""
    logging.getLogger("aiokafka").setLevel(logging.ERROR)
    try:
        app()
    except (
        CheckoutFileMissing,
        kafka_config.KafkaLauncherError,
        KafkaNotFound,
        KafkaConnectionError,
        TopicMissing,
        TopicNotAuthorized,
        GroupNotAuthorized,
        TopicAuthorizationFailedError,
        PortUnavailable,
        RegistryUnavailable,
        RegistryRefused,
        SigningKeyError,
        TenantsFileError,
        TopicMismatch,
        TopicsNotCreated,
    ) as error:
        err.print(f"[red]failed[/red]: {error}")
        raise SystemExit(EXIT_FAILED) from None
    except GroupAuthorizationFailedError as error:
        group = str(error.args[0]) if error.args else None
        err.print(f"[red]failed[/red]: {not_authorized(group)}")
        raise SystemExit(EXIT_FAILED) from None
    except KnowledgeDataError as error:
        err.print(f"[red]failed[/red]: the drug knowledge data cannot be used: {error}")
        raise SystemExit(EXIT_FAILED) from None


if __name__ == "__main__":
    main()
