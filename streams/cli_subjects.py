"""The `uac` commands over personal data: analyst queries, alerts, one subject's state, export,
erasure, and the explanation of an alert. Every read of personal data is audited."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from projections.characters import unprintable_characters
from projections.document import CorruptCheckpoint, state_from_checkpoint, state_hash
from projections.gate import TenantPolicy
from projections.reads import readable_document, readable_document_as_of
from projections.secrets import FreeText, secrets_in_text
from projections.state import UserState, initial_state
from schemas.alerts import Alert
from schemas.codec import alert_codec
from schemas.events import DEFAULT_PURPOSE, ErasureRequested, Event, EventType, Origin
from streams.alert_output import (
    AlertFormat,
    print_alert,
    print_alerts,
    readable_alerts,
)
from streams.analytics import unknown_tenant
from streams.audit import publish_read, read_record, reader_identity
from streams.cli_common import (
    EXIT_FAILED,
    READ_ERRORS,
    PurposeOption,
    ReaderOption,
    SigningKeyOption,
    err,
    out,
    publisher_of,
    read_failed,
    reading_sealer,
    signer_from,
    topics_of,
    utc_time,
)
from streams.console_text import styled
from streams.explanation_view import explanation_view
from streams.export import erasure_receipts, export_document, write_csv, write_json
from streams.json_out import json_line
from streams.kafka_address import bootstrap_servers
from streams.keys import FileKeyStore, SubjectErased
from streams.publisher import Published
from streams.query_clients import open_query_client
from streams.rebuild import checkpoint_of_subject
from streams.result_view import result_view
from streams.sealing import Sealer, readable
from streams.settings import Settings
from streams.signatures import Signer
from streams.state_view import state_view
from streams.tenants import gate_policy_of
from streams.topic_reader import follow_topic, read_topic


class ExportFormat(StrEnum):
    JSON = "json"
    CSV = "csv"


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
    out.print(result_view(result, out.width))


def alerts(
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant whose alerts to read.")],
    purpose: PurposeOption = DEFAULT_PURPOSE,
    actor: ReaderOption = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new alerts.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON alert per line (= --format json).")
    ] = False,
    output: Annotated[
        AlertFormat | None,
        typer.Option(
            "--format",
            help="table (the default); json (one alert per line); fhir (a Bundle of "
            "DetectedIssue resources, with --follow one DetectedIssue per line).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Print one tenant's alert lifecycle records from the alerts topic, optionally following
    it (audited; alerts are health data, read for a purpose the tenant may use them for: those
    whose claims were recorded for that purpose)."""
    if as_json and output not in (None, AlertFormat.JSON):
        raise typer.BadParameter(
            f"not with --format {output} (--json is --format json)", param_hint="--json"
        )
    settings = Settings()
    refusal = _alerts_refusal(_tenant_policy(settings, tenant), tenant, purpose)
    if refusal is not None:
        err.print(f"refused: {refusal}")
        raise typer.Exit(code=2)
    bootstrap, topic = bootstrap_servers(settings), topics_of(settings).alerts
    sealer = reading_sealer(settings)
    output = AlertFormat.JSON if as_json else output or AlertFormat.TABLE
    if not follow:
        records = asyncio.run(read_topic(bootstrap, topic))
        _audit(settings, tenant, None, actor, purpose, "alerts")
        print_alerts(_of_tenant(records, tenant, purpose, sealer), out, output)
        return
    _audit(settings, tenant, None, actor, purpose, "alerts-follow")

    identified: dict[uuid.UUID, datetime] = {}

    async def tail() -> None:
        async for record in follow_topic(bootstrap, topic, asyncio.Event()):
            for alert in _of_tenant([record], tenant, purpose, sealer):
                print_alert(alert, out, output, identified)

    asyncio.run(tail())


def _alerts_refusal(policy: TenantPolicy, tenant: str, purpose: str) -> str | None:
    """Why this read of the alerts topic may not run: a purpose without a legal basis for every
    subject (alerts are special-category data; only the tenant's consent-exempt purposes have
    one without each subject's consent, which `uac query` checks per subject)."""
    if purpose not in policy.consent_exempt_purposes:
        exempt = ", ".join(sorted(policy.consent_exempt_purposes)) or "none"
        return (
            f"alerts are health data and purpose {purpose!r} is not consent-exempt for tenant "
            f"{tenant!r} (exempt: {exempt}); `uac query` reads the alerts of the subjects whose "
            "consent allows it"
        )
    return None


