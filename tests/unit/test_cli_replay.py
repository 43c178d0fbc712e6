"""`uac replay --file`: the batch entry point producers and tools run on event files."""

from __future__ import annotations

import io
import json
import random
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from projections.document import event_document
from projections.state import replay
from rules.batch import SubjectResult
from streams.cli_app import app
from streams.console_text import DataConsole
from streams.replay_report import print_human, print_json
from tests.factories import T0, make_event

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "events.ndjson"
runner = CliRunner()


def _replay_json(path: Path) -> tuple[int, list[dict[str, Any]], str]:
    result = runner.invoke(app, ["replay", "--file", str(path), "--json"])
    return (
        result.exit_code,
        [json.loads(line) for line in result.stdout.splitlines() if line],
        result.stderr,
    )


def test_given_the_sample_when_replayed_as_json_then_one_object_per_subject_with_the_contract_keys() -> (
    None
):
    code, subjects, _ = _replay_json(SAMPLE)
    assert code == 0
    assert [(s["tenant_id"], s["subject_id"]) for s in subjects] == [
        ("clinic-a", "p-1001"),
        ("clinic-a", "p-1002"),
        ("clinic-b", "p-1001"),
        ("travel-assistant", "u-42"),
    ]
    for subject in subjects:
        assert {"tenant_id", "subject_id", "state", "state_hash", "alerts"} <= subject.keys()
        assert all("alert_id" in alert for alert in subject["alerts"])


def test_given_the_sample_then_the_penicillin_patient_gets_a_critical_amoxicillin_alert() -> None:
    _, subjects, _ = _replay_json(SAMPLE)
    alerts = subjects[0]["alerts"]
    critical = [a for a in alerts if a["severity"] == "critical" and a["status"] == "raised"]
    assert [a["drug_allergy"]["matched"] for a in critical] == [["amoxicillin"]]


def test_given_the_sample_then_the_nkda_record_beside_the_sulfa_allergy_is_held_for_correction() -> (
    None
):
    _, subjects, _ = _replay_json(SAMPLE)
    listed = [a for a in subjects[1]["alerts"] if a["rule_id"] == "allergy-list-contradiction"]
    assert [(a["status"], a["cause"]) for a in listed] == [
        ("raised", ["allergy:alg-nkda", "allergy:alg-sulfa"])
    ]


def test_given_the_same_subject_id_in_two_tenants_then_two_separate_people() -> None:
    _, subjects, _ = _replay_json(SAMPLE)
    clinic_a, clinic_b = subjects[0], subjects[2]
    assert clinic_a["subject_id"] == clinic_b["subject_id"]
    assert clinic_a["state_hash"] != clinic_b["state_hash"]
    assert [a["substance"] for a in clinic_b["state"]["allergies"]] == ["amoxicillin"]


def test_given_the_lines_in_another_order_then_the_same_output(tmp_path: Path) -> None:
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()
    random.Random(3).shuffle(lines)
    shuffled = tmp_path / "shuffled.ndjson"
    shuffled.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert _replay_json(shuffled)[1] == _replay_json(SAMPLE)[1]


def test_given_bad_lines_then_each_is_reported_with_its_line_number_and_the_rest_is_processed(
    tmp_path: Path,
) -> None:
    good = SAMPLE.read_text(encoding="utf-8").splitlines()[:3]
    unknown_type = json.loads(good[0]) | {"type": "TeleportRecorded"}
    missing_field = json.loads(good[1])
    del missing_field["payload"][next(iter(missing_field["payload"]))]
    path = tmp_path / "mixed.ndjson"
    path.write_text(
        "\n".join(
            [good[0], "{not json", json.dumps(unknown_type), json.dumps(missing_field), good[2]]
        )
        + "\n",
        encoding="utf-8",
    )
    code, subjects, stderr = _replay_json(path)
    assert code == 1
    assert "mixed.ndjson:2: malformed_json" in stderr
    assert "mixed.ndjson:3: invalid_record" in stderr
    assert "TeleportRecorded" in stderr
    assert "mixed.ndjson:4: invalid_record" in stderr
    assert sum(s["state"]["version"] for s in subjects) == 2


