"""`uac explain ALERT_ID`: an alert's lifecycle and the lineage of its evidence, from fixed
queries, purpose-bound and audited like every read."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final
from uuid import UUID

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError

from streams.analytics import (
    DEFAULT_EXEMPT_PURPOSES,
    QUERY_SETTINGS,
    QueryFailed,
    Read,
    audit_read,
    drain,
    engine_message,
    json_value,
    new_read,
    one_at_a_time,
)
from streams.query_relations import TENANT_PARAMETER
from streams.sql_guard import with_relations


class AlertNotFound(LookupError):
    """No alert with this id is stored for the tenant."""


_LIFECYCLE_COLUMNS: Final = (
    "lifecycle_id",
    "subject_id",
    "rule_id",
    "rule_version",
    "status",
    "severity",
    "occurred_at",
    "trigger_event_id",
    "reason",
    "cause",
    "evidence",
)
_ALERT_LIFECYCLE: Final = f"""SELECT {", ".join(_LIFECYCLE_COLUMNS)}
FROM uac.alerts FINAL
WHERE tenant_id = {{tenant:String}} AND alert_id = {{alert_id:UUID}}
    AND purpose = {{purpose:String}}
ORDER BY source_partition, source_offset"""  # noqa: S608
"""An alert's lifecycle records of the purpose of the read (every record of an alert carries
its purpose; the filter keeps records another purpose wrote under one id, before alert ids
named their purpose, out of the chain)."""

_LINEAGE_EVENTS: Final = """SELECT toString(event_id), type, origin, source_ref, occurred_at,
    source_topic, source_partition, source_offset, accepted_partition, accepted_offset
FROM uac.events FINAL
WHERE tenant_id = {tenant:String} AND subject_id = {subject:String}
    AND toString(event_id) IN {event_ids:Array(String)}
ORDER BY occurred_at, event_id"""
"""The alert's events: its subject's only (an event id is unique within a subject; a producer
may have reused one for another subject)."""


ACCEPTED_SUFFIX: Final = ".accepted"
"""The accepted topic is the events topic's name plus this suffix (`streams.topics.Topics`)."""


