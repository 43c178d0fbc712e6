"""Where queries run: a ClickHouse server, the running sink (over HTTP), or the chDB path.

chDB allows one process per data path. While the pipeline runs, the sink process owns the path
and serves `POST /query` and `POST /explain`; `open_query_client` picks a server, the running
sink, or the chDB path directly, so the same call works whether the pipeline is running or
stopped."""

from __future__ import annotations

import hmac
import http.client
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Protocol, Self

from clickhouse_connect.driver.client import Client

from projections.gate import GatePolicy
from streams.alert_lineage import AlertNotFound, explain
from streams.analytics import (
    DEFAULT_EXEMPT_PURPOSES,
    QUERY_SETTINGS,
    QueryFailed,
    QueryResult,
    TenantRequired,
    default_actor,
    exempt_purposes_of,
    query,
    require_tenant,
)
from streams.clickhouse import connect
from streams.keys import FileKeyStore
from streams.settings import Settings
from streams.sql_guard import QueryRefused
from streams.tenants import load_gate_policy

SINK_RECORD: Final = "sink.json"
ANSWER_MARGIN_SECONDS: Final = 30.0
"""Besides the engine's time: the read's audit row, the HTTP round trip, a busy machine."""


def sink_answer_seconds() -> float:
    """How long a command waits for the sink to answer a read: the engine stops a read's check
    (the analyzer's, which evaluates scalar subqueries) and then its run each at the query time
    limit (`max_execution_time`), so a read that runs too long comes back with the engine's
    `Timeout exceeded` well before this; only a sink that does not answer at all is reported as
    such (`did not answer: timed out`)."""
    return 2 * float(QUERY_SETTINGS["max_execution_time"]) + ANSWER_MARGIN_SECONDS


class SinkUnavailable(RuntimeError):
    """`sink.json` names a running sink that does not answer."""


@dataclass(frozen=True)
class SinkAddress:
    """A running sink, as recorded in `{home}/sink.json` (readable by its owner only)."""

    pid: int
    host: str
    port: int
    read_token: str = field(repr=False)


UNAUTHORIZED_READ: Final = (
    "the sink answers reads only with the read token of its sink.json (the UAC_HOME it runs in)"
)


def bearer_matches(header: str | None, token: str) -> bool:
    """Whether an Authorization header carries `token` (compared in constant time)."""
    expected = f"Bearer {token}".encode()
    return header is not None and hmac.compare_digest(header.encode(), expected)


def sink_record_path(home: Path) -> Path:
    return home / SINK_RECORD


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running_sink(home: Path) -> SinkAddress | None:
    """The sink recorded under `home` if its process is alive, else None (a stale record)."""
    try:
        record = json.loads(sink_record_path(home).read_text(encoding="utf-8"))
        token = str(record.get("read_token", ""))
        address = SinkAddress(int(record["pid"]), str(record["host"]), int(record["port"]), token)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return address if _pid_alive(address.pid) else None


def tenant_exempt_purposes(settings: Settings) -> dict[str, frozenset[str]]:
    """Each tenant's consent-exempt purposes, from the tenants file the gate enforces."""
    return exempt_purposes_in(load_gate_policy(settings.tenants_file))


def exempt_purposes_in(policy: GatePolicy) -> dict[str, frozenset[str]]:
    """Each tenant's consent-exempt purposes under a gate policy."""
    return {name: tenant.consent_exempt_purposes for name, tenant in policy.tenants.items()}


_REMOTE_ERRORS: Final[dict[str, type[Exception]]] = {
    "unauthorized": QueryRefused,
    "tenant_required": TenantRequired,
    "query_refused": QueryRefused,
    "query_failed": QueryFailed,
    "alert_not_found": AlertNotFound,
}


def _post(address: SinkAddress, path: str, body: dict[str, Any]) -> Any:
    """POST a JSON body to the sink and return its JSON answer (errors re-raised as ours),
    waiting `sink_answer_seconds()` for it."""
    connection = http.client.HTTPConnection(
        address.host, address.port, timeout=sink_answer_seconds()
    )
    try:
        payload = json.dumps(body).encode("utf-8")
        headers = {
            "Content-Type": "application/json",
            "Authorization": f"Bearer {address.read_token}",
        }
        connection.request("POST", path, payload, headers)
        response = connection.getresponse()
        document = json.loads(response.read())
    except (OSError, http.client.HTTPException, ValueError) as error:
        raise SinkUnavailable(f"the sink on port {address.port} did not answer: {error}") from error
    finally:
        connection.close()
    if response.status != 200:
        error_type = _REMOTE_ERRORS.get(str(document.get("error")), QueryFailed)
        raise error_type(str(document.get("message", f"HTTP {response.status}")))
    return document


