"""The producer's `uac` commands: publish events, fold them locally (`replay`), make a signing
key."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from projections.gate import GateContext
from rules.batch import (
    SubjectResult,
    Submitted,
    advance_clocks,
    in_processing_order,
    replay_batch,
)
from rules.engine import default_rules
from rules.knowledge.bundled import load_bundled_knowledge
from schemas.reasons import ReasonCode
from streams.cli_common import (
    ActorOption,
    FormatOption,
    InputFormat,
    LocalTimesOption,
    SigningKeyOption,
    TenantOption,
    err,
    out,
    publisher_of,
    reading_sealer,
    signer_from,
    topics_of,
    utc_time,
    zone_named,
)
from streams.console_text import styled
from streams.event_files import LineError, read_ndjson_file
from streams.fhir_files import files_written_at, read_fhir_files, skip_lines
from streams.json_out import json_line
from streams.kafka_address import bootstrap_servers
from streams.publish_report import ReadInputs, input_documents, sent_documents
from streams.publisher import NotSent, Published
from streams.rebuild import Difference, differences, latest_checkpoints, rebuild_states
from streams.replay_report import print_human, print_json, print_line_errors
from streams.runtime import collector_paused
from streams.settings import Settings
from streams.signatures import new_signing_key as new_signing_key_file
from streams.tenants import load_gate_policy
from streams.text_files import file_labels


def read_events(
    paths: list[Path],
    input_format: InputFormat,
    tenant: str,
    actor: str,
    local_times_in: str | None = None,
) -> ReadInputs:
    """Events and per-record errors from files, with the FHIR resources skipped and the records
    sent with a part left out (none for UaC event files). `local_times_in` names the zone of
    FHIR times written without one (`--local-times-in`; UaC events always carry theirs)."""
    if input_format is InputFormat.NDJSON:
        if local_times_in is not None:
            raise typer.BadParameter(
                "applies to FHIR input (--format fhir): UaC events carry their zones",
                param_hint="--local-times-in",
            )
        submitted, errors = _read_ndjson(paths)
        return ReadInputs(submitted, errors, [], [])
    files = read_fhir_files(
        paths,
        tenant_id=tenant,
        actor=actor,
        fallback_time=files_written_at(paths, datetime.now(UTC)),
        max_event_bytes=Settings().max_event_bytes,
        local_zone=zone_named(local_times_in, "--local-times-in"),
    )
    return ReadInputs(files.submitted, files.errors, files.skipped, files.notes)


def report_reading(read: ReadInputs, paths: list[Path], *, accounted: bool = False) -> None:
    """FHIR skips and notices on stderr, never silent (unless `accounted` for in the command's
    JSON output), and input that holds no event at all (an empty file, a Bundle without
    entries)."""
    if not accounted:
        for line in skip_lines(read.skipped):
            err.print(line, highlight=False)
        for notice in read.notices:
            err.print(notice.message(), markup=False, highlight=False)
    if not read.submitted and not read.errors:
        err.print(f"no events in {', '.join(path.name for path in paths)}")


def _read_ndjson(paths: list[Path]) -> tuple[list[Submitted], list[LineError]]:
    submitted: list[Submitted] = []
    errors: list[LineError] = []
    for path, label in zip(paths, file_labels(paths), strict=True):
        found, problems = read_ndjson_file(path, label)
        submitted.extend(found)
        errors.extend(problems)
    return submitted, errors


def publish(
    files: Annotated[list[Path], typer.Argument(exists=True, dir_okay=False, help="Event files.")],
    input_format: FormatOption = InputFormat.NDJSON,
    tenant: TenantOption = "clinic-a",
    actor: ActorOption = "fhir-import",
    local_times_in: LocalTimesOption = None,
    signing_key: SigningKeyOption = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="One JSON line per record: sent, not_sent, error, skipped or notice.",
        ),
    ] = False,
) -> None:
    """Validate events against the registered Avro schema and publish them (one result each),
    in the order `uac replay --file` folds them, so the stream raises the alerts it prints."""
    settings = Settings()
    signer = signer_from(signing_key)
    read = read_events(files, input_format, tenant, actor, local_times_in)
    report_reading(read, files, accounted=as_json)
    batch = in_processing_order(read.submitted)
    if as_json:
        _print_documents(input_documents(read))
    else:
        print_line_errors(read.errors, err)

    async def send() -> list[Published | NotSent]:
        async with publisher_of(settings, signer) as publisher:
            return await publisher.publish_all(batch)

    results = asyncio.run(send())
    if as_json:
        _print_documents(sent_documents(batch, results))
    else:
        _print_results(results)
    failed = len(read.errors) + sum(1 for result in results if isinstance(result, NotSent))
    if failed:
        err.print(f"{failed} record(s) not sent")
        raise typer.Exit(code=1)


def _print_documents(documents: Iterable[dict[str, Any]]) -> None:
    for document in documents:
        out.out(json_line(document, sort_keys=False), highlight=False)


def _print_results(results: list[Published | NotSent]) -> None:
    for result in results:
        if isinstance(result, Published):
            out.print(
                f"sent {result.origin} {result.event_id} -> partition {result.partition} offset {result.offset}"
            )
        else:
            err.print(
                styled("not sent", "red", f" {result.origin}: {result.reason}: {result.message}")
            )


def new_signing_key(
    path: Annotated[Path, typer.Argument(dir_okay=False, help="Where to write the private key.")],
) -> None:
    """Make an Ed25519 key pair for a producer: the private key goes to PATH (owner-only; an
    existing file is never overwritten), the public key is printed for the tenants file's
    `actor_keys`."""
    public_key = new_signing_key_file(path)
    out.print(f"private key written to {path}")
    out.print(f"public key (tenants file, actor_keys): {public_key}")


def replay(
    listed: Annotated[
        list[Path] | None,
        typer.Argument(
            exists=True,
            dir_okay=False,
            metavar="FILE",
            show_default=False,
            help="Event files (as --file).",
        ),
    ] = None,
    files: Annotated[
        list[Path] | None,
        typer.Option(
            "--file", exists=True, dir_okay=False, help="Event file(s); repeat for several."
        ),
    ] = None,
    input_format: FormatOption = InputFormat.NDJSON,
    tenant: TenantOption = "clinic-a",
    actor: ActorOption = "fhir-import",
    local_times_in: LocalTimesOption = None,
    from_kafka: Annotated[
        bool,
        typer.Option("--from-kafka", help="Rebuild from the accepted-events topic and compare."),
    ] = False,
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            metavar="TIME",
            help="Event files: then move every subject's time to TIME (ISO 8601, UTC if no zone; "
            "'now'), as the worker's clock does, so validity windows that closed or opened by "
            "then resolve or raise their alerts. Without it the output depends on the files only.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Fold events through gate + fold + rules (--file), or rebuild every subject from Kafka and
    compare its state_hash with the live state (--from-kafka). Event files are named by
    `--file` options, listed after the options (a shell glob), or both."""
    inputs = [*(files or []), *(listed or [])]
    if bool(inputs) == from_kafka:
        err.print("give exactly one of event files (FILE... or --file FILE) or --from-kafka")
        raise typer.Exit(code=2)
    for option, given in (("--as-of", as_of), ("--local-times-in", local_times_in)):
        if from_kafka and given is not None:
            err.print(f"{option} applies to event files; --from-kafka compares with the live state")
            raise typer.Exit(code=2)
    if inputs:
        now = datetime.now(UTC)
        moment = now if as_of == "now" else utc_time(as_of, "--as-of")
        if moment is not None and moment > now:
            raise typer.BadParameter(
                "a time not after now (the gate's clock)", param_hint="--as-of"
            )
        read = read_events(inputs, input_format, tenant, actor, local_times_in)
        report_reading(read, inputs)
        _replay_events(read.submitted, read.errors, now, moment, as_json)
    else:
        _replay_from_kafka(as_json)


