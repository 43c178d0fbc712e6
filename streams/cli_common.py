"""What the `uac` commands share: the consoles, exit codes, options, and the clients the settings
name."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from enum import StrEnum
from pathlib import Path
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import typer

from streams.alert_lineage import AlertNotFound
from streams.analytics import QueryFailed, TenantRequired, read_purpose
from streams.console_text import DataConsole, styled
from streams.kafka_address import bootstrap_servers
from streams.keys import FileKeyStore
from streams.ledger import load_ledger, reconcile
from streams.publisher import EventPublisher
from streams.query_clients import SinkUnavailable
from streams.sealing import Sealer
from streams.settings import Settings
from streams.signatures import Signer
from streams.sql_guard import QueryRefused
from streams.topics import Topics

out = DataConsole()
err = DataConsole(stderr=True)

READ_ERRORS = (QueryRefused, TenantRequired, QueryFailed, AlertNotFound, SinkUnavailable)
EXIT_FAILED = 3
"""The exit code after `failed: ...`: a query failed, or the sink or the broker did not answer."""


def read_failed(error: Exception) -> typer.Exit:
    """A clear one-line message and the exit code of a read that could not be served:
    2 refused (no tenant, a refused query or purpose), 3 the query failed or the sink did not
    answer, 4 no such alert."""
    if isinstance(error, QueryRefused | TenantRequired):
        err.print(styled("refused", "red", f": {error}"))
        return typer.Exit(code=2)
    if isinstance(error, AlertNotFound):
        err.print(str(error))
        return typer.Exit(code=4)
    err.print(styled("failed", "red", f": {error}"))
    return typer.Exit(code=EXIT_FAILED)


class InputFormat(StrEnum):
    NDJSON = "ndjson"
    FHIR = "fhir"


FormatOption = Annotated[
    InputFormat,
    typer.Option(
        "--format", help="ndjson: UaC events; fhir: FHIR R4 Bundles/resources/bulk NDJSON."
    ),
]
PurposeOption = Annotated[
    str,
    typer.Option(
        "--purpose",
        help="What the data will be used for (default: care); only claims it may use.",
        callback=read_purpose,
    ),
]
"""Every read's purpose: a blank one is the default `care`, as the query layer reads it (never a
read, nor an audit row, with an empty purpose)."""
ReaderOption = Annotated[
    str | None, typer.Option("--actor", help="Who reads (audited; default: your login).")
]
TenantOption = Annotated[
    str, typer.Option("--tenant", help="Tenant of FHIR input (events carry their own).")
]
ActorOption = Annotated[str, typer.Option("--actor", help="Actor that FHIR input is published as.")]
LocalTimesOption = Annotated[
    str | None,
    typer.Option(
        "--local-times-in",
        metavar="ZONE",
        help="FHIR input: read a time written without a zone (invalid FHIR, an error without "
        "this option) in ZONE, a time zone name (Europe/Berlin, UTC) or offset (+02:00).",
    ),
]
SigningKeyOption = Annotated[
    Path | None,
    typer.Option(
        "--signing-key",
        envvar="UAC_SIGNING_KEY_FILE",
        dir_okay=False,
        help="Sign every record with this Ed25519 private key (PEM; see new-signing-key).",
    ),
]


def signer_from(signing_key: Path | None) -> Signer | None:
    """The producer's key, loaded before anything is read or sent (an unusable one fails here)."""
    return None if signing_key is None else Signer.from_file(signing_key)


def publisher_of(settings: Settings, signer: Signer | None) -> EventPublisher:
    """The events topic's publisher of the settings: sealing, and signing with `signer`."""
    return EventPublisher(
        bootstrap_servers(settings),
        topics_of(settings).events,
        sealer_of(settings),
        topic_wait=settings.topic_wait_seconds,
        signer=signer,
    )


def topics_of(settings: Settings) -> Topics:
    return Topics(settings.topic_prefix, settings.partitions)


def sealer_of(settings: Settings) -> Sealer:
    return Sealer(FileKeyStore(settings.keys_dir))


def reading_sealer(settings: Settings) -> Sealer:
    """The sealer a command reads personal records with: first the key of every subject the
    erasure ledger names is destroyed again where the key store no longer records it (as the
    worker does when it starts), so a key store restored from a copy taken before an erasure
    opens nothing of that subject, from this read on."""
    keys = FileKeyStore(settings.keys_dir)
    erasures = topics_of(settings).erasures
    ledger = asyncio.run(load_ledger(bootstrap_servers(settings), erasures, keys))
    reconcile(ledger, keys)
    return Sealer(keys)


def zone_named(text: str | None, option: str) -> tzinfo | None:
    """The time zone a name (`Europe/Berlin`, `UTC`) or an offset (`+02:00`, `-05:30`) names."""
    if text is None:
        return None
    offset = _OFFSET.fullmatch(text)
    if offset is not None:
        sign = -1 if offset["sign"] == "-" else 1
        minutes = int(offset["hours"]) * 60 + int(offset["minutes"])
        if minutes < 24 * 60:
            return timezone(sign * timedelta(minutes=minutes))
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise typer.BadParameter(
            f"not a time zone name (Europe/Berlin, UTC) or offset (+02:00): {text!r}",
            param_hint=option,
        ) from None


_OFFSET = re.compile(r"(?P<sign>[+-])(?P<hours>\d{2}):(?P<minutes>[0-5]\d)")


def utc_time(text: str | None, option: str) -> datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(f"not an ISO 8601 time: {text!r}", param_hint=option) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
