"""Commands that need the broker (or the schema registry) say so in one line when it is unknown
or does not answer: exit code 3, never a traceback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from streams.keys import FileKeyStore
from streams.signatures import Signer


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _uac(
    args: list[str], home: Path, bootstrap: str | None, settings: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "UAC_KAFKA_BOOTSTRAP"} | {
        "UAC_HOME": str(home),
        **(settings or {}),
    }
    if bootstrap is not None:
        env["UAC_KAFKA_BOOTSTRAP"] = bootstrap
    command = [sys.executable, "-m", "streams.cli", *args]
    return subprocess.run(
        command, check=False, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["state", "--tenant", "clinic-a", "--subject", "p-1"], id="state"),
        pytest.param(["alerts", "--tenant", "clinic-a", "--json"], id="alerts"),
        pytest.param(["erase", "--tenant", "clinic-a", "--subject", "p-1", "--force"], id="erase"),
        pytest.param(["check-log"], id="check-log"),
        pytest.param(["lag"], id="lag"),
    ],
)
def test_given_no_known_broker_then_one_line_and_exit_code_3(
    tmp_path: Path, args: list[str]
) -> None:
    result = _uac(args, tmp_path, bootstrap=None)
    assert result.returncode == 3
    assert "no Kafka: set UAC_KAFKA_BOOTSTRAP or run `uac kafka start`" in result.stderr
    assert "Traceback" not in result.stderr


def test_given_a_broker_address_nobody_answers_then_one_line_and_exit_code_3(
    tmp_path: Path,
) -> None:
    args = ["alerts", "--tenant", "clinic-a", "--json"]
    result = _uac(args, tmp_path, bootstrap=f"127.0.0.1:{_closed_port()}")
    assert result.returncode == 3
    assert "Unable to bootstrap" in result.stderr
    assert "Traceback" not in result.stderr


def test_given_a_schema_registry_nobody_answers_then_one_line_and_exit_code_3(
    tmp_path: Path,
) -> None:
    sample = Path(__file__).resolve().parents[2] / "examples" / "events.ndjson"
    env = os.environ | {
        "UAC_HOME": str(tmp_path),
        "UAC_SCHEMA_REGISTRY_URL": f"http://127.0.0.1:{_closed_port()}",
    }
    result = subprocess.run(
        [sys.executable, "-m", "streams.cli", "publish", str(sample)],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 3
    assert "schema registry unreachable" in result.stderr
    assert "Traceback" not in result.stderr


def test_given_an_erasure_reason_that_looks_like_a_secret_then_refused_before_sending(
    tmp_path: Path,
) -> None:
    """The gate would refuse the request for its reason and the subject would stay: the
    command says so before anything is sent (here no broker is reachable at all)."""
    args = ["erase", "--tenant", "clinic-a", "--subject", "p-1", "--reason", "password: hunter22x"]
    result = _uac(args, tmp_path, f"127.0.0.1:{_closed_port()}")
    assert result.returncode == 2
    assert "secret_in_text" in " ".join(result.stderr.split())


@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        pytest.param(
            ["--tenant", "clinic-x"],
            "unknown tenant 'clinic-x': it is not in the tenants file",
            id="a tenant the tenants file does not name",
        ),
        pytest.param(
            ["--tenant", "clinic-a", "--actor", "intruder"],
            "actor 'intruder' may not write for tenant 'clinic-a' (give --actor)",
            id="an actor not allowed for the tenant",
        ),
        pytest.param(
            ["--tenant", "clinic-a", "--actor", "dpo-desk"],
            "actor 'dpo-desk' signs its events: give --signing-key",
            id="a signing actor without its key",
        ),
    ],
)
def test_given_an_erasure_the_gate_would_refuse_then_refused_before_sending(
    tmp_path: Path, options: list[str], refusal: str
) -> None:
    """A request the gate would quarantine erases nothing: the command says why instead of
    reporting it requested (no broker is reachable here, so nothing can have been sent)."""
    tenants = tmp_path / "tenants.json"
    clinic = {"actors": ["uac-cli", "dpo-desk"], "actor_keys": {"dpo-desk": _PUBLIC_KEY}}
    tenants.write_text(json.dumps({"tenants": {"clinic-a": clinic}}), encoding="utf-8")
    args = ["erase", "--subject", "p-1", *options]
    env = {"UAC_TENANTS_FILE": str(tenants)}
    result = _uac(args, tmp_path, f"127.0.0.1:{_closed_port()}", env)
    assert result.returncode == 2, result.stderr
    assert " ".join(result.stderr.split()) == f"refused: {refusal}; nothing was sent"


@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        pytest.param(
            ["--tenant", "clinic-x"],
            "unknown tenant 'clinic-x': it is not in the tenants file",
            id="an unknown tenant",
        ),
        pytest.param(
            ["--tenant", "clinic-a", "--purpose", "research"],
            "alerts are health data and purpose 'research' is not consent-exempt for tenant "
            "'clinic-a' (exempt: care); `uac query` reads the alerts of the subjects whose "
            "consent allows it",
            id="a purpose without a legal basis for every subject",
        ),
    ],
)
def test_given_an_alerts_read_without_a_basis_then_refused_before_reading(
    tmp_path: Path, options: list[str], refusal: str
) -> None:
    result = _uac(["alerts", *options], tmp_path, f"127.0.0.1:{_closed_port()}")
    assert result.returncode == 2, result.stderr
    assert " ".join(result.stderr.split()) == f"refused: {refusal}"


_PUBLIC_KEY = Signer(Ed25519PrivateKey.generate()).public_key_text()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param(["--known-at", "2024-07-01"], "needs --as-of", id="known-at alone"),
        pytest.param(["--as-of", "last summer"], "not an ISO 8601 time", id="not a time"),
    ],
)
def test_given_a_bad_as_of_read_then_a_usage_error_before_reading(
    tmp_path: Path, options: list[str], message: str
) -> None:
    args = ["state", "--tenant", "clinic-a", "--subject", "p-1", *options]
    result = _uac(args, tmp_path, f"127.0.0.1:{_closed_port()}")
    assert result.returncode == 2
    assert message in " ".join(result.stderr.split())


def test_given_a_subject_without_a_key_then_erase_refuses_unless_forced(tmp_path: Path) -> None:
    """No event of the subject was ever sealed, so nothing is held of it; an erasure would only
    refuse the (perhaps mistyped) id for good. With --force it is sent (here: no broker)."""
    args = ["erase", "--tenant", "clinic-a", "--subject", "p-typo"]
    refused = _uac(args, tmp_path, f"127.0.0.1:{_closed_port()}")
    assert refused.returncode == 2, refused.stderr
    assert "no event of clinic-a:p-typo was ever sealed" in " ".join(refused.stderr.split())
    forced = _uac([*args, "--force"], tmp_path, bootstrap=None)
    assert forced.returncode == 3
    assert "no Kafka" in forced.stderr


def test_given_unsealed_events_admitted_then_erase_sends_a_subject_without_a_key(
    tmp_path: Path,
) -> None:
    """With UAC_REQUIRE_SEALED=false a subject may be held without a key: no refusal."""
    args = ["erase", "--tenant", "clinic-a", "--subject", "p-unsealed"]
    result = _uac(args, tmp_path, bootstrap=None, settings={"UAC_REQUIRE_SEALED": "false"})
    assert result.returncode == 3
    assert "no Kafka" in result.stderr


def test_given_a_subject_with_a_key_then_erase_sends_the_request(tmp_path: Path) -> None:
    FileKeyStore(tmp_path / "keys").key_for_writing("clinic-a:p-1")
    result = _uac(["erase", "--tenant", "clinic-a", "--subject", "p-1"], tmp_path, bootstrap=None)
    assert result.returncode == 3
    assert "no Kafka" in result.stderr


def test_given_a_blank_purpose_then_the_read_is_for_care(tmp_path: Path) -> None:
    """A blank --purpose is the default `care` (consent-exempt for clinic-a), never a read for an
    empty purpose: the command goes on to Kafka (absent here) instead of refusing."""
    blank = _uac(["alerts", "--tenant", "clinic-a", "--purpose", " "], tmp_path, bootstrap=None)
    assert blank.returncode == 3, blank.stderr
    marketing = ["alerts", "--tenant", "clinic-a", "--purpose", "marketing"]
    refused = _uac(marketing, tmp_path, bootstrap=None)
    assert refused.returncode == 2
    assert "'marketing' is not consent-exempt" in " ".join(refused.stderr.split())


@pytest.mark.parametrize(
    ("subject", "said"),
    [
        pytest.param("a:b", "subject_id: String should match pattern", id="a colon"),
        pytest.param("p-1 ", "subject_id: String should match pattern", id="a trailing space"),
        pytest.param("p\x1b", "subject_id holds a control character (U+001B)", id="an escape"),
        pytest.param("\uff50-1", "NFKC form writes otherwise (U+FF50)", id="a full-width letter"),
    ],
)
def test_given_a_subject_id_no_event_can_hold_then_a_forced_erase_is_refused_in_one_line(
    tmp_path: Path, subject: str, said: str
) -> None:
    args = ["erase", "--tenant", "clinic-a", "--subject", subject, "--force"]
    result = _uac(args, tmp_path, bootstrap=None)
    assert result.returncode == 2, result.stderr
    assert said in " ".join(result.stderr.split())
    assert "nothing was sent" in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr
