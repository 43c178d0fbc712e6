"""FHIR files as exports and editors write them: gzipped, UTF-16 or -32, joined, pretty-printed,
empty.

Each is read, or reported with what it is and how to fix it, never as a cascade of puzzling
JSON errors."""

from __future__ import annotations

import codecs
import gzip
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from streams.cli_app import app
from streams.fhir_files import FhirFiles, read_fhir_files
from tests.unit.fhir.test_mapping import PENICILLIN

LINE = json.dumps(PENICILLIN)
BUNDLE = json.dumps(
    {"resourceType": "Bundle", "type": "collection", "entry": [{"resource": PENICILLIN}]}
)


def read(*paths: Path) -> FhirFiles:
    return read_fhir_files(
        list(paths), tenant_id="clinic-a", actor="fhir-import", fallback_time=datetime.now(UTC)
    )


def allergies(files: FhirFiles) -> list[str]:
    return [item.event.source_ref or "" for item in files.submitted]


def messages(files: FhirFiles) -> list[tuple[str, str]]:
    return [(error.origin, error.message) for error in files.errors]


def test_a_gzipped_bulk_export_is_read_line_by_line(tmp_path: Path) -> None:
    path = tmp_path / "AllergyIntolerance.000.ndjson.gz"
    other = json.dumps({**PENICILLIN, "id": "second"})
    path.write_bytes(gzip.compress(f"{LINE}\n{other}\n".encode()))
    files = read(path)
    assert messages(files) == []
    assert allergies(files) == ["AllergyIntolerance/medication", "AllergyIntolerance/second"]


def test_a_gzipped_bundle_is_read_as_one_document(tmp_path: Path) -> None:
    path = tmp_path / "bundle.json.gz"
    bundle = {"resourceType": "Bundle", "type": "collection", "entry": [{"resource": PENICILLIN}]}
    path.write_bytes(gzip.compress(json.dumps(bundle).encode()))
    assert allergies(read(path)) == ["AllergyIntolerance/medication"]


def test_damaged_gzip_data_is_an_error_that_says_so(tmp_path: Path) -> None:
    path = tmp_path / "export.ndjson.gz"
    path.write_bytes(gzip.compress(f"{LINE}\n".encode() * 50)[:60])
    files = read(path)
    assert files.submitted == []
    assert [message for _, message in messages(files)][-1].startswith("the gzip data is damaged")


def test_a_utf16_file_with_its_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = tmp_path / "export.ndjson"
    path.write_bytes(codecs.BOM_UTF16_LE + f"{LINE}\r\n".encode("utf-16-le"))
    files = read(path)
    assert messages(files) == []
    assert allergies(files) == ["AllergyIntolerance/medication"]


@pytest.mark.parametrize(
    ("name", "encoded"),
    [
        pytest.param("export.ndjson", f"{LINE}\n".encode("utf-16-le"), id="UTF-16LE lines"),
        pytest.param("export.ndjson", f"{LINE}\n".encode("utf-16-be"), id="UTF-16BE lines"),
        pytest.param("bundle.json", BUNDLE.encode("utf-16-le"), id="a UTF-16LE bundle"),
        pytest.param("bundle.json", BUNDLE.encode("utf-32"), id="UTF-32 with its mark"),
        pytest.param("bundle.json", BUNDLE.encode("utf-32-be"), id="UTF-32BE"),
    ],
)
def test_a_utf16_or_utf32_file_without_or_with_its_mark_is_read(
    tmp_path: Path, name: str, encoded: bytes
) -> None:
    """Told by the zero bytes of JSON's first characters: it was a bare JSON syntax error
    ("Expecting property name ... at column 2") that said nothing of the encoding."""
    path = tmp_path / name
    path.write_bytes(encoded)
    files = read(path)
    assert messages(files) == []
    assert allergies(files) == ["AllergyIntolerance/medication"]


def test_a_byte_order_mark_at_the_start_of_a_joined_part_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "joined.ndjson"
    other = json.dumps({**PENICILLIN, "id": "second"})
    path.write_bytes(codecs.BOM_UTF8 + f"{LINE}\n".encode() + codecs.BOM_UTF8 + other.encode())
    files = read(path)
    assert messages(files) == []
    assert allergies(files) == ["AllergyIntolerance/medication", "AllergyIntolerance/second"]


