"""FHIR times written without a zone (invalid FHIR, but some exports write them): an error of
their record, unless the importer names the zone they are in (`--local-times-in`); then each is
read in that zone, with the offset in force at that local time."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from schemas.fhir.json_access import parse_fhir_datetime
from schemas.fhir.local_times import in_zone
from streams.cli_app import app
from streams.fhir_files import FhirFiles, read_fhir_files

BERLIN = ZoneInfo("Europe/Berlin")
WALL_TIMES_FROM = datetime(1900, 1, 1)  # noqa: DTZ001 (a wall time, as written without a zone)
WALL_TIMES_UNTIL = datetime(2100, 12, 31)  # noqa: DTZ001
runner = CliRunner()


def test_a_time_without_a_zone_gets_the_offset_of_its_date_in_the_zone() -> None:
    document = {
        "summer": "2020-07-01T10:00:00",
        "winter": ["2020-01-01T10:00", {"deep": "2020-01-01T10:00:00.250"}],
    }
    assert in_zone(document, BERLIN) == {
        "summer": "2020-07-01T10:00:00+02:00",
        "winter": ["2020-01-01T10:00+01:00", {"deep": "2020-01-01T10:00:00.250+01:00"}],
    }
    assert in_zone("2020-07-01T10:00:00", timezone(timedelta(hours=-5, minutes=-30))) == (
        "2020-07-01T10:00:00-05:30"
    )


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("2020-07-01T10:00:00Z", id="a time in UTC"),
        pytest.param("2020-07-01T10:00:00-04:00", id="a time with an offset"),
        pytest.param("2020-07-01", id="a date"),
        pytest.param("2020-07", id="a month"),
        pytest.param("2020-13-01T10:00:00", id="a 13th month"),
        pytest.param("on 2020-07-01T10:00:00", id="a time within a text"),
        pytest.param(42, id="a number"),
        pytest.param(None, id="null"),
    ],
)
def test_any_other_value_stays_as_it_is(value: object) -> None:
    assert in_zone({"value": value, "listed": [value]}, BERLIN) == {
        "value": value,
        "listed": [value],
    }


def test_keys_stay_and_the_document_read_is_not_changed() -> None:
    document = {"2020-07-01T10:00:00": ["2020-07-01T10:00:00"]}
    assert in_zone(document, BERLIN) == {"2020-07-01T10:00:00": ["2020-07-01T10:00:00+02:00"]}
    assert document == {"2020-07-01T10:00:00": ["2020-07-01T10:00:00"]}


def test_a_time_the_clocks_skipped_is_read_with_the_offset_before_the_change() -> None:
    assert in_zone("2021-03-28T02:30:00", BERLIN) == "2021-03-28T02:30:00+01:00"
    assert in_zone("2021-10-31T02:30:00", BERLIN) == "2021-10-31T02:30:00+02:00"


def test_a_deeply_nested_document_is_walked_without_exhausting_the_stack() -> None:
    document: Any = "2020-07-01T10:00:00"
    for _ in range(50_000):
        document = [document]
    walked: Any = in_zone(document, UTC)
    for _ in range(50_000):
        walked = walked[0]
    assert walked == "2020-07-01T10:00:00+00:00"


@given(
    moment=st.datetimes(WALL_TIMES_FROM, WALL_TIMES_UNTIL),
    offset_minutes=st.integers(-14 * 60, 14 * 60),
)
def test_any_local_time_read_in_a_zone_is_that_wall_time_there(
    moment: datetime, offset_minutes: int
) -> None:
    zone = timezone(timedelta(minutes=offset_minutes))
    written = moment.replace(microsecond=0).isoformat()
    assert parse_fhir_datetime(str(in_zone(written, zone))) == moment.replace(
        microsecond=0, tzinfo=zone
    )


BUNDLE = {
    "resourceType": "Bundle",
    "type": "collection",
    "timestamp": "2020-08-01T09:00:00",
    "entry": [
        {
            "resource": {
                "resourceType": "AllergyIntolerance",
                "id": "local-penicillin",
                "patient": {"reference": "Patient/p-local"},
                "code": {"text": "Penicillin"},
                "clinicalStatus": {"coding": [{"code": "active"}]},
                "recordedDate": "2020-01-15T08:30:00",
            }
        },
        {
            "resource": {
                "resourceType": "MedicationRequest",
                "id": "local-amoxicillin",
                "status": "active",
                "intent": "order",
                "subject": {"reference": "Patient/p-local"},
                "medicationCodeableConcept": {"text": "Amoxicillin 500 mg"},
                "authoredOn": "2020-07-01T10:00:00",
            }
        },
    ],
}


def _bundle_file(tmp_path: Path) -> Path:
    path = tmp_path / "local.json"
    path.write_text(json.dumps(BUNDLE), encoding="utf-8")
    return path


def _imported(path: Path, local_zone: tzinfo | None = None) -> FhirFiles:
    return read_fhir_files(
        [path],
        tenant_id="clinic-a",
        actor="fhir-import",
        fallback_time=datetime(2026, 1, 1, tzinfo=UTC),
        local_zone=local_zone,
    )


def test_given_no_zone_named_then_each_record_with_such_a_time_is_an_error(tmp_path: Path) -> None:
    files = _imported(_bundle_file(tmp_path))
    assert files.submitted == []
    assert [error.message.split(": ", 1)[1] for error in files.errors] == [
        "recordedDate '2020-01-15T08:30:00' has a time but no time zone",
        "authoredOn '2020-07-01T10:00:00' has a time but no time zone",
    ]


def test_given_the_zone_named_then_the_records_are_dated_in_it(tmp_path: Path) -> None:
    files = _imported(_bundle_file(tmp_path), BERLIN)
    assert files.errors == []
    dated = [
        (item.event.type.value, item.event.occurred_at, item.event.recorded_at)
        for item in files.submitted
    ]
    bundle_written = datetime(2020, 8, 1, 7, 0, tzinfo=UTC)
    assert dated == [
        ("AllergyRecorded", datetime(2020, 1, 15, 7, 30, tzinfo=UTC), bundle_written),
        ("MedicationPrescribed", datetime(2020, 7, 1, 8, 0, tzinfo=UTC), bundle_written),
    ]


def test_replay_reads_the_times_in_the_zone_named_and_raises_the_alert(tmp_path: Path) -> None:
    path = _bundle_file(tmp_path)
    refused = runner.invoke(app, ["replay", "--format", "fhir", str(path)])
    assert refused.exit_code != 0
    assert "has a time but no time zone" in refused.stderr

    read = runner.invoke(
        app, ["replay", "--format", "fhir", "--local-times-in", "Europe/Berlin", str(path)]
    )
    assert read.exit_code == 0, read.stderr
    assert "Amoxicillin 500 mg conflicts with the recorded Penicillin allergy" in read.stdout


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        pytest.param(
            ["--format", "fhir", "--local-times-in", "Europe/Nowhere"],
            "not a time zone name",
            id="given an unknown zone then a usage error",
        ),
        pytest.param(
            ["--local-times-in", "UTC"],
            "applies to FHIR input",
            id="given UaC events then a usage error",
        ),
    ],
)
def test_a_zone_that_cannot_apply_is_refused_before_anything_is_read(
    tmp_path: Path, arguments: list[str], message: str
) -> None:
    result = runner.invoke(app, ["replay", *arguments, str(_bundle_file(tmp_path))])
    assert result.exit_code == 2
    assert message in result.stderr


def test_given_a_bulk_export_then_its_lines_are_read_in_the_zone_named(tmp_path: Path) -> None:
    path = tmp_path / "export.ndjson"
    lines = [json.dumps(entry["resource"]) for entry in BUNDLE["entry"]]  # type: ignore[index]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    files = _imported(path, timezone(timedelta(hours=-5)))
    assert files.errors == []
    assert [item.event.occurred_at for item in files.submitted] == [
        datetime(2020, 1, 15, 13, 30, tzinfo=UTC),
        datetime(2020, 7, 1, 15, 0, tzinfo=UTC),
    ]


def test_given_a_replay_from_kafka_then_a_zone_for_files_is_a_usage_error() -> None:
    result = runner.invoke(app, ["replay", "--from-kafka", "--local-times-in", "UTC"])
    assert result.exit_code == 2
    assert "--local-times-in applies to event files" in result.stderr
