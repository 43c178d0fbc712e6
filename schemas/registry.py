"""Schema registries: where a schema id on the wire leads to its writer schema.

`FileSchemaRegistry` reads the committed manifest (`avro/registry.json`): ids are fixed in the
repository, so every process and every replay agrees on them. An HTTP Confluent-compatible
registry (`streams.schema_registry`) implements the same `SchemaRegistry` protocol; the shell
picks one at start-up with `use_registry`, and every codec built without an explicit registry
uses that choice (`default_registry`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, Protocol

from fastavro import parse_schema

from schemas.errors import UnknownSchemaId


@dataclass(frozen=True)
class RegisteredSchema:
    subject: str
    version: int
    schema_id: int
    schema_json: str
    parsed: Any = field(compare=False, repr=False)

    @property
    def record_name(self) -> str:
        name: str = json.loads(self.schema_json)["name"]
        return name


class SchemaRegistry(Protocol):
    def by_id(self, schema_id: int) -> RegisteredSchema:
        """The schema registered under `schema_id`; raises `UnknownSchemaId`, or
        `RegistryUnavailable` when a remote registry cannot be asked."""
        ...

    def latest(self, subject: str) -> RegisteredSchema:
        """The newest version of `subject` (the reader schema of this build)."""
        ...

    def versions(self, subject: str) -> tuple[RegisteredSchema, ...]:
        """Every version of `subject`, oldest first."""
        ...


def registered(subject: str, version: int, schema_id: int, schema_json: str) -> RegisteredSchema:
    parsed = parse_schema(json.loads(schema_json))
    return RegisteredSchema(subject, version, schema_id, schema_json, parsed)


class FileSchemaRegistry:
    """The committed manifest of `schemas/avro`. Ids never change once released."""

    def __init__(self, schemas: tuple[RegisteredSchema, ...]) -> None:
        self._by_id = {schema.schema_id: schema for schema in schemas}
        if len(self._by_id) != len(schemas):
            raise ValueError("schema ids in the manifest are not unique")
        self._by_subject: dict[str, tuple[RegisteredSchema, ...]] = {}
        for schema in sorted(schemas, key=lambda s: (s.subject, s.version)):
            self._by_subject[schema.subject] = (*self._by_subject.get(schema.subject, ()), schema)

    def by_id(self, schema_id: int) -> RegisteredSchema:
        try:
            return self._by_id[schema_id]
        except KeyError:
            raise UnknownSchemaId(f"schema id {schema_id} is not registered") from None

    def latest(self, subject: str) -> RegisteredSchema:
        return self.versions(subject)[-1]

    def versions(self, subject: str) -> tuple[RegisteredSchema, ...]:
        try:
            return self._by_subject[subject]
        except KeyError:
            raise KeyError(f"no schema subject {subject!r} in the registry") from None

    def subjects(self) -> tuple[str, ...]:
        return tuple(sorted(self._by_subject))


@cache
def bundled_registry() -> FileSchemaRegistry:
    """The registry of the schemas shipped with this build."""
    folder = resources.files("schemas") / "avro"
    manifest = json.loads((folder / "registry.json").read_text(encoding="utf-8"))
    return FileSchemaRegistry(
        tuple(
            registered(
                subject, entry["version"], entry["id"], (folder / entry["file"]).read_text("utf-8")
            )
            for subject, entries in manifest["subjects"].items()
            for entry in entries
        )
    )


_chosen: list[SchemaRegistry] = []


def use_registry(registry: SchemaRegistry | None) -> None:
    """Make `registry` the one codecs use by default in this process (None: the bundled
    manifest). Called once by the shell at start-up, from its settings."""
    _chosen[:] = [] if registry is None else [registry]


def default_registry() -> SchemaRegistry:
    return _chosen[0] if _chosen else bundled_registry()
