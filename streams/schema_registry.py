"""A Confluent-compatible schema registry over HTTP, behind the `SchemaRegistry` protocol.

For deployments that run a registry (Confluent Schema Registry, or a server speaking its REST
API): set `UAC_SCHEMA_REGISTRY_URL` for every UaC process (`user:password@` in the URL is sent
as basic auth). The client is `confluent_kafka.schema_registry.SchemaRegistryClient`.

This build's schemas stay the readers; the server only numbers them. On a subject's first use
each of its bundled versions is looked up on the server and, when missing and auto-register
is on, registered (the server applies its compatibility rule and refuses an incompatible
version; that refusal stops the process with the server's message). Frames then carry the
server's ids, so every process of a deployment must use the same registry. An id this build
did not register (a newer producer's version) is fetched once and cached; the codec checks
that it belongs to the subject and is readable before decoding, as with the bundled manifest.
A registry that does not answer raises `RegistryUnavailable` (retry later), never
`UnknownSchemaId` (quarantine): an outage is not a verdict on the bytes.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError

from schemas.errors import RegistryUnavailable, UnknownSchemaId
from schemas.registry import FileSchemaRegistry, RegisteredSchema, bundled_registry, registered
from streams.settings import Settings

SCHEMA_NOT_FOUND = (40401, 40403)
HTTP_SERVER_ERROR = 500
UNKNOWN_ID_SECONDS = 60.0
UNKNOWN_IDS_KEPT = 10_000
T = TypeVar("T")


class HttpSchemaRegistry:
    def __init__(
        self,
        client: SchemaRegistryClient,
        bundled: FileSchemaRegistry,
        auto_register: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._bundled = bundled
        self._auto_register = auto_register
        self._clock = clock
        self._by_subject: dict[str, tuple[RegisteredSchema, ...]] = {}
        self._by_id: dict[int, RegisteredSchema] = {}
        self._unknown_until: dict[int, float] = {}
        self._lock = threading.Lock()

    def latest(self, subject: str) -> RegisteredSchema:
        return self.versions(subject)[-1]

    def versions(self, subject: str) -> tuple[RegisteredSchema, ...]:
        with self._lock:
            known = self._by_subject.get(subject)
            if known is None:
                known = tuple(self._on_server(s) for s in self._bundled.versions(subject))
                self._by_subject[subject] = known
                self._by_id.update((schema.schema_id, schema) for schema in known)
            return known

    def by_id(self, schema_id: int) -> RegisteredSchema:
        """Ids are immutable, so an answer is kept for good; an id the server does not know
        is not asked about again for `UNKNOWN_ID_SECONDS` (a burst of garbage frames costs one
        request per id, and an id registered meanwhile is found soon after)."""
        with self._lock:
            known = self._by_id.get(schema_id)
            if known is not None:
                return known
            if self._clock() < self._unknown_until.get(schema_id, -math.inf):
                raise UnknownSchemaId(f"schema id {schema_id} is not registered")
            try:
                known = self._by_id[schema_id] = self._fetched(schema_id)
            except UnknownSchemaId:
                self._remember_unknown(schema_id)
                raise
            return known

    def _remember_unknown(self, schema_id: int) -> None:
        now = self._clock()
        if len(self._unknown_until) >= UNKNOWN_IDS_KEPT:
            self._unknown_until = {i: t for i, t in self._unknown_until.items() if t > now}
        self._unknown_until[schema_id] = now + UNKNOWN_ID_SECONDS

    def _on_server(self, schema: RegisteredSchema) -> RegisteredSchema:
        """The bundled `schema` with the id and version the server holds it under."""
        wire = Schema(schema.schema_json, "AVRO")
        try:
            found = _asked(lambda: self._client.lookup_schema(schema.subject, wire))
        except SchemaRegistryError as missing:
            if missing.error_code not in SCHEMA_NOT_FOUND or not self._auto_register:
                raise RegistryRefused(schema, missing) from None
            try:
                _asked(lambda: self._client.register_schema(schema.subject, wire))
            except SchemaRegistryError as refused:
                raise RegistryRefused(schema, refused) from None
            found = _asked(lambda: self._client.lookup_schema(schema.subject, wire))
        if found.schema_id is None or found.version is None:
            raise RegistryUnavailable(f"schema registry answered {schema.subject} without an id")
        return replace(schema, schema_id=found.schema_id, version=found.version)

    def _fetched(self, schema_id: int) -> RegisteredSchema:
        try:
            wire = _asked(lambda: self._client.get_schema(schema_id))
            placed = _asked(lambda: self._client.get_schema_versions(schema_id))
        except SchemaRegistryError as error:
            if error.error_code in SCHEMA_NOT_FOUND:
                raise UnknownSchemaId(f"schema id {schema_id} is not registered") from None
            raise RegistryUnavailable(f"schema registry refused to answer: {error}") from error
        ours = [where for where in placed if where.subject in self._bundled.subjects()]
        where = next(iter(ours or placed), None)
        if (
            wire.schema_type not in (None, "AVRO")
            or wire.schema_str is None
            or where is None
            or where.subject is None
            or where.version is None
        ):
            raise UnknownSchemaId(f"schema id {schema_id} is not an Avro schema of a subject")
        return registered(where.subject, where.version, schema_id, wire.schema_str)


def _asked(call: Callable[[], T]) -> T:
    """`call`'s answer; the server's 4xx verdicts as `SchemaRegistryError`, everything that
    says nothing about the schema (transport errors, 5xx) as `RegistryUnavailable`."""
    try:
        return call()
    except SchemaRegistryError as error:
        if error.http_status_code >= HTTP_SERVER_ERROR:
            raise RegistryUnavailable(f"schema registry failed: {error}") from error
        raise
    except Exception as error:  # the HTTP client raises its own transport error types
        raise RegistryUnavailable(f"schema registry unreachable: {error}") from error


class RegistryRefused(RuntimeError):
    """The registry refused (or does not hold, with auto-register off) a schema of this
    build: the process cannot frame that subject's records and stops with the reason."""

    def __init__(self, schema: RegisteredSchema, error: SchemaRegistryError) -> None:
        super().__init__(
            f"schema registry refused {schema.subject} v{schema.version} of this build: "
            f"{error.error_message} (HTTP {error.http_status_code}, code {error.error_code})"
        )


def http_registry(url: str, auto_register: bool) -> HttpSchemaRegistry:
    client = SchemaRegistryClient({"url": url})
    return HttpSchemaRegistry(client, bundled_registry(), auto_register)


def registry_of(settings: Settings) -> HttpSchemaRegistry | None:
    """The registry `settings` name; None means the bundled manifest."""
    if settings.schema_registry_url is None:
        return None
    return http_registry(settings.schema_registry_url, settings.schema_registry_auto_register)