def _of_tenant(records: Iterable[Any], tenant: str, purpose: str, sealer: Sealer) -> list[Alert]:
    """The tenant's alerts for `purpose` among the records: only records keyed to one of its
    subjects are opened at all (another tenant's are not decrypted), and each is checked for the
    tenant and for the purpose of the claims behind it."""
    prefix = f"{tenant}:".encode()
    ours = [record for record in records if (record.key or b"").startswith(prefix)]
    return [
        alert
        for alert in readable_alerts(ours, sealer)
        if alert.tenant_id == tenant and alert.purpose == purpose
    ]


def _alerts_of(records: list[Any], sealer: Sealer) -> list[Alert]:
    codec = alert_codec()
    return [
        codec.decode(framed) for record in records if (framed := readable(sealer, record.value))
    ]


def _subject_state(settings: Settings, key: str, sealer: Sealer) -> UserState | None:
    """The subject's state rebuilt from its latest checkpoint (None: no state); a checkpoint
    that does not match its hash is a clear failure (exit 3), never a state shown."""
    checkpoint = asyncio.run(
        checkpoint_of_subject(
            bootstrap_servers(settings),
            topics_of(settings).state,
            key,
            sealer,
        )
    )
    if checkpoint is None:
        return None
    try:
        return state_from_checkpoint(checkpoint)
    except CorruptCheckpoint as error:
        err.print(styled("failed", "red", f": {error}; `uac replay --from-kafka` rebuilds it"))
        raise typer.Exit(code=EXIT_FAILED) from None


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
    asyncio.run(publish_read(bootstrap_servers(settings), topics_of(settings).audit, record))


def _tenant_policy(settings: Settings, tenant: str) -> TenantPolicy:
    """The tenant's policy in the tenants file; a tenant it does not name is refused (exit 2)
    before anything is read, as `uac query` refuses it."""
    policy = gate_policy_of(settings).tenants.get(tenant)
    if policy is None:
        raise read_failed(unknown_tenant(tenant))
    return policy


def state(
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant id.")],
    subject: Annotated[str, typer.Option("--subject", help="Subject id.")],
    purpose: PurposeOption = DEFAULT_PURPOSE,
    actor: ReaderOption = None,
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            metavar="TIME",
            help="Show the subject as it stood at TIME (ISO 8601, UTC if no zone): the claims "
            "in force then; what --purpose may use is judged now.",
        ),
    ] = None,
    known_at: Annotated[
        str | None,
        typer.Option(
            "--known-at",
            metavar="TIME",
            help="With --as-of: count only events recorded by TIME (what was known then).",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the state document as JSON.")
    ] = False,
) -> None:
    """Show what one subject's memory holds that `--purpose` may use (read is audited), now or
    as it stood at a past time (--as-of, --known-at)."""
    if known_at is not None and as_of is None:
        raise typer.BadParameter("needs --as-of (the valid time to show)", param_hint="--known-at")
    valid_time, recorded_by = utc_time(as_of, "--as-of"), utc_time(known_at, "--known-at")
    settings = Settings()
    tenant_policy = _tenant_policy(settings, tenant)
    subject_state = _subject_state(settings, f"{tenant}:{subject}", reading_sealer(settings))
    _audit(settings, tenant, subject, actor, purpose, "state")
    if subject_state is None:
        err.print(f"no state for {tenant}:{subject}")
        raise typer.Exit(code=4)
    now = datetime.now(UTC)
    document = (
        readable_document(subject_state, purpose, tenant_policy, read_at=now)
        if valid_time is None
        else readable_document_as_of(
            subject_state, valid_time, now, recorded_by, purpose, tenant_policy
        )
    )
    document["state_hash"] = state_hash(subject_state)
    if as_json:
        out.out(json_line(document), highlight=False)
    else:
        out.print(state_view(document))


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
    _tenant_policy(settings, tenant)
    key = f"{tenant}:{subject}"
    sealer = reading_sealer(settings)
    found = _subject_state(settings, key, sealer)
    _audit(settings, tenant, subject, actor, "subject_access", "export")
    try:
        receipts = erasure_receipts(settings, tenant, subject, reader_identity(actor))
    except READ_ERRORS as error:
        raise read_failed(error) from None
    if found is None and not receipts:
        if FileKeyStore(settings.keys_dir).is_destroyed(key):
            err.print(
                f"the erasure of {key} is under way: its key is destroyed and its state removed, "
                "but no sink has yet removed its rows from ClickHouse and written the receipt "
                "(is `uac sink` running?); export again once it has"
            )
        else:
            err.print(f"nothing is held about {key}")
        raise typer.Exit(code=4)
    subject_state = found if found is not None else _erased_state(tenant, subject)
    alerts = [
        a
        for a in _alerts_of(
            asyncio.run(read_topic(bootstrap_servers(settings), topics_of(settings).alerts)),
            sealer,
        )
        if a.key == key
    ]
    document = export_document(subject_state, alerts, receipts, datetime.now(UTC))
    try:
        written = (write_json if output is ExportFormat.JSON else write_csv)(document, out_dir)
    except OSError as error:
        reason = error.strerror or type(error).__name__
        err.print(styled("failed", "red", f": cannot write the export to {out_dir}: {reason}"))
        raise typer.Exit(code=EXIT_FAILED) from None
    for path in written:
        out.print(f"wrote {path}")