def test_given_a_pretty_printed_event_then_one_error_says_so_and_later_lines_still_count(
    tmp_path: Path,
) -> None:
    good = SAMPLE.read_text(encoding="utf-8").splitlines()[:2]
    pretty = json.dumps(json.loads(good[0]), indent=2)
    path = tmp_path / "pretty.ndjson"
    path.write_text(f"{pretty}\n{good[1]}\n", encoding="utf-8")
    code, subjects, stderr = _replay_json(path)
    assert code == 1
    lines = len(pretty.splitlines())
    assert stderr.count("malformed_json") == 1
    assert "pretty.ndjson:1: malformed_json: this looks like JSON written over several lines" in (
        " ".join(stderr.split())
    )
    assert f"({lines} lines could not be read)" in " ".join(stderr.split())
    assert sum(s["state"]["version"] for s in subjects) == 1


@pytest.mark.parametrize(
    ("field", "literal"),
    [
        pytest.param("confidence", "NaN", id="NaN"),
        pytest.param("confidence", "Infinity", id="Infinity"),
        pytest.param("actor", '"ehr-\\ud800"', id="an unpaired surrogate escape"),
        pytest.param("actor", '"ehr-adapter", "actor": "chat-agent"', id="a key given twice"),
        pytest.param("confidence", "1" * 5_000, id="a number too long for Python to convert"),
    ],
)
def test_given_text_that_python_reads_but_json_does_not_allow_then_a_line_error_not_a_crash(
    tmp_path: Path, field: str, literal: str
) -> None:
    good = SAMPLE.read_text(encoding="utf-8").splitlines()[:2]
    bad = json.dumps(json.loads(good[0]) | {field: "PLACEHOLDER"}).replace('"PLACEHOLDER"', literal)
    path = tmp_path / "lenient.ndjson"
    path.write_text("\n".join([bad, good[1]]) + "\n", encoding="utf-8")
    code, subjects, stderr = _replay_json(path)
    assert code == 1
    assert "lenient.ndjson:1: malformed_json" in stderr
    assert sum(s["state"]["version"] for s in subjects) == 1


@pytest.mark.parametrize(
    ("bad_line", "error"),
    [
        pytest.param(b"\xff\xfe not text\n", "malformed_json: not UTF-8 text", id="not UTF-8"),
        pytest.param(
            b"[" * 100_000 + b"]" * 100_000 + b"\n", "malformed_json: not JSON", id="too deep"
        ),
    ],
)
def test_given_a_line_that_is_not_text_or_too_deep_then_a_line_error_and_the_rest_is_read(
    tmp_path: Path, bad_line: bytes, error: str
) -> None:
    good = [line.encode() + b"\n" for line in SAMPLE.read_text(encoding="utf-8").splitlines()[:2]]
    path = tmp_path / "mixed.ndjson"
    path.write_bytes(good[0] + bad_line + good[1])
    code, subjects, stderr = _replay_json(path)
    assert code == 1
    assert f"mixed.ndjson:2: {error}" in " ".join(stderr.split())
    assert sum(s["state"]["version"] for s in subjects) == 2


def test_given_a_time_that_leaves_the_range_of_dates_in_utc_then_a_line_error_not_a_crash(
    tmp_path: Path,
) -> None:
    good = SAMPLE.read_text(encoding="utf-8").splitlines()[:2]
    bad = json.dumps(json.loads(good[0]) | {"occurred_at": "0001-01-01T00:30:00+01:00"})
    path = tmp_path / "ancient.ndjson"
    path.write_text("\n".join([bad, good[1]]) + "\n", encoding="utf-8")
    code, subjects, stderr = _replay_json(path)
    assert code == 1
    assert "ancient.ndjson:1: invalid_record: occurred_at" in stderr
    assert "out of the range of dates" in " ".join(stderr.split())
    assert sum(s["state"]["version"] for s in subjects) == 1