def explain(
    client: Client,
    alert_id: str,
    tenant: str | None,
    *,
    purpose: str | None = None,
    exempt_purposes: frozenset[str] = DEFAULT_EXEMPT_PURPOSES,
    actor: str | None = None,
    erased: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Why an alert fired: every lifecycle record, its rule, the cause claims, and the lineage
    of every evidence and trigger event (type, origin, source_ref, time, and where it sits on
    the events topic and the accepted topic). Audited as an `explain` read of the subject.
    The alert must be readable for the purpose exactly as in the `alerts` relation (consent-
    exempt purpose, or the subject's consent). Raises TenantRequired, AlertNotFound if the
    tenant has no such alert for the purpose to read: one the purpose may not read is not
    told apart from one that does not exist, since an alert id is computed from the subject and
    its claims and the difference would tell whether that subject has the conflict. An alert of
    a subject whose erasure is under way (`erased`) is not found either."""
    read = new_read(tenant, purpose, exempt_purposes, actor, erased)
    alert = _alert_uuid(alert_id)
    with one_at_a_time(client):
        try:
            lifecycle = _lifecycle(client, alert, read.tenant, read.purpose)
            readable = bool(lifecycle) and _alert_readable(client, alert, read)
            roles = _event_roles(lifecycle)
            subject = lifecycle[0]["subject_id"] if lifecycle else ""
            events = _lineage(client, sorted(roles), read.tenant, subject) if readable else []
        except ClickHouseError as error:
            drain(client)
            raise QueryFailed(engine_message(error)) from error
        if not readable:
            raise AlertNotFound(
                f"no alert {alert} that purpose {read.purpose!r} may read is stored for tenant "
                f"{read.tenant!r} (alerts are special category: readable for the tenant's "
                "consent-exempt purposes, or with the subject's consent for the purpose, and "
                "only for the purpose the claims behind it were recorded for)"
            )
        audit_read(client, read.audited("explain", f"alert:{alert}", lifecycle[0]["subject_id"]))
    return _explanation(str(alert), read.tenant, read.purpose, lifecycle, roles, events)


def _alert_readable(client: Client, alert: UUID, read: Read) -> bool:
    """Whether the purpose-bound `alerts` relation shows this alert to the read."""
    sql = with_relations(
        "SELECT count() FROM alerts WHERE alert_id = {alert_id:UUID}",
        purpose_exempt=read.purpose_exempt,
    )
    parameters = {**read.parameters, "alert_id": str(alert)}
    result = client.query(sql, parameters=parameters, settings=dict(QUERY_SETTINGS))
    return int(result.result_rows[0][0]) > 0


def _alert_uuid(alert_id: str) -> UUID:
    try:
        return UUID(alert_id)
    except ValueError:
        raise AlertNotFound(f"{alert_id!r} is not an alert id (a UUID)") from None


def _lifecycle(client: Client, alert_id: UUID, tenant: str, purpose: str) -> list[dict[str, Any]]:
    parameters = {TENANT_PARAMETER: tenant, "alert_id": str(alert_id), "purpose": purpose}
    result = client.query(_ALERT_LIFECYCLE, parameters=parameters)
    records = [dict(zip(_LIFECYCLE_COLUMNS, row, strict=True)) for row in result.result_rows]
    for record in records:
        record["evidence"] = json.loads(record["evidence"])
    return records


def _event_roles(lifecycle: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Event id -> its roles in the alert (evidence roles, and `trigger`)."""
    roles: dict[str, list[str]] = {}
    for record in lifecycle:
        for item in record["evidence"]:
            _add_role(roles, str(item["event_id"]), str(item["role"]))
        _add_role(roles, str(record["trigger_event_id"]), "trigger")
    return roles


def _add_role(roles: dict[str, list[str]], event_id: str, role: str) -> None:
    known = roles.setdefault(event_id, [])
    if role not in known:
        known.append(role)


def _lineage(
    client: Client, event_ids: list[str], tenant: str, subject: str
) -> list[dict[str, Any]]:
    parameters = {TENANT_PARAMETER: tenant, "subject": subject, "event_ids": event_ids}
    result = client.query(_LINEAGE_EVENTS, parameters=parameters)
    return [_lineage_event(row) for row in result.result_rows]


def _lineage_event(row: Sequence[Any]) -> dict[str, Any]:
    event_id, kind, origin, source_ref, occurred_at, topic, partition, offset = row[:8]
    accepted_partition, accepted_offset = row[8:]
    return {
        "event_id": event_id,
        "type": kind,
        "origin": origin,
        "source_ref": source_ref,
        "occurred_at": json_value(occurred_at),
        "events_topic": {"topic": topic, "partition": partition, "offset": offset},
        "accepted_topic": {
            "topic": topic + ACCEPTED_SUFFIX,
            "partition": accepted_partition,
            "offset": accepted_offset,
        },
    }


def _explanation(
    alert_id: str,
    tenant: str,
    purpose: str,
    lifecycle: Sequence[Mapping[str, Any]],
    roles: Mapping[str, list[str]],
    events: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    first = lifecycle[0]
    found = {event["event_id"] for event in events}
    return {
        "alert_id": alert_id,
        "tenant_id": tenant,
        "subject_id": first["subject_id"],
        "purpose": purpose,
        "rule": {"id": first["rule_id"], "version": first["rule_version"]},
        "cause": list(first["cause"]),
        "lifecycle": [
            {
                name: json_value(record[name])
                for name in (
                    "lifecycle_id",
                    "status",
                    "severity",
                    "occurred_at",
                    "trigger_event_id",
                    "reason",
                )
            }
            for record in lifecycle
        ],
        "evidence": _unique(item for record in lifecycle for item in record["evidence"]),
        "events": [{**event, "roles": roles[event["event_id"]]} for event in events],
        "missing_event_ids": sorted(set(roles) - found),
    }


def _unique(items: Iterator[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen
