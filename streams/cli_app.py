"""The `uac` command line: thin commands over the pure core and the wiring (the commands live
in `cli_producer`, `cli_subjects` and `cli_operations`; what they share in `cli_common`). Its
entry point, `streams.cli.main`, imports this module once it runs."""

from __future__ import annotations

import logging
from typing import Annotated

import typer
from aiokafka.errors import (
    GroupAuthorizationFailedError,
    KafkaConnectionError,
    TopicAuthorizationFailedError,
)
from pydantic import ValidationError

from rules.knowledge.bundled import load_bundled_knowledge
from rules.knowledge.errors import KnowledgeDataError
from rules.knowledge.model import Coding
from rules.knowledge.report import check_drug as judge_drug
from rules.knowledge.tables import parse_coding
from schemas.errors import RegistryUnavailable
from schemas.registry import use_registry
from streams import kafka_config
from streams.checkout import CheckoutFileMissing
from streams.cli_common import (
    EXIT_FAILED,
    err,
    out,
)
from streams.cli_operations import (
    check_log_command,
    kafka_start,
    kafka_status,
    kafka_stop,
    lag_command,
    redrive_command,
    rejudge_command,
    sink,
    worker,
)
from streams.cli_producer import (
    new_signing_key,
    publish,
    replay,
)
from streams.cli_subjects import (
    alerts,
    erase,
    explain,
    export,
    query,
    state,
)
from streams.console_text import styled
from streams.demo import run_demo
from streams.group_access import GroupNotAuthorized, not_authorized
from streams.json_out import json_line
from streams.kafka_address import KafkaNotFound
from streams.kafka_security import KafkaSecurity, KafkaSecurityError, use_kafka_security
from streams.ports import PortUnavailable
from streams.schema_registry import RegistryRefused, registry_of
from streams.settings import Settings
from streams.signatures import SigningKeyError
from streams.sink import SinkAlreadyRunning
from streams.tenants import TenantsFileError
from streams.topic_reader import TopicMissing, TopicNotAuthorized
from streams.topics import TopicMismatch, TopicsNotCreated

app = typer.Typer(no_args_is_help=True, add_completion=False)
kafka_app = typer.Typer(
    no_args_is_help=True, help="The local Apache Kafka broker (no Docker needed)."
)
app.add_typer(kafka_app, name="kafka")


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
            err.print(styled("invalid setting", "red", f" {name}{message}"))
        raise typer.Exit(code=EXIT_FAILED) from None
    use_registry(registry_of(settings))
    try:
        use_kafka_security(KafkaSecurity.of(settings).checked())
    except KafkaSecurityError as error:
        err.print(styled("invalid setting", "red", f" {error}"))
        raise typer.Exit(code=EXIT_FAILED) from None


def demo() -> None:
    """The main job on embedded defaults: local Kafka, worker and sink, the sample events,
    alerts and analyst answers; stops everything it started."""
    run_demo(out)


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
            help="Allergen coding system|code[|display] (rxnorm, ndc, snomed, cvx or a URI) or "
            "system:code (rxnorm:723); repeatable.",
        ),
    ] = None,
    drug_codes: Annotated[
        list[str] | None,
        typer.Option(
            "--drug-code",
            help="Drug coding system|code[|display], e.g. rxnorm|723, rxnorm:723 or cvx|21; "
            "repeatable.",
        ),
    ] = None,
    reactions: Annotated[
        list[str] | None,
        typer.Option(
            "--reaction",
            help="A recorded reaction of the allergy (its manifestation, e.g. "
            "'Stevens-Johnson syndrome'); repeatable.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
) -> None:
    """Judge one allergy/drug pair with the drug knowledge layer (by name, code, or both)."""
    allergen, allergen_codings = _named_or_coded(allergy, allergy_codes or [], "allergy")
    medicine, medicine_codings = _named_or_coded(drug, drug_codes or [], "drug")
    verdict = judge_drug(
        load_bundled_knowledge(),
        allergen,
        medicine,
        allergen_codings,
        medicine_codings,
        tuple(reactions or ()),
    )
    if as_json:
        out.out(json_line(verdict), highlight=False)
        return
    for name, value in verdict.items():
        out.print(f"{name:>18}: {value}")


def _named_or_coded(
    name: str | None, codes: list[str], option: str
) -> tuple[str, tuple[Coding, ...]]:
    """The name and codings of one side of a check; without a name, the first display of its
    codes names it, else the codes themselves."""
    try:
        codings = tuple(parse_coding(code) for code in codes)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint=f"--{option}-code") from None
    if not (name or "").strip() and not codings:
        raise typer.BadParameter("give a name or a code", param_hint=f"--{option}")
    displays = [coding.display for coding in codings if coding.display]
    return (name or "").strip() or next(iter(displays), " ".join(codes)), codings


def run() -> None:
    """The `uac` command: a broker that is unknown or does not answer, a pipeline whose topics
    do not exist yet, an account the cluster's ACLs refuse (a topic or a consumer group), a
    worker's or sink's HTTP port that is taken, a tenants file, signing key or drug knowledge
    data that cannot be used, a local Kafka that cannot be launched, or a file of the source
    checkout that is not there, is a one-line message and exit code 3, not a traceback."""
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
        SinkAlreadyRunning,
        TenantsFileError,
        TopicMismatch,
        TopicsNotCreated,
    ) as error:
        err.print(styled("failed", "red", f": {error}"))
        raise SystemExit(EXIT_FAILED) from None
    except GroupAuthorizationFailedError as error:
        group = str(error.args[0]) if error.args else None
        err.print(styled("failed", "red", f": {not_authorized(group)}"))
        raise SystemExit(EXIT_FAILED) from None
    except KnowledgeDataError as error:
        err.print(styled("failed", "red", f": the drug knowledge data cannot be used: {error}"))
        raise SystemExit(EXIT_FAILED) from None


# The commands, in the order `uac --help` lists them.
kafka_app.command("start")(kafka_start)
kafka_app.command("stop")(kafka_stop)
kafka_app.command("status")(kafka_status)
app.command()(worker)
app.command()(sink)
app.command()(query)
app.command()(demo)
app.command()(publish)
app.command()(new_signing_key)
app.command()(alerts)
app.command()(state)
app.command()(export)
app.command()(erase)
app.command()(explain)
app.command()(replay)
app.command("rejudge")(rejudge_command)
app.command("redrive")(redrive_command)
app.command("check-log")(check_log_command)
app.command("lag")(lag_command)
app.command("check-drug")(check_drug)