@pytest.mark.parametrize(
    "moment", ["2016-12-31T23:59:60Z", "2024-03-05T24:00:00Z", "2024-03-05T10:00:00+05:30:15"]
)
def test_given_a_leap_second_or_24_hours_then_the_line_error_says_what_a_time_may_be(
    tmp_path: Path, moment: str
) -> None:
    good = SAMPLE.read_text(encoding="utf-8").splitlines()[:2]
    bad = json.dumps(json.loads(good[0]) | {"occurred_at": moment, "recorded_at": moment})
    path = tmp_path / "times.ndjson"
    path.write_text("\n".join([bad, good[1]]) + "\n", encoding="utf-8")
    code, subjects, stderr = _replay_json(path)
    assert code == 1
    line = " ".join(stderr.split())
    assert "times.ndjson:1: invalid_record: occurred_at" in line
    assert (
        line.count("hours 00 to 23 and seconds 00 to 59, so neither 24:00 nor a leap second") == 1
    )
    assert sum(s["state"]["version"] for s in subjects) == 1


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("confidence", True),
        ("confidence", "0.9"),
        ("occurred_at", 1704844800000),
        ("occurred_at", "1704844800"),
        ("recorded_at", 1704844800.5),
    ],
)
def test_given_a_value_of_the_wrong_json_type_then_a_line_error_instead_of_a_guess(
    tmp_path: Path, field: str, value: object
) -> None:
    """`true` is not a confidence of 1.0, and a count of seconds or milliseconds is not a time:
    pydantic's lax reading would coerce both and guess the unit of the count."""
    good = SAMPLE.read_text(encoding="utf-8").splitlines()[:2]
    bad = json.dumps(json.loads(good[0]) | {field: value})
    path = tmp_path / "typed.ndjson"
    path.write_text("\n".join([bad, good[1]]) + "\n", encoding="utf-8")
    code, subjects, stderr = _replay_json(path)
    assert code == 1
    assert f"typed.ndjson:1: invalid_record: {field}" in stderr
    assert sum(s["state"]["version"] for s in subjects) == 1


@pytest.mark.parametrize(
    ("event_type", "field", "payload"),
    [
        (
            "AllergyRecorded",
            "negated",
            {"allergy_id": "a-1", "substance": "penicillin", "negated": "false"},
        ),
        ("ConsentChanged", "granted", {"purpose": "research", "granted": 1}),
        (
            "TravelRecorded",
            "departure_date",
            {
                "trip_id": "t-1",
                "origin_country": "NL",
                "destination_country": "US",
                "departure_date": 1704844800,
            },
        ),
    ],
)
def test_given_a_payload_flag_or_date_of_the_wrong_json_type_then_a_line_error(
    tmp_path: Path, event_type: str, field: str, payload: dict[str, object]
) -> None:
    """`"false"` as text is not the boolean false (lax parsing would also read `"yes"`, `1`
    and `"on"` as true), and a number is not a calendar date."""
    good = json.loads(SAMPLE.read_text(encoding="utf-8").splitlines()[0])
    path = tmp_path / "payload.ndjson"
    path.write_text(json.dumps(good | {"type": event_type, "payload": payload}) + "\n")
    code, subjects, stderr = _replay_json(path)
    assert code == 1
    assert f"payload.ndjson:1: invalid_record: payload.{field}" in stderr
    assert subjects == []


def test_given_text_with_unicode_line_separators_then_each_subject_stays_one_json_line(
    tmp_path: Path,
) -> None:
    event = json.loads(SAMPLE.read_text(encoding="utf-8").splitlines()[0])
    event["source_ref"] = "first\u2028second\u2029third\u0085fourth"
    path = tmp_path / "separators.ndjson"
    path.write_text(json.dumps(event, ensure_ascii=False) + "\n", encoding="utf-8")
    code, subjects, stderr = _replay_json(path)
    assert code == 0, stderr
    assert len(subjects) == 1
    assert "first\u2028second\u2029third\u0085fourth" in json.dumps(subjects[0], ensure_ascii=False)


