"""Score the bundled drug knowledge against the shared pair table.

Usage: python scripts/knowledge_eval.py [PAIRS_CSV]

Prints the number of pairs, recall on pairs that must alert (expected same_ingredient,
same_class or partial), false alerts on pairs that must not alert (expected none or low_risk
but judged at an alerting level), and a confusion summary per expected level.
Exits 1 when any pair is judged differently from the table.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PAIRS = ROOT / "tests" / "fixtures" / "knowledge" / "pairs.csv"


def main(arguments: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from rules.knowledge.bundled import load_bundled_knowledge
    from rules.knowledge.evaluation import read_pairs, score, summary_lines

    path = Path(arguments[0]) if arguments else DEFAULT_PAIRS
    knowledge = load_bundled_knowledge()
    result = score(knowledge, read_pairs(path.read_text(encoding="utf-8")))
    print(f"knowledge: {knowledge.version}")
    print(f"table: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    for line in summary_lines(result):
        print(line)
    return 0 if result.exact == result.pairs else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
