"""FHIR files as exports and editors write them: gzipped, UTF-16, joined, pretty-printed, empty.

Each is read, or reported with what it is and how to fix it, never as a cascade of puzzling
JSON errors."""

from __future__ import annotations

import codecs
import gzip
import json
from datetime import UTC, datetime
from pathlib import Path

from typer.testing import CliRunner

from streams.cli_app import app
from streams.fhir_files import FhirFiles, read_fhir_files
from tests.unit.fhir.test_mapping import PENICILLIN

LINE = json.dumps(PENICILLIN)


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
    path.write_text(json.dumps({**PENICILLIN, "recordedDate": "2099-01-01"}), encoding="utf-8")
    result = CliRunner().invoke(app, ["replay", "--format", "fhir", "--file", str(path)])
    assert result.exit_code == 1
    assert "rejected future.json (AllergyIntolerance/medication): occurred_in_future" in (
        result.stdout
    )