def test_given_a_file_that_starts_with_a_byte_order_mark_then_its_first_event_counts(
    tmp_path: Path,
) -> None:
    path = tmp_path / "windows.ndjson"
    path.write_bytes(b"\xef\xbb\xbf" + SAMPLE.read_bytes())
    code, subjects, stderr = _replay_json(path)
    plain_code, plain_subjects, _ = _replay_json(SAMPLE)
    assert (code, subjects) == (plain_code, plain_subjects), stderr


def test_given_a_rejected_event_then_the_exit_code_says_so_and_the_reason_is_shown(
    tmp_path: Path,
) -> None:
    line = json.loads(SAMPLE.read_text(encoding="utf-8").splitlines()[0]) | {"actor": "intruder"}
    path = tmp_path / "rejected.ndjson"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    code, subjects, _ = _replay_json(path)
    assert code == 1
    assert subjects[0]["rejected"][0]["reasons"] == ["actor_not_allowed"]


@pytest.mark.parametrize(
    ("name", "content", "options"),
    [
        pytest.param("empty.ndjson", "", [], id="an empty event file"),
        pytest.param("blank.ndjson", "\n\n", [], id="an event file of blank lines"),
        pytest.param(
            "bundle.json",
            '{"resourceType": "Bundle", "type": "collection"}',
            ["--format", "fhir"],
            id="a FHIR Bundle without entries",
        ),
    ],
)
def test_given_input_without_events_then_it_says_so(
    tmp_path: Path, name: str, content: str, options: list[str]
) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    result = runner.invoke(app, ["replay", "--file", str(path), *options])
    assert result.exit_code == 0
    assert f"no events in {name}" in result.stderr


def test_given_a_subject_erased_in_the_file_then_no_alert_of_it_is_printed(tmp_path: Path) -> None:
    events = [
        make_event("AllergyRecorded", "allergy", payload={"substance": "penicillin"}),
        make_event(
            "MedicationPrescribed",
            "order",
            at=timedelta(days=1),
            payload={"prescription_id": "rx-1", "drug": "amoxicillin"},
        ),
        make_event("ErasureRequested", "erase", at=timedelta(days=2), purpose="erasure"),
    ]
    path = tmp_path / "erased.ndjson"
    path.write_text("".join(e.model_dump_json() + "\n" for e in events), encoding="utf-8")
    code, [subject], _ = _replay_json(path)
    assert code == 0
    assert subject["state"]["erased"] is True
    assert subject["alerts"] == []


def test_given_names_with_square_brackets_then_the_table_shows_them_as_written(
    tmp_path: Path,
) -> None:
    allergy = make_event(
        "AllergyRecorded", "bracket-allergy", payload={"substance": "penicillin [/red]"}
    )
    order = make_event(
        "MedicationPrescribed",
        "bracket-order",
        at=timedelta(days=1),
        payload={"drug": "Amoxicillin [as trihydrate]"},
    )
    path = tmp_path / "brackets.ndjson"
    path.write_text(
        "".join(event.model_dump_json() + "\n" for event in (allergy, order)), encoding="utf-8"
    )
    result = runner.invoke(app, ["replay", "--file", str(path)])
    assert result.exit_code == 0, result.output
    assert "active allergies: penicillin [/red]" in result.stdout
    assert "active medications: Amoxicillin [as trihydrate]" in result.stdout
    assert "critical" in result.stdout


