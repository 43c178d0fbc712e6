"""A Confluent Schema Registry API server for tests: the endpoints UaC's HTTP registry uses,
answered as the Confluent REST API reference documents them (JSON bodies, `error_code` 40401
subject not found, 40403 schema not found, 409 incompatible), with BACKWARD compatibility
judged by the `avro` package's checker. It numbers schemas from 101 so a test sees that ids
come from the server, not from the committed manifest. No Confluent server runs in CI (no
Docker, not on Maven Central); this stands in for one.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from schemas.compatibility import can_read
from schemas.registry import registered

FIRST_ID = 101
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


@dataclass
class Store:
    schemas: dict[int, str] = field(default_factory=dict)
    subjects: dict[str, list[int]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    down: bool = False

    def id_of(self, schema: str) -> int | None:
        canonical = json.loads(schema)
        for schema_id, known in self.schemas.items():
            if json.loads(known) == canonical:
                return schema_id
        return None

    def register(self, subject: str, schema: str) -> tuple[int, Any]:
        versions = self.subjects.setdefault(subject, [])
        existing = self.id_of(schema)
        if existing is not None and existing in versions:
            return 200, {"id": existing}
        if versions:
            newer = registered(subject, len(versions) + 1, 0, schema)
            older = registered(subject, len(versions), 0, self.schemas[versions[-1]])
            problem = can_read(newer, older)
            if problem:
                return 409, {"error_code": 409, "message": f"incompatible: {problem}"}
        schema_id = existing or FIRST_ID + len(self.schemas)
        self.schemas[schema_id] = schema
        versions.append(schema_id)
        return 200, {"id": schema_id}

    def lookup(self, subject: str, schema: str) -> tuple[int, Any]:
        if subject not in self.subjects:
            return 404, {"error_code": 40401, "message": f"Subject '{subject}' not found."}
        schema_id = self.id_of(schema)
        versions = self.subjects[subject]
        if schema_id is None or schema_id not in versions:
            return 404, {"error_code": 40403, "message": "Schema not found"}
        body = {"subject": subject, "id": schema_id, "version": versions.index(schema_id) + 1}
        return 200, {**body, "schema": self.schemas[schema_id]}

    def by_id(self, schema_id: int) -> tuple[int, Any]:
        if schema_id not in self.schemas:
            return 404, {"error_code": 40403, "message": "Schema not found"}
        return 200, {"schema": self.schemas[schema_id]}

    def versions_of(self, schema_id: int) -> tuple[int, Any]:
        found = [
            {"subject": subject, "version": ids.index(schema_id) + 1}
            for subject, ids in self.subjects.items()
            if schema_id in ids
        ]
        if not found:
            return 404, {"error_code": 40403, "message": "Schema not found"}
        return 200, found


def handler_for(store: Store) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            return

        def _answer(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _route(self, method: str) -> tuple[int, Any]:
            path = unquote(urlsplit(self.path).path).rstrip("/")
            store.requests.append(f"{method} {path}")
            if store.down:
                return 503, {"error_code": 50003, "message": "unavailable"}
            if method == "POST":
                length = int(self.headers.get("Content-Length", "0"))
                schema = json.loads(self.rfile.read(length))["schema"]
                if match := re.fullmatch(r"/subjects/([^/]+)/versions", path):
                    return store.register(match[1], schema)
                if match := re.fullmatch(r"/subjects/([^/]+)", path):
                    return store.lookup(match[1], schema)
            if match := re.fullmatch(r"/schemas/ids/(\d+)/versions", path):
                return store.versions_of(int(match[1]))
            if match := re.fullmatch(r"/schemas/ids/(\d+)", path):
                return store.by_id(int(match[1]))
            return 404, {"error_code": 404, "message": f"no route {method} {path}"}

        def do_GET(self) -> None:
            self._answer(*self._route("GET"))

        def do_POST(self) -> None:
            self._answer(*self._route("POST"))

    return Handler


@contextmanager
def registry_server() -> Iterator[tuple[str, Store]]:
    """A running server on a free loopback port: (its URL, its store)."""
    store = Store()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(store))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", store
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
