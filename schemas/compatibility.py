"""Schema compatibility, judged by the Apache `avro` package's reader/writer checker."""

from __future__ import annotations

from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType
from avro.schema import parse

from schemas.registry import RegisteredSchema, SchemaRegistry


def can_read(reader: RegisteredSchema, writer: RegisteredSchema) -> str | None:
    """None if data written with `writer` can be read with `reader`, else what breaks."""
    checker = ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]
    result = checker.get_compatibility(parse(reader.schema_json), parse(writer.schema_json))
    if result.compatibility is SchemaCompatibilityType.compatible:
        return None
    return "; ".join(sorted(result.messages)) or "incompatible"


def backward_problems(registry: SchemaRegistry, subject: str) -> list[str]:
    """BACKWARD: every version can read data written by every earlier version of the subject."""
    versions = registry.versions(subject)
    return [
        f"{subject} v{newer.version} cannot read v{older.version}: {problem}"
        for index, newer in enumerate(versions)
        for older in versions[:index]
        if (problem := can_read(newer, older))
    ]