def test_given_control_characters_in_a_drug_name_then_the_order_is_refused_naming_the_code_point(
    tmp_path: Path,
) -> None:
    order = make_event(
        "MedicationPrescribed",
        "escape-order",
        payload={"drug": "Amoxicillin \x1b]0;pwned\x07\x1b[31mRED"},
    )
    path = tmp_path / "escapes.ndjson"
    path.write_text(order.model_dump_json() + "\n", encoding="utf-8")
    result = runner.invoke(app, ["replay", "--file", str(path), "--json"])
    assert result.exit_code == 1
    assert not any(character in result.output for character in "\x1b\x07")
    (subject,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert subject["state"]["medications"]["active"] == []
    (refused,) = subject["rejected"]
    assert refused["detail"] == "invalid_record: payload.drug holds a control character (U+001B)"


@pytest.mark.parametrize("as_json", [False, True], ids=["for people", "as JSON"])
def test_given_a_name_accepted_with_control_characters_then_it_is_printed_escaped(
    as_json: bool,
) -> None:
    """Memory accepted before the gate refused control characters is still shown safely: an
    escape sequence cannot recolour or retitle the terminal, and JSON reads back the text."""
    drug = "Amoxicillin \x1b]0;pwned\x07\x1b[31m\x9b2J\x7f"
    order = make_event("MedicationPrescribed", "escape-old", payload={"drug": drug})
    console = DataConsole()
    console.file = io.StringIO()
    results = {order.key: SubjectResult(replay([order]))}
    (print_json if as_json else print_human)(results, console)
    printed = console.file.getvalue()
    assert not any(character in printed for character in "\x1b\x07\x9b\x7f")
    if as_json:
        (subject,) = [json.loads(line) for line in printed.splitlines()]
        assert subject["state"]["medications"]["active"][0]["drug"] == drug
    else:
        assert "active medications: Amoxicillin \\x1b]0;pwned\\x07\\x1b[31m" in printed


@pytest.mark.parametrize(
    ("tenant", "subject", "heading"),
    [
        pytest.param(
            "clinic-a",
            "evil\x1b]0;pwned\x07\x1b[31mRED",
            "clinic-a:evil\\x1b]0;pwned\\x07\\x1b[31mRED  version 0",
            id="given an escape sequence in a subject id",
        ),
        pytest.param(
            "t\x1b[31m",
            "s1",
            "t\\x1b[31m:s1  version 0",
            id="given an escape sequence in a tenant id",
        ),
    ],
)
def test_given_control_characters_in_a_refused_events_ids_then_its_section_heading_shows_them_escaped(
    tmp_path: Path, tenant: str, subject: str, heading: str
) -> None:
    event = make_event("PreferenceStated", "escape-ids", tenant=tenant, subject=subject)
    path = tmp_path / "ids.ndjson"
    path.write_text(event.model_dump_json() + "\n", encoding="utf-8")
    result = runner.invoke(app, ["replay", "--file", str(path)])
    assert result.exit_code == 1
    assert not any(character in result.output for character in "\x1b\x07")
    assert heading in result.stdout


def test_given_the_same_file_twice_then_the_repeats_change_nothing_and_fail_nothing(
    tmp_path: Path,
) -> None:
    result = runner.invoke(app, ["replay", "--file", str(SAMPLE), "--file", str(SAMPLE)])
    once = runner.invoke(app, ["replay", "--file", str(SAMPLE)])
    assert result.exit_code == 0, result.stderr
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()
    assert f"{len(lines)} exact repeat(s) of accepted events changed nothing" in result.stderr
    hashes = [line for line in result.stdout.splitlines() if line.startswith("state_hash")]
    assert hashes == [line for line in once.stdout.splitlines() if line.startswith("state_hash")]


def test_given_an_event_id_used_again_for_other_content_then_it_still_fails(
    tmp_path: Path,
) -> None:
    first = json.loads(SAMPLE.read_text(encoding="utf-8").splitlines()[0])
    changed = first | {"confidence": 0.5}
    path = tmp_path / "reused.ndjson"
    path.write_text(json.dumps(first) + "\n" + json.dumps(changed) + "\n", encoding="utf-8")
    code, subjects, stderr = _replay_json(path)
    assert code == 1
    assert subjects[0]["rejected"][0]["reasons"] == ["event_id_reused"]
    assert "exact repeat" not in stderr


def test_given_two_event_files_of_one_name_then_their_errors_name_the_paths(
    tmp_path: Path,
) -> None:
    paths = []
    for part in ("monday", "tuesday"):
        (tmp_path / part).mkdir()
        path = tmp_path / part / "events.ndjson"
        path.write_text("{broken\n", encoding="utf-8")
        paths.append(path)
    result = runner.invoke(app, ["replay", "--file", str(paths[0]), "--file", str(paths[1])])
    assert result.exit_code == 1
    assert f"{paths[0]}:1" in result.stderr
    assert f"{paths[1]}:1" in result.stderr


@pytest.mark.parametrize(
    "named",
    [
        pytest.param(lambda a, b: [str(a), str(b)], id="listed after the options, as a glob"),
        pytest.param(lambda a, b: ["--file", str(a), str(b)], id="one by --file, one listed"),
    ],
)
def test_given_the_events_split_over_files_named_either_way_then_the_output_of_the_whole_file(
    tmp_path: Path, named: Any
) -> None:
    lines = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)
    first, second = tmp_path / "part-1.ndjson", tmp_path / "part-2.ndjson"
    first.write_text("".join(lines[::2]), encoding="utf-8")
    second.write_text("".join(lines[1::2]), encoding="utf-8")
    result = runner.invoke(app, ["replay", *named(first, second), "--json"])
    assert result.exit_code == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == _replay_json(SAMPLE)[1]