def _replay_events(
    submitted: list[Submitted],
    errors: list[LineError],
    now: datetime,
    as_of: datetime | None,
    as_json: bool,
) -> None:
    settings = Settings()
    policy = load_gate_policy(
        settings.tenants_file,
        max_future_skew_seconds=settings.max_future_skew_seconds,
        max_event_bytes=settings.max_event_bytes,
    )

    def context_for(item: Submitted, owners: dict[str, str]) -> GateContext:
        return GateContext(
            now=now, policy=policy, encoded_size=item.encoded_size, claim_owners=owners
        )

    rules = default_rules(load_bundled_knowledge())
    with collector_paused():
        results = replay_batch(submitted, context_for, rules)
        if as_of is not None:
            advance_clocks(results, as_of, context_for, rules)
    if as_of is not None:
        _note_later_subjects(results, as_of)
    print_line_errors(errors, err)
    (print_json if as_json else print_human)(results, out)
    decisions = [decision for result in results.values() for _, decision in result.rejections]
    repeats = sum(1 for decision in decisions if decision.reasons == _REPEAT)
    rejected = len(decisions) - repeats
    if repeats:
        err.print(f"{repeats} exact repeat(s) of accepted events changed nothing")
    if errors or rejected:
        err.print(f"{len(errors)} input error(s), {rejected} rejected event(s)")
        raise typer.Exit(code=1)


def _note_later_subjects(results: dict[str, SubjectResult], as_of: datetime) -> None:
    """Say which subjects' own time is past `--as-of`: a subject's clock never moves back, so
    their output is as their events left them, not as they stood at that time."""
    later = sorted(
        key
        for key, result in results.items()
        if result.state.as_of is not None and result.state.as_of > as_of
    )
    if not later:
        return
    named = ", ".join(later[:3]) + (f" and {len(later) - 3} more" if len(later) > 3 else "")
    err.print(
        f"--as-of {as_of.isoformat()} is before the latest event of {named}: a subject's time "
        "never moves back, so it is shown as its events leave it (`uac state --as-of` shows a "
        "subject as it stood at a past time)",
        markup=False,
    )


_REPEAT = (ReasonCode.DUPLICATE_EVENT_ID,)
"""An event sent again exactly as it was accepted: refused, changes nothing, and is no failure
of the input (an export imported twice, a retried send)."""


def _replay_from_kafka(as_json: bool) -> None:
    settings = Settings()
    bootstrap, topics = bootstrap_servers(settings), topics_of(settings)
    sealer = reading_sealer(settings)

    async def compare() -> tuple[int, list[Difference]]:
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
            out.print(_difference_line(difference), highlight=False)
    if found:
        raise typer.Exit(code=1)


def _difference_line(difference: Difference) -> str:
    hashes = f"{(difference.live_hash or '-')[:12]} / {(difference.rebuilt_hash or '-')[:12]}"
    versions = f"{difference.live_version} / {difference.rebuilt_version}"
    return (
        f"  {difference.key}: {difference.cause} (checkpoint / rebuilt: version {versions}, "
        f"hash {hashes})"
    )