def post_query(
    address: SinkAddress,
    sql: str,
    tenant: str,
    purpose: str | None = None,
    *,
    actor: str | None = None,
) -> QueryResult:
    """POST the query to a sink's `/query` and return its result."""
    body = _read_request({"sql": sql}, tenant, purpose, actor)
    return QueryResult.from_json(_post(address, "/query", body))


def post_explain(
    address: SinkAddress,
    alert_id: str,
    tenant: str,
    purpose: str | None = None,
    *,
    actor: str | None = None,
) -> dict[str, Any]:
    """POST an alert id to a sink's `/explain` and return the explanation."""
    body = _read_request({"alert_id": alert_id}, tenant, purpose, actor)
    explanation: dict[str, Any] = _post(address, "/explain", body)
    return explanation


def _read_request(
    asked: dict[str, str], tenant: str, purpose: str | None, actor: str | None
) -> dict[str, Any]:
    """The JSON body of a read the sink serves: what is asked, and who reads whose data for
    what purpose (the operating-system user when no actor is named)."""
    return {**asked, "tenant": tenant, "purpose": purpose, "actor": actor or default_actor()}


def query_via_sink(
    home: Path,
    sql: str,
    tenant: str | None,
    purpose: str | None = None,
    *,
    actor: str | None = None,
) -> QueryResult:
    """Run the query in the sink that owns the chDB path (it must be running)."""
    tenant = require_tenant(tenant)
    address = running_sink(home)
    if address is None:
        raise SinkUnavailable(f"no running sink is recorded in {sink_record_path(home)}")
    return post_query(address, sql, tenant, purpose, actor=actor)


class QueryClient(Protocol):
    def query(
        self, sql: str, tenant: str | None, purpose: str | None = None, *, actor: str | None = None
    ) -> QueryResult: ...

    def explain(
        self,
        alert_id: str,
        tenant: str | None,
        purpose: str | None = None,
        *,
        actor: str | None = None,
    ) -> dict[str, Any]: ...

    def close(self) -> None: ...


class _ClosedOnExit:
    """`with client:` closes the client."""

    def close(self) -> None:
        return None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class DirectQueries(_ClosedOnExit):
    """Queries on a ClickHouse client this object owns (a server, or the chDB path).

    `exempt_purposes` maps each tenant to its consent-exempt purposes (a read for a tenant
    missing from it is refused as UnknownTenant); without the mapping every tenant gets
    `DEFAULT_EXEMPT_PURPOSES`."""

    def __init__(
        self,
        client: Client,
        exempt_purposes: Mapping[str, frozenset[str]] | None = None,
        erased: Callable[[], frozenset[str]] = frozenset,
    ) -> None:
        self._client = client
        self._exempt = exempt_purposes
        self._erased = erased

    def exempt_purposes(self, tenant: str | None) -> frozenset[str]:
        if self._exempt is None:
            return DEFAULT_EXEMPT_PURPOSES
        return exempt_purposes_of(tenant, self._exempt)

    def query(
        self, sql: str, tenant: str | None, purpose: str | None = None, *, actor: str | None = None
    ) -> QueryResult:
        exempt = self.exempt_purposes(tenant)
        return query(self._client, sql, tenant, purpose, exempt, actor=actor, erased=self._erased())

    def explain(
        self,
        alert_id: str,
        tenant: str | None,
        purpose: str | None = None,
        *,
        actor: str | None = None,
    ) -> dict[str, Any]:
        exempt = self.exempt_purposes(tenant)
        return explain(
            self._client,
            alert_id,
            tenant,
            purpose=purpose,
            exempt_purposes=exempt,
            actor=actor,
            erased=self._erased(),
        )

    def close(self) -> None:
        self._client.close()


class SinkQueries(_ClosedOnExit):
    """Queries sent to the running sink that owns the chDB path."""

    def __init__(self, address: SinkAddress) -> None:
        self.address = address

    def query(
        self, sql: str, tenant: str | None, purpose: str | None = None, *, actor: str | None = None
    ) -> QueryResult:
        return post_query(self.address, sql, require_tenant(tenant), purpose, actor=actor)

    def explain(
        self,
        alert_id: str,
        tenant: str | None,
        purpose: str | None = None,
        *,
        actor: str | None = None,
    ) -> dict[str, Any]:
        return post_explain(self.address, alert_id, require_tenant(tenant), purpose, actor=actor)


def open_query_client(settings: Settings) -> DirectQueries | SinkQueries:
    """A server URL -> direct; a running sink -> through its HTTP endpoint; else open the chDB
    path directly (only possible while no other process owns it)."""
    erased = FileKeyStore(settings.keys_dir).destroyed_refs
    if settings.clickhouse_url:
        return DirectQueries(connect(settings), tenant_exempt_purposes(settings), erased)
    address = running_sink(settings.home)
    if address is not None:
        return SinkQueries(address)
    return DirectQueries(connect(settings), tenant_exempt_purposes(settings), erased)
