"""Throughput and memory of the FHIR R4 import (`uac publish|replay --format fhir`).

Builds bulk-export NDJSON from the CC0 Synthea 10-patient fixture, copied COPIES times with
every uuid renamed per copy (so each copy is another 13 patients with their own resources), and
prints, per size:

1. import: reading the files, parsing the JSON and mapping every resource to events, skips or
   errors (`import_fhir_files`), in input lines/s and events/s;
2. encode: the Avro encoding of those events (what `read_fhir_files` adds), in events/s;
3. memory: the growth of the process's peak resident set over the import (an input set is
   mapped at once, so that references resolve across files: memory grows with the input).

Figures are noisy on a 2-core machine: compare them with each other within one run.
Run: `.venv/bin/python -m benchmarks.fhir_import`.
"""

from __future__ import annotations

import re
import resource
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.output import machine_speed_around
from schemas.codec import event_codec
from schemas.fhir.mapping import ImportContext
from streams.fhir_files import import_fhir_files

SYNTHEA = (
    Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "fhir" / "synthea-10-patients"
)
COPIES = (1, 10, 40)
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
CONTEXT = ImportContext("clinic-a", "fhir-import", datetime(2025, 9, 17, tzinfo=UTC))


def write_copies(directory: Path, copies: int) -> int:
    """One NDJSON file per resource type holding `copies` renamed copies; the line count."""
    lines = 0
    for source in sorted(SYNTHEA.glob("*.ndjson")):
        original = source.read_text(encoding="utf-8").splitlines()
        with (directory / source.name).open("w", encoding="utf-8") as target:
            for copy in range(copies):
                suffix = f"-c{copy}"
                for line in original:
                    target.write(UUID.sub(rf"\g<0>{suffix}", line) + "\n")
                    lines += 1
    return lines


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(copies: int) -> None:
    with tempfile.TemporaryDirectory(prefix="uac-fhir-bench-") as folder:
        directory = Path(folder)
        lines = write_copies(directory, copies)
        before = peak_rss_mib()
        started = time.perf_counter()
        imported = import_fhir_files(sorted(directory.glob("*.ndjson")), CONTEXT)
        mapped = time.perf_counter() - started
        grown = peak_rss_mib() - before
        codec = event_codec()
        started = time.perf_counter()
        for _, event in imported.events:
            codec.encode(event)
        encoded = time.perf_counter() - started
    events = len(imported.events)
    print(
        f"{copies:>3} copies, {lines:,} lines -> {events:,} events, {len(imported.skipped):,}"
        f" skipped, {len(imported.errors)} errors: import {lines / mapped:,.0f} lines/s"
        f" ({events / mapped:,.0f} events/s, {mapped:.1f} s); encode {events / encoded:,.0f}"
        f" events/s; peak RSS grew {grown:,.0f} MiB",
        flush=True,
    )


def main() -> None:
    with machine_speed_around():
        for copies in COPIES:
            measure(copies)


if __name__ == "__main__":
    main()
