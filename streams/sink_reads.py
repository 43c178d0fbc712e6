"""The running sink's audited reads over HTTP: `POST /query` and `POST /explain`.

The sink owns the chDB data path while it runs, so analysts' queries and alert explanations
are answered in its process, on its own ClickHouse client, off the event loop. Only a caller
that sends the read token of `sink.json` (readable by the sink's user only) is answered, and
every answer is audited by the query layer (`streams.analytics`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple

from aiohttp import web
from clickhouse_connect.driver.client import Client

from streams import alert_lineage, analytics, query_clients, sql_guard
from streams.tenants_watch import TenantsWatch


class ReadEndpoints:
    """`/query` and `/explain`, answered with the query client and tenants file the sink has
    open at the time of each request (None while it is not connected)."""

    def __init__(
        self,
        read_token: str,
        client: Callable[[], Client | None],
        tenants: Callable[[], TenantsWatch | None],
        erased: Callable[[], frozenset[str]] = frozenset,
    ) -> None:
        self._read_token = read_token
        self._client = client
        self._tenants = tenants
        self._erased = erased

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/query", self._query)
        app.router.add_post("/explain", self._explain)

    async def _query(self, request: web.Request) -> web.Response:
        """`{"sql", "tenant", "purpose"?, "actor"?}` -> the result of `analytics.query`."""

        def answer(client: Client, sql: str, read: ServedRead) -> Any:
            tenant, purpose, exempt, actor = read
            erased = self._erased()
            return analytics.query(
                client, sql, tenant, purpose, exempt, actor=actor, erased=erased
            ).to_json()

        return await self._serve_read(request, "sql", answer)

    async def _explain(self, request: web.Request) -> web.Response:
        """`{"alert_id", "tenant", "purpose"?, "actor"?}` -> `alert_lineage.explain`."""

        def answer(client: Client, alert_id: str, read: ServedRead) -> Any:
            tenant, purpose, exempt, actor = read
            return alert_lineage.explain(
                client,
                alert_id,
                tenant,
                purpose=purpose,
                exempt_purposes=exempt,
                actor=actor,
                erased=self._erased(),
            )

        return await self._serve_read(request, "alert_id", answer)

    async def _serve_read(
        self,
        request: web.Request,
        field: str,
        answer: Callable[[Client, str, ServedRead], Any],
    ) -> web.Response:
        """A read request naming `field` (text), a tenant, and optionally purpose and actor,
        answered off the event loop with the tenant's consent-exempt purposes. Only a caller
        that can read `sink.json` (its read token) is answered."""
        if not query_clients.bearer_matches(request.headers.get("Authorization"), self._read_token):
            return _error(401, "unauthorized", query_clients.UNAUTHORIZED_READ)
        document = await _json_object(request)
        if document is None or not isinstance(document.get(field), str):
            return _error(
                400, "bad_request", f'expected JSON {{"{field}": "...", "tenant": "..."}}'
            )
        try:
            tenant, purpose, actor = _read_fields(document)
        except ValueError as error:
            return _error(400, "bad_request", str(error))
        client, tenants = self._client(), self._tenants()
        if client is None or tenants is None:
            return _error(503, "unavailable", "the sink is not connected to ClickHouse")
        tenants.follow()
        value = document[field]
        known = query_clients.exempt_purposes_in(tenants.current.gate_policy)

        def run() -> Any:
            exempt = analytics.exempt_purposes_of(tenant, known)
            return answer(client, value, ServedRead(tenant, purpose, exempt, actor))

        return await _served(run)


def _error(status: int, kind: str, message: str) -> web.Response:
    return web.json_response({"error": kind, "message": message}, status=status)


_SERVED_ERRORS: Final[tuple[tuple[type[Exception], int, str], ...]] = (
    (analytics.TenantRequired, 400, "tenant_required"),
    (sql_guard.QueryRefused, 400, "query_refused"),
    (analytics.QueryFailed, 400, "query_failed"),
    (alert_lineage.AlertNotFound, 404, "alert_not_found"),
)


class ServedRead(NamedTuple):
    tenant: str | None
    purpose: str | None
    exempt: frozenset[str]
    actor: str


async def _served(answer: Callable[[], Any]) -> web.Response:
    """Run a read of the analytics layer off the event loop; its errors as JSON responses."""
    try:
        document = await asyncio.to_thread(answer)
    except Exception as error:
        for kind, status, name in _SERVED_ERRORS:
            if isinstance(error, kind):
                return _error(status, name, str(error))
        raise
    return web.json_response(document)


async def _json_object(request: web.Request) -> dict[str, Any] | None:
    try:
        document = await request.json()
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def _read_fields(document: Mapping[str, Any]) -> tuple[str | None, str | None, str]:
    """(tenant, purpose, actor) of a read request; the actor defaults to `unidentified`."""
    values = [document.get(name) for name in ("tenant", "purpose", "actor")]
    for name, value in zip(("tenant", "purpose", "actor"), values, strict=True):
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{name} must be a string")
    tenant, purpose, actor = values
    return tenant, purpose, actor or analytics.UNIDENTIFIED_ACTOR