def test_given_files_and_from_kafka_together_then_a_usage_error() -> None:
    result = runner.invoke(app, ["replay", str(SAMPLE), "--from-kafka"])
    assert result.exit_code == 2
    assert "give exactly one of event files" in result.stderr


def _course_file(tmp_path: Path) -> Path:
    """A penicillin allergy, then a one-week amoxicillin course that is never stopped."""
    events = [
        make_event("AllergyRecorded", "allergy"),
        make_event(
            "MedicationPrescribed",
            "course",
            at=timedelta(days=30),
            valid_until=T0 + timedelta(days=37),
        ),
    ]
    path = tmp_path / "course.ndjson"
    path.write_text("".join(e.model_dump_json() + "\n" for e in events), encoding="utf-8")
    return path


def _lifecycle(options: list[str]) -> tuple[list[str], list[str]]:
    result = runner.invoke(app, ["replay", *options, "--json"])
    assert result.exit_code == 0, result.stderr
    (subject,) = [json.loads(line) for line in result.stdout.splitlines()]
    return [a["status"] for a in subject["alerts"]], [a["alert_id"] for a in subject["alerts"]]


@pytest.mark.parametrize(
    ("as_of", "statuses"),
    [
        pytest.param([], ["raised"], id="without --as-of, judged at the last event"),
        pytest.param(["--as-of", "2024-02-03T00:00:00Z"], ["raised"], id="during the course"),
        pytest.param(["--as-of", "2024-03-01"], ["raised", "resolved"], id="after the course"),
        pytest.param(["--as-of", "now"], ["raised", "resolved"], id="now"),
    ],
)
def test_given_a_course_that_ran_out_then_as_of_a_later_time_its_alert_is_resolved(
    tmp_path: Path, as_of: list[str], statuses: list[str]
) -> None:
    seen, ids = _lifecycle([str(_course_file(tmp_path)), *as_of])
    assert seen == statuses
    assert len(set(ids)) == 1


@pytest.mark.parametrize(
    ("as_of", "noted"),
    [
        pytest.param("2024-01-15", True, id="given a time before the subject's last event"),
        pytest.param("2024-03-01", False, id="given a time after it"),
    ],
)
def test_given_as_of_before_a_subject_s_own_time_then_the_replay_says_it_stays(
    tmp_path: Path, as_of: str, noted: bool
) -> None:
    """A subject's clock never moves back: an earlier --as-of is said to leave it as is."""
    result = runner.invoke(app, ["replay", str(_course_file(tmp_path)), "--as-of", as_of])
    assert result.exit_code == 0
    said = "is before the latest event of clinic-a:patient-1: a subject's time never moves back"
    assert (said in " ".join(result.stderr.split())) is noted