def test_an_empty_json_file_is_reported_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "export.json"
    path.write_text("\n", encoding="utf-8")
    assert messages(read(path)) == [("export.json", "the file is empty")]


def test_a_trailing_comma_on_a_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "export.ndjson"
    path.write_text(f"{LINE},\n{LINE}\n", encoding="utf-8")
    ((origin, message),) = messages(read(path))
    assert origin == "export.ndjson:1"
    assert "the line ends with a ','" in message


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        pytest.param(
            "bundle.json",
            f"{BUNDLE}\x00\x00",
            f"not JSON: 2 NUL character(s) (U+0000) follow the complete JSON value, at column "
            f"{len(BUNDLE) + 1} (character offset {len(BUNDLE)}): nothing may follow the value",
            id="given NUL padding after a Bundle then the error names the NULs and where",
        ),
        pytest.param(
            "bundle.json",
            f"{BUNDLE}\n}}\n",
            f"not JSON: 1 character(s) that are not JSON ('}}') follow the complete JSON value, "
            f"at line 2 column 1 (character offset {len(BUNDLE) + 1})",
            id="given a stray brace on the next line then the error names it and its line",
        ),
        pytest.param(
            "export.ndjson",
            f"{LINE}xyz\n",
            "not JSON: 3 character(s) that are not JSON ('xyz') follow the complete JSON value, "
            f"at column {len(LINE) + 1}",
            id="given characters after the value of a line then the error names them",
        ),
    ],
)
def test_characters_after_a_complete_json_value_are_named_not_taken_for_another_value(
    tmp_path: Path, name: str, text: str, problem: str
) -> None:
    """NUL padding after a Bundle was reported as a second JSON value, with advice to use a
    .ndjson file."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    ((_, message),) = messages(read(path))
    assert message.startswith(problem)
    assert "ndjson" not in message


@pytest.mark.parametrize(
    ("name", "text", "hint"),
    [
        pytest.param(
            "export.json",
            f"{LINE}\n{LINE}\n",
            "(more than one JSON value: a bulk export, one resource per line, is read from a "
            ".ndjson file)",
            id="given a bulk export in a .json file then the hint names .ndjson",
        ),
        pytest.param(
            "export.ndjson",
            f"{LINE}\r{LINE}\r",
            "(more than one JSON value on the line, separated by a carriage return (CR) alone: "
            "the lines of a .ndjson file end with LF or CR LF)",
            id="given lines ended by CR alone then the hint names the line endings",
        ),
    ],
)
def test_a_second_json_value_is_told_where_it_belongs(
    tmp_path: Path, name: str, text: str, hint: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8", newline="")
    ((_, message),) = messages(read(path))
    assert message.startswith("not JSON: Extra data at ")
    assert message.endswith(hint)


def test_a_pretty_printed_document_in_an_ndjson_file_is_one_error_saying_so(
    tmp_path: Path,
) -> None:
    path = tmp_path / "export.ndjson"
    path.write_text(json.dumps(PENICILLIN, indent=2), encoding="utf-8")
    ((origin, message),) = messages(read(path))
    assert origin == "export.ndjson:1"
    assert "pretty-printed" in message
    assert "name the file .json" in message


def test_two_files_of_one_name_are_told_apart_by_their_paths(tmp_path: Path) -> None:
    paths = []
    for server in ("hospital-a", "hospital-b"):
        (tmp_path / server).mkdir()
        path = tmp_path / server / "AllergyIntolerance.000.ndjson"
        path.write_text("{not json}\n", encoding="utf-8")
        paths.append(path)
    origins = [origin for origin, _ in messages(read(*paths))]
    assert origins == [f"{paths[0]}:1", f"{paths[1]}:1"]


def test_a_refused_imported_record_is_named_in_the_replay_output(tmp_path: Path) -> None:
    path = tmp_path / "future.json"
    updated = {"lastUpdated": "2099-01-02T00:00:00Z"}
    future = {**PENICILLIN, "recordedDate": "2099-01-01", "meta": updated}
    path.write_text(json.dumps(future), encoding="utf-8")
    result = CliRunner().invoke(app, ["replay", "--format", "fhir", "--file", str(path)])
    assert result.exit_code == 1
    assert "rejected future.json (AllergyIntolerance/medication): occurred_in_future" in (
        result.stdout
    )
