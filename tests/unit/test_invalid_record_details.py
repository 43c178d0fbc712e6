"""An invalid record's error names the fields that are wrong, never their values: the detail
goes to the producer's console, to the quarantine topic and to `gate_decisions`, where a value
that was a secret or personal data would stay readable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from schemas.errors import InvalidRecord, MalformedJson
from schemas.json_lines import parse_event

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "events.ndjson"
CANARY = "Canary-7f3a-pw:hunter2"


def _one_event_of_each_type() -> dict[str, dict[str, Any]]:
    events: dict[str, dict[str, Any]] = {}
    for line in SAMPLE.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        events.setdefault(event["type"], event)
    return events


def _with_canary() -> list[Any]:
    cases = []
    for event_type, event in _one_event_of_each_type().items():
        for field in event:
            cases.append(pytest.param(event | {field: CANARY}, id=f"{event_type} {field}"))
        for field in event["payload"]:
            changed = event | {"payload": event["payload"] | {field: CANARY}}
            cases.append(pytest.param(changed, id=f"{event_type} payload.{field}"))
    return cases


@pytest.mark.parametrize("event", _with_canary())
def test_given_a_field_holding_a_value_it_cannot_take_then_the_error_never_repeats_the_value(
    event: dict[str, Any],
) -> None:
    assert CANARY.lower() not in _error_of(json.dumps(event)).lower()


def _error_of(line: str) -> str:
    """The error a line gets, empty when it is a valid event (a free-text field takes any text)."""
    try:
        parse_event(line)
    except InvalidRecord as error:
        return str(error)
    return ""


@pytest.mark.parametrize(
    ("field", "named"),
    [
        pytest.param("type", "unknown event type (the types are", id="given an unknown type"),
        pytest.param(
            "payload.destination_country",
            "payload.destination_country: Value error, not an ISO 3166-1 alpha-2 country code",
            id="given a country that is no code",
        ),
    ],
)
def test_the_error_still_says_what_is_wrong_and_where(field: str, named: str) -> None:
    trip = _one_event_of_each_type()["TravelRecorded"]
    if field == "type":
        trip = trip | {"type": CANARY}
    else:
        trip = trip | {"payload": trip["payload"] | {"destination_country": CANARY}}

    with pytest.raises(InvalidRecord) as raised:
        parse_event(json.dumps(trip))

    assert named in str(raised.value)


@pytest.mark.parametrize("payload", [None, "vegan", 3, ["diet", "vegan"]])
def test_given_a_payload_that_is_no_object_then_one_error_says_so_at_payload(
    payload: object,
) -> None:
    """Not one error per payload type the record could have had, each named by the model's
    internal validators."""
    preference = _one_event_of_each_type()["PreferenceStated"] | {"payload": payload}

    with pytest.raises(InvalidRecord) as raised:
        parse_event(json.dumps(preference))

    assert str(raised.value) == "payload: Input should be a valid dictionary"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        pytest.param(
            '{"event_id": "a", "type": "Prefer',
            "not JSON: the line ends before its JSON value is complete",
            id="given a line cut inside a string",
        ),
        pytest.param(
            '{"event_id": "a", "payload": {"key": "diet"',
            "not JSON: the line ends before its JSON value is complete",
            id="given a line cut between fields",
        ),
        pytest.param(
            '{"event_id": "a" "type": "x"}',
            "not JSON: Expecting ',' delimiter at column 18",
            id="given a missing comma then its column",
        ),
        pytest.param(
            '{"note": "a\tb"}',
            "not JSON: Invalid control character at column 12",
            id="given a raw tab in a string then its column, said once",
        ),
    ],
)
def test_a_line_that_is_no_json_is_reported_where_it_fails(line: str, expected: str) -> None:
    with pytest.raises(MalformedJson) as raised:
        parse_event(line + "\n")

    assert str(raised.value) == expected