def _erasure_refusal(
    policy: TenantPolicy | None, tenant: str, actor: str, signer: Signer | None
) -> str | None:
    """Why the gate would refuse this erasure request (by the tenants file this command reads),
    so it is said here instead of a request that looks sent and erases nothing."""
    if policy is None:
        return str(unknown_tenant(tenant))
    if actor not in policy.actors:
        return f"actor {actor!r} may not write for tenant {tenant!r} (give --actor)"
    if actor in policy.signing_actors and signer is None:
        return f"actor {actor!r} signs its events: give --signing-key"
    return None


def _unknown_subject(settings: Settings, tenant: str, subject: str) -> str | None:
    """Why erasing this subject would erase nothing but its id: every personal event is sealed
    with its subject's key, so a subject without one (never created, or a mistyped id) has no
    event the system holds, and an erasure is irreversible: the id would be refused for good.
    Not said when the gate admits unsealed events (`UAC_REQUIRE_SEALED=false`): a subject may
    then be held without a key."""
    if not settings.require_sealed:
        return None
    keys = FileKeyStore(settings.keys_dir)
    name = f"{tenant}:{subject}"
    if keys.key_for(name) is not None or keys.is_destroyed(name):
        return None
    return (
        f"no event of {name} was ever sealed (it has no key in {settings.keys_dir}): the "
        "system holds nothing of it, and erasing would refuse its id for good; check the id, "
        "or give --force to erase it anyway"
    )


def _erased_state(tenant: str, subject: str) -> UserState:
    """What is held of a subject with an erasure receipt and no state (its state was
    tombstoned): nothing, and that it was erased."""
    return initial_state(tenant, subject).model_copy(update={"erased": True})


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
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Erase even a subject that has no key (no event of it was ever sealed): the "
            "records refused before sealing that name it go, and its id is refused from then on.",
        ),
    ] = False,
) -> None:
    """Erase a subject everywhere: the worker records it in the erasure ledger, destroys the
    subject's key (shredding every Kafka copy), tombstones its state; the sink deletes its rows
    from ClickHouse and writes a receipt."""
    found = secrets_in_text("--reason", reason or "")
    if found:
        raise typer.BadParameter(
            f"it looks like it holds {found[0].kind}: the gate would refuse the request "
            "(secret_in_text) and the subject would not be erased; reword it",
            param_hint="--reason",
        )
    now = datetime.now(UTC)
    try:
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
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(map(str, found['loc']))}: {found['msg']}" for found in error.errors()
        )
        err.print(f"refused: {problems}; no such subject can be held, nothing was sent")
        raise typer.Exit(code=2) from None
    settings = Settings()
    signer = signer_from(signing_key)
    refusal = _erasure_refusal(gate_policy_of(settings).tenants.get(tenant), tenant, actor, signer)
    odd = unprintable_characters(request, FreeText({}))
    if refusal is None and odd:
        refusal = f"{odd[0].describe()}: the gate would refuse the request (invalid_record)"
    if refusal is None and not force:
        refusal = _unknown_subject(settings, tenant, subject)
    if refusal is not None:
        err.print(f"refused: {refusal}; nothing was sent")
        raise typer.Exit(code=2)

    async def send() -> Published:
        async with publisher_of(settings, signer) as publisher:
            return await publisher.publish(request)

    try:
        sent = asyncio.run(send())
    except SubjectErased:
        out.print(f"{tenant}:{subject} is already erased (its key is destroyed); nothing to do.")
        return
    out.print(
        f"erasure of {tenant}:{subject} requested (event {sent.event_id}); follow it with `uac query`."
    )


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
        out.print(explanation_view(chain))
