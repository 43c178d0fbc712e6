"""Cost of the drug knowledge layer: loading the bundled tables, and reading free text.

Prints the seconds `load_bundled_knowledge` takes and the resident memory it leaves, then the
time the recogniser takes per text (best of ROUNDS) over every curated term and ingredient name
of the tables and every fixture text, each also with a strength and dose form appended and as
an item of a list (the shapes prescriptions and allergy lists take). The rules cache each
judgement (`rules.drug_allergy`, `rules.duplicate_therapy`), so this is paid once per distinct
text. Run: `.venv/bin/python -m benchmarks.knowledge_resolution`.
"""

from __future__ import annotations

import csv
import io
import resource
import time
from pathlib import Path

from benchmarks.output import machine_speed_around
from rules.knowledge.bundled import load_bundled_knowledge
from rules.knowledge.tables import data_text

ROUNDS = 5
FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "knowledge"
SHAPES = ("{}", "{} 500 mg tablet", "{}, 10 mg/ml oral solution, pen", "latex; {}")


def _texts() -> list[str]:
    names = [row["term"] for row in csv.DictReader(io.StringIO(data_text("terms.csv")))]
    names += [
        row["ingredient"] for row in csv.DictReader(io.StringIO(data_text("ingredients.csv")))
    ]
    for fixture in ("common_prescriptions.txt", "common_allergies.txt"):
        lines = (FIXTURES / fixture).read_text(encoding="utf-8").splitlines()
        names += [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    return [shape.format(name) for name in names for shape in SHAPES]


def main() -> None:
    with machine_speed_around():
        started = time.perf_counter()
        knowledge = load_bundled_knowledge()
        knowledge.resolve("amoxicillin")
        loaded = time.perf_counter() - started
        memory = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        print(f"load: {loaded:.2f} s, peak resident memory {memory} MiB ({knowledge.version})")
        texts = _texts()
        best = min(_parse_seconds(texts) for _ in range(ROUNDS))
        print(
            f"read: {len(texts):,} texts in {best * 1e3:.0f} ms (best of {ROUNDS}), "
            f"{best / len(texts) * 1e6:.1f} us per text"
        )


def _parse_seconds(texts: list[str]) -> float:
    knowledge = load_bundled_knowledge.__wrapped__()
    started = time.perf_counter()
    for text in texts:
        knowledge.resolve(text)
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
