"""A running worker follows its tenants file: a changed file it can use is enforced from the
next batch on (an actor added, a signing key revoked), a file it cannot use is refused once with
its reason while the last good file stays enforced, and the metrics say which file that is."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from rules.engine import default_rules
from schemas.codec import event_codec
from streams.agents import enforce_tenants_file
from streams.processing import BatchOutput, BatchProcessor, Incoming
from streams.settings import Settings
from streams.signatures import Signer, new_signing_key
from streams.tenants import TenantsPolicy, tenants_policy_of
from streams.tenants_watch import Refused, Reloaded, TenantsWatch
from streams.worker_metrics import WorkerMetrics
from tests.factories import T0, make_event
from tests.fakes import TableKnowledge

NOW = T0 + timedelta(days=1)


def write_tenants(path: Path, actors: list[str], keys: dict[str, Any] | None = None) -> None:
    """Written whole, as an operator's tool or a config map would (a rename, never in place)."""
    tenants = {"clinic-a": {"actors": actors, "actor_keys": keys or {}}}
    staged = path.with_suffix(".staged")
    staged.write_text(json.dumps({"tenants": tenants}), encoding="utf-8")
    staged.replace(path)


class Worker:
    """The parts of a worker that the tenants file reaches: its processor and its metrics."""

    def __init__(self, tmp_path: Path, actors: list[str]) -> None:
        self.path = tmp_path / "tenants.json"
        write_tenants(self.path, actors)
        self.settings = Settings(tenants_file=self.path, require_sealed=False)
        tenants = tenants_policy_of(self.settings)
        self.processor = BatchProcessor(
            event_codec(),
            default_rules(TableKnowledge()),
            tenants.gate_policy,
            actor_keys=tenants.actor_keys,
        )
        self.watch = TenantsWatch(self.settings, tenants)
        self.metrics = WorkerMetrics()
        self.metrics.tenants_file_enforced(tenants.sha256)

    def follow(self) -> None:
        enforce_tenants_file(self.watch, self.processor, self.metrics)

    def decide(self, name: str, signer: Signer | None = None) -> BatchOutput:
        event = make_event("PreferenceStated", name)
        key, value = event.key.encode(), event_codec().encode(event)
        headers = signer.headers(key, value) if signer else ()
        message = Incoming(key, value, "uac.events", 0, 0, headers)
        return self.processor.process_batch([message], lambda _key: None, NOW)

    def enforced(self) -> str:
        return self.watch.current.sha256

    def metric(self, name: str) -> list[str]:
        text = generate_latest(self.metrics.registry).decode()
        return [line for line in text.splitlines() if line.startswith(name)]


def reasons(output: BatchOutput) -> list[tuple[str, ...]]:
    return [decision.reasons for decision in output.quarantined]


def test_given_an_actor_added_to_the_file_then_its_next_event_is_accepted(tmp_path: Path) -> None:
    worker = Worker(tmp_path, ["booking-service"])
    assert reasons(worker.decide("before")) == [("actor_not_allowed",)]
    write_tenants(worker.path, ["booking-service", "ehr-adapter"])
    worker.follow()
    assert len(worker.decide("after").accepted) == 1
    assert worker.metric("uac_worker_tenants_file{") == [
        f'uac_worker_tenants_file{{sha256="{worker.enforced()}"}} 1.0'
    ]


def test_given_a_revoked_signing_key_then_records_signed_with_it_are_refused(
    tmp_path: Path,
) -> None:
    new_signing_key(tmp_path / "old.pem")
    new_signing_key(tmp_path / "new.pem")
    old, new = Signer.from_file(tmp_path / "old.pem"), Signer.from_file(tmp_path / "new.pem")
    worker = Worker(tmp_path, ["ehr-adapter"])
    both = [old.public_key_text(), new.public_key_text()]
    write_tenants(worker.path, ["ehr-adapter"], {"ehr-adapter": both})
    worker.follow()
    assert len(worker.decide("during-rotation", old).accepted) == 1
    write_tenants(worker.path, ["ehr-adapter"], {"ehr-adapter": [new.public_key_text()]})
    worker.follow()
    assert reasons(worker.decide("after-revocation", old)) == [("signature_invalid",)]
    assert len(worker.decide("with-the-new-key", new).accepted) == 1


BROKEN = [
    pytest.param(lambda path: path.write_text('{"tenants": {"clinic-a": {"act'), id="half written"),
    pytest.param(
        lambda path: path.write_text('{"tenants": {"clinic-a": {"actors": "ehr-adapter"}}}'),
        id="invalid",
    ),
    pytest.param(
        lambda path: path.write_text(
            '{"tenants": {"clinic-a": {"actors": ["ehr-adapter"],'
            ' "actor_keys": {"ehr-adapter": "not base64!"}}}}'
        ),
        id="a key that is not one",
    ),
    pytest.param(lambda path: path.unlink(), id="gone"),
]


@pytest.mark.parametrize("breaks", BROKEN)
def test_given_a_file_that_cannot_be_used_then_the_last_good_one_stays_enforced(
    tmp_path: Path, breaks: Any, caplog: pytest.LogCaptureFixture
) -> None:
    worker = Worker(tmp_path, ["ehr-adapter"])
    good = worker.enforced()
    breaks(worker.path)
    with caplog.at_level(logging.ERROR, logger="streams.tenants_watch"):
        worker.follow()
        worker.follow()
    assert len(caplog.records) == 1
    assert str(worker.path) in caplog.text
    assert f"still enforcing sha256 {good}" in caplog.text
    assert worker.metric("uac_worker_tenants_file_refusals_total") == [
        "uac_worker_tenants_file_refusals_total 1.0"
    ]
    assert len(worker.decide("meanwhile").accepted) == 1
    write_tenants(worker.path, [])
    worker.follow()
    assert worker.enforced() != good
    assert reasons(worker.decide("once-mended")) == [("actor_not_allowed",)]


def test_given_the_same_file_or_a_mended_one_then_nothing_is_told(tmp_path: Path) -> None:
    worker = Worker(tmp_path, ["ehr-adapter"])
    first: TenantsPolicy = worker.watch.current
    assert worker.watch.poll() is None
    content = worker.path.read_bytes()
    worker.path.write_text("{")
    assert isinstance(worker.watch.poll(), Refused)
    worker.path.write_bytes(content)
    assert worker.watch.poll() is None
    worker.path.write_text("{")
    assert isinstance(worker.watch.poll(), Refused), "a refusal is told again after a mend"
    write_tenants(worker.path, ["ehr-adapter", "patient-app"])
    reloaded = worker.watch.poll()
    assert isinstance(reloaded, Reloaded)
    assert reloaded.policy.gate_policy.tenants["clinic-a"].actors == {"ehr-adapter", "patient-app"}
    assert worker.watch.current is not first
