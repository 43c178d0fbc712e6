"""The Confluent-compatible HTTP registry behind the codec: this build's schemas registered
once and numbered by the server, a newer producer's version fetched and checked before it is
read, an unknown id quarantinable, an unreachable registry never mistaken for bad bytes."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from fastavro import parse_schema, schemaless_writer

from rules.engine import default_rules
from schemas.codec import event_codec, event_record, frame, unframe
from schemas.errors import IncompatibleSchema, RegistryUnavailable, UnknownSchemaId
from schemas.events import Event
from schemas.registry import bundled_registry, default_registry, use_registry
from streams.keys import FileKeyStore
from streams.processing import BatchProcessor, Incoming
from streams.schema_registry import HttpSchemaRegistry, RegistryRefused, http_registry
from streams.sealing import Sealer
from tests.factories import make_event
from tests.fakes import TableKnowledge
from tests.registry_server import FIRST_ID, Store, registry_server
from tests.unit.test_processing import NOW, POLICY


@pytest.fixture
def server() -> Iterator[tuple[str, Store]]:
    with registry_server() as running:
        yield running


def event() -> Event:
    return make_event("AllergyRecorded", "penicillin allergy")


def newer_event_schema(extra_field: dict[str, object]) -> str:
    """uac.Event v1 with one more field, as a newer producer build would register it."""
    schema = json.loads(bundled_registry().latest("uac.Event").schema_json)
    schema["fields"].append(extra_field)
    return json.dumps(schema)


def written_with(schema_json: str, schema_id: int, record: dict[str, object]) -> bytes:
    body = io.BytesIO()
    schemaless_writer(body, parse_schema(json.loads(schema_json)), record)
    return frame(schema_id, body.getvalue())


def a_newer_producers_record(store: Store) -> tuple[int, bytes]:
    """A newer producer registers uac.Event with an optional `channel` and frames `event()`
    with it: (the id the server gave, the framed record)."""
    newer = newer_event_schema({"name": "channel", "type": "string", "default": "web"})
    status, answer = store.register("uac.Event", newer)
    assert status == 200
    record = event_record(event()) | {"channel": "app"}
    return answer["id"], written_with(newer, answer["id"], record)


def test_given_a_registry_then_frames_carry_its_ids_and_decode_back(
    server: tuple[str, Store],
) -> None:
    url, store = server
    codec = event_codec(http_registry(url, auto_register=True))
    framed = codec.encode(event())
    schema_id, _ = unframe(framed)
    assert schema_id >= FIRST_ID
    assert store.schemas[schema_id] == bundled_registry().latest("uac.Event").schema_json
    assert codec.decode(framed) == event()


def test_given_schemas_already_registered_then_another_process_finds_the_same_ids(
    server: tuple[str, Store],
) -> None:
    url, store = server
    first = event_codec(http_registry(url, auto_register=True)).encode(event())
    registrations = [r for r in store.requests if r.endswith("/versions")]
    again = event_codec(http_registry(url, auto_register=False))
    assert again.encode(event()) == first
    assert [r for r in store.requests if r.endswith("/versions")] == registrations
    assert again.decode(first) == event()


def test_given_a_newer_compatible_version_then_its_records_are_read_with_this_builds_schema(
    server: tuple[str, Store],
) -> None:
    url, store = server
    registry = http_registry(url, auto_register=True)
    event_codec(registry).encode(event())
    _, framed = a_newer_producers_record(store)
    assert event_codec(registry).decode(framed) == event()


def test_given_an_id_of_an_incompatible_schema_then_decoding_refuses_it(
    server: tuple[str, Store],
) -> None:
    url, store = server
    registry = http_registry(url, auto_register=True)
    event_codec(registry).encode(event())
    schema = json.loads(bundled_registry().latest("uac.Event").schema_json)
    for field in schema["fields"]:
        if field["name"] == "confidence":
            field["type"] = "string"
    breaking = json.dumps(schema)
    store.schemas[999] = breaking
    store.subjects["uac.Event"].append(999)
    record = event_record(event()) | {"confidence": "high"}
    with pytest.raises(IncompatibleSchema, match=r"id 999 cannot be read.*double.*string"):
        event_codec(registry).decode(written_with(breaking, 999, record))
    _, other = store.register("other.Thing", '{"type": "record", "name": "Thing", "fields": []}')
    with pytest.raises(IncompatibleSchema, match=r"other\.Thing"):
        event_codec(registry).decode(frame(other["id"], b""))


def test_given_an_id_the_registry_never_issued_then_it_is_an_unknown_schema(
    server: tuple[str, Store],
) -> None:
    url, _ = server
    with pytest.raises(UnknownSchemaId):
        event_codec(http_registry(url, auto_register=True)).decode(frame(4242, b"\x00"))


def test_given_an_unknown_id_then_the_server_is_asked_again_only_after_a_while(
    server: tuple[str, Store],
) -> None:
    url, store = server
    now = [0.0]
    registry = HttpSchemaRegistry(_quick_client(url), bundled_registry(), True, lambda: now[0])
    codec = event_codec(registry)
    # the id the server gives the next schema, once this build's versions are registered
    unseen = FIRST_ID + len(bundled_registry().versions("uac.Event"))
    for _ in range(3):
        with pytest.raises(UnknownSchemaId):
            codec.decode(frame(unseen, b"\x00"))
    assert store.requests.count(f"GET /schemas/ids/{unseen}") == 1
    registered_id, framed = a_newer_producers_record(store)
    assert registered_id == unseen
    with pytest.raises(UnknownSchemaId):
        codec.decode(framed)
    now[0] += 61
    assert codec.decode(framed) == event()


def test_given_the_registry_down_then_reading_an_unseen_id_is_unavailable_not_bad_bytes(
    server: tuple[str, Store], tmp_path: Path
) -> None:
    url, store = server
    event_codec(http_registry(url, auto_register=True)).encode(event())
    _, framed = a_newer_producers_record(store)
    codec = event_codec(HttpSchemaRegistry(_quick_client(url), bundled_registry(), True))
    store.down = True
    with pytest.raises(RegistryUnavailable):
        codec.decode(framed)
    sealer = Sealer(FileKeyStore(tmp_path / "keys"))
    processor = BatchProcessor(codec, default_rules(TableKnowledge()), POLICY, sealer)
    sealed = sealer.seal(event().key, framed)
    incoming = Incoming(event().key.encode(), sealed, "uac.events", 0, 0)
    with pytest.raises(RegistryUnavailable):
        processor.process_batch([incoming], lambda _key: None, NOW)
    store.down = False
    assert codec.decode(framed) == event()


def test_given_no_registry_listening_then_start_up_says_it_is_unreachable() -> None:
    with registry_server() as (url, _):
        gone = url
    with pytest.raises(RegistryUnavailable, match="unreachable"):
        event_codec(HttpSchemaRegistry(_quick_client(gone), bundled_registry(), True))


def test_given_auto_register_off_and_a_schema_missing_then_start_up_names_it(
    server: tuple[str, Store],
) -> None:
    url, _ = server
    with pytest.raises(RegistryRefused, match=r"uac\.Event v1.*40401"):
        event_codec(http_registry(url, auto_register=False))


def test_given_the_server_refuses_this_builds_schema_then_start_up_shows_why(
    server: tuple[str, Store],
) -> None:
    url, store = server
    store.register(
        "uac.Event",
        '{"type": "record", "name": "Event", "namespace": "uac", '
        '"fields": [{"name": "legacy", "type": "int"}]}',
    )
    with pytest.raises(RegistryRefused, match=r"uac\.Event v1.*incompatible.*HTTP 409"):
        event_codec(http_registry(url, auto_register=True))


def test_given_a_registry_chosen_for_the_process_then_codecs_use_it_by_default(
    server: tuple[str, Store],
) -> None:
    url, _ = server
    registry = http_registry(url, auto_register=True)
    use_registry(registry)
    try:
        assert default_registry() is registry
        assert unframe(event_codec().encode(event()))[0] >= FIRST_ID
    finally:
        use_registry(None)
    assert default_registry() is bundled_registry()
    assert (
        unframe(event_codec().encode(event()))[0]
        == bundled_registry().latest("uac.Event").schema_id
    )


def _quick_client(url: str) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": url, "max.retries": 0})