def test_given_as_of_a_later_time_then_the_course_is_no_longer_listed_as_active(
    tmp_path: Path,
) -> None:
    path = _course_file(tmp_path)
    judged_now = runner.invoke(app, ["replay", str(path), "--as-of", "now"])
    judged_at_the_file = runner.invoke(app, ["replay", str(path)])
    assert "active medications: -" in judged_now.stdout
    assert "active medications: amoxicillin" in judged_at_the_file.stdout


@pytest.mark.parametrize(
    ("as_of", "standing"),
    [
        pytest.param([], "active", id="judged at the last event"),
        pytest.param(["--as-of", "2024-03-01"], "expired", id="after the course"),
    ],
)
def test_given_a_course_then_its_json_state_files_it_by_how_it_stands_at_that_time(
    tmp_path: Path, as_of: list[str], standing: str
) -> None:
    result = runner.invoke(app, ["replay", str(_course_file(tmp_path)), *as_of, "--json"])
    (subject,) = [json.loads(line) for line in result.stdout.splitlines()]
    filed = {
        key: [m["prescription_id"] for m in ms]
        for key, ms in subject["state"]["medications"].items()
    }
    assert filed == {"active": [], "scheduled": [], "expired": [], "stopped": []} | {
        standing: ["rx-1"]
    }


def test_given_a_course_not_yet_begun_then_its_json_state_files_it_as_scheduled(
    tmp_path: Path,
) -> None:
    later = make_event(
        "MedicationPrescribed",
        "later-course",
        valid_from=T0 + timedelta(days=10),
        valid_until=T0 + timedelta(days=17),
    )
    path = tmp_path / "later.ndjson"
    path.write_text(later.model_dump_json() + "\n", encoding="utf-8")
    result = runner.invoke(app, ["replay", str(path), "--json"])
    (subject,) = [json.loads(line) for line in result.stdout.splitlines()]
    medications = subject["state"]["medications"]
    assert [m["prescription_id"] for m in medications["scheduled"]] == ["rx-1"]
    assert medications["active"] == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param(["--as-of", "2999-01-01"], "not after now", id="a future time"),
        pytest.param(["--as-of", "next week"], "not an ISO 8601 time", id="not a time"),
        pytest.param(
            ["--from-kafka", "--as-of", "now"], "--as-of applies to event files", id="kafka"
        ),
    ],
)
def test_given_a_bad_as_of_then_a_usage_error(
    tmp_path: Path, options: list[str], message: str
) -> None:
    files = [] if "--from-kafka" in options else [str(_course_file(tmp_path))]
    result = runner.invoke(app, ["replay", *files, *options])
    assert result.exit_code == 2
    assert message in result.stderr


@pytest.mark.parametrize(
    ("line", "named"),
    [("null", "null"), ("[]", "an array"), ('"event"', "a string"), ("7", "a number")],
)
def test_given_a_line_that_is_json_but_no_object_then_the_error_names_its_json_type(
    tmp_path: Path, line: str, named: str
) -> None:
    path = tmp_path / "values.ndjson"
    path.write_text(line + "\n", encoding="utf-8")
    code, subjects, stderr = _replay_json(path)
    assert code == 1
    assert f"values.ndjson:1: invalid_record: expected a JSON object, got {named}" in stderr
    assert subjects == []


def test_given_one_allergy_id_recorded_for_two_purposes_then_the_summary_names_the_other_purpose(
    tmp_path: Path,
) -> None:
    consent = make_event(
        "ConsentChanged",
        "consent",
        purpose="research",
        payload={"purpose": "research", "granted": True, "special_category": True},
    )
    care = make_event("AllergyRecorded", "care", at=timedelta(days=1))
    research = make_event("AllergyRecorded", "research", at=timedelta(days=2), purpose="research")
    path = tmp_path / "purposes.ndjson"
    path.write_text(
        "".join(json.dumps(event_document(e)) + "\n" for e in (consent, care, research)),
        encoding="utf-8",
    )
    result = runner.invoke(app, ["replay", "--file", str(path)])
    assert result.exit_code == 0, result.stderr
    assert "active allergies: penicillin, penicillin (for research)" in result.stdout
