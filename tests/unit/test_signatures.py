"""Signed producers: a record verifies only with its actor's registered key, over exactly the
key and value it was published with; keys are made owner-only and never overwritten, and a
tenants file with a key that cannot be used is refused by name."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from projections.gate import GatePolicy, Signature, TenantPolicy
from rules.engine import default_rules
from schemas.codec import event_codec
from streams.keys import FileKeyStore
from streams.processing import BatchProcessor, Incoming
from streams.sealing import Sealer
from streams.signatures import (
    HEADER,
    ActorKeys,
    Signer,
    SigningKeyError,
    headers_of,
    new_signing_key,
)
from streams.tenants import TenantsFileError, actor_keys_of, load_gate_policy
from tests.factories import T0, make_event
from tests.fakes import TableKnowledge

EVENT = make_event("PreferenceStated", "signed")
KEY, VALUE = EVENT.key.encode(), event_codec().encode(EVENT)


def tenants_file(directory: Path, keys: dict[str, str | list[str]]) -> Path:
    path = directory / "tenants.json"
    tenants = {"clinic-a": {"actors": ["ehr-adapter", "patient-app"], "actor_keys": keys}}
    path.write_text(json.dumps({"tenants": tenants}), encoding="utf-8")
    return path


@pytest.fixture
def signer(tmp_path: Path) -> Signer:
    new_signing_key(tmp_path / "ehr.pem")
    return Signer.from_file(tmp_path / "ehr.pem")


@pytest.fixture
def registered(tmp_path: Path, signer: Signer) -> ActorKeys:
    return actor_keys_of(tenants_file(tmp_path, {"ehr-adapter": signer.public_key_text()}))


def test_given_a_record_signed_by_its_actor_then_it_verifies(
    signer: Signer, registered: ActorKeys
) -> None:
    assert registered.check(EVENT, KEY, VALUE, signer.headers(KEY, VALUE)) is Signature.VALID


@pytest.mark.parametrize(
    ("key", "value"),
    [(KEY, VALUE + b"\x00"), (b"clinic-a:patient-2", VALUE), (KEY[:-1], KEY[-1:] + VALUE)],
    ids=["a changed value", "moved to another subject", "a byte moved from key to value"],
)
def test_given_a_record_changed_after_signing_then_it_does_not_verify(
    signer: Signer, registered: ActorKeys, key: bytes, value: bytes
) -> None:
    headers = signer.headers(KEY, VALUE)
    assert registered.check(EVENT, key, value, headers) is Signature.INVALID


def test_given_another_key_or_no_signature_then_invalid_or_absent(
    tmp_path: Path, registered: ActorKeys
) -> None:
    new_signing_key(tmp_path / "other.pem")
    other = Signer.from_file(tmp_path / "other.pem")
    assert registered.check(EVENT, KEY, VALUE, other.headers(KEY, VALUE)) is Signature.INVALID
    assert registered.check(EVENT, KEY, VALUE, ()) is Signature.ABSENT
    patient = make_event("PreferenceStated", "p", actor="patient-app")
    assert registered.check(patient, KEY, VALUE, other.headers(KEY, VALUE)) is Signature.ABSENT


def test_given_a_key_being_rotated_then_records_signed_with_either_registered_key_verify(
    tmp_path: Path, signer: Signer
) -> None:
    new_signing_key(tmp_path / "next.pem")
    successor = Signer.from_file(tmp_path / "next.pem")
    both = [signer.public_key_text(), successor.public_key_text()]
    rotating = actor_keys_of(tenants_file(tmp_path, {"ehr-adapter": both}))
    for producer in (signer, successor):
        assert rotating.check(EVENT, KEY, VALUE, producer.headers(KEY, VALUE)) is Signature.VALID
    retired = actor_keys_of(tenants_file(tmp_path, {"ehr-adapter": [both[1]]}))
    assert retired.check(EVENT, KEY, VALUE, signer.headers(KEY, VALUE)) is Signature.INVALID
    assert retired.check(EVENT, KEY, VALUE, successor.headers(KEY, VALUE)) is Signature.VALID


def test_a_new_key_is_owner_only_and_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "k.pem"
    public = new_signing_key(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert Signer.from_file(path).public_key_text() == public
    with pytest.raises(SigningKeyError, match="never overwritten"):
        new_signing_key(path)
    assert Signer.from_file(path).public_key_text() == public


def test_given_keys_that_cannot_be_used_then_they_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(SigningKeyError, match="tenant clinic-a actor ehr-adapter"):
        actor_keys_of(tenants_file(tmp_path, {"ehr-adapter": "not base64!"}))
    (tmp_path / "broken.pem").write_text("-----BEGIN PRIVATE KEY-----\n", encoding="utf-8")
    with pytest.raises(SigningKeyError, match=r"broken\.pem"):
        Signer.from_file(tmp_path / "broken.pem")
    with pytest.raises(TenantsFileError, match="actors not in actors: stranger"):
        load_gate_policy(tenants_file(tmp_path, {"stranger": "AAAA"}))
    with pytest.raises(TenantsFileError, match="no key for: ehr-adapter"):
        load_gate_policy(tenants_file(tmp_path, {"ehr-adapter": []}))


def test_the_tenants_file_names_the_signing_actors_for_the_gate(
    tmp_path: Path, signer: Signer
) -> None:
    path = tenants_file(tmp_path, {"ehr-adapter": signer.public_key_text()})
    assert load_gate_policy(path).tenants["clinic-a"].signing_actors == {"ehr-adapter"}


def test_headers_are_read_whichever_form_the_client_gives() -> None:
    class Record:
        def __init__(self, headers: object) -> None:
            self.headers = headers

    assert headers_of(Record([(HEADER, b"s")])) == ((HEADER, b"s"),)
    assert headers_of(Record({HEADER: b"s"})) == ((HEADER, b"s"),)
    assert headers_of(Record(None)) == ()


def test_the_worker_quarantines_an_unsigned_record_of_a_signing_actor(
    tmp_path: Path, signer: Signer, registered: ActorKeys
) -> None:
    policy = GatePolicy(
        tenants={
            "clinic-a": TenantPolicy(
                frozenset({"ehr-adapter"}), signing_actors=frozenset({"ehr-adapter"})
            )
        }
    )
    sealer = Sealer(FileKeyStore(tmp_path / "keys"))
    rules = default_rules(TableKnowledge())
    processor = BatchProcessor(event_codec(), rules, policy, sealer, actor_keys=registered)
    second = make_event("PreferenceStated", "unsigned")
    value = event_codec().encode(second)
    messages = [
        Incoming(KEY, VALUE, "uac.events", 0, 0, signer.headers(KEY, VALUE)),
        Incoming(KEY, value, "uac.events", 0, 1),
    ]
    output = processor.process_batch(messages, lambda _key: None, T0)
    assert [item.event.id for item in output.accepted] == [EVENT.id]
    assert [(q.event_id, q.reasons) for q in output.quarantined] == [
        (str(second.id), ("signature_missing",))
    ]
