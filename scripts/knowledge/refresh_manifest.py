"""Rewrite `data/manifest.json` with the SHA-256 of every data file.

Usage: python -m scripts.knowledge.refresh_manifest [RELEASE]

Run it after editing any table, and give a new RELEASE (e.g. 2026.12) whenever the content
changes, so that alerts judged by different data cite different knowledge versions.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from rules.knowledge.tables import file_digest

DATA = Path(__file__).resolve().parents[2] / "rules" / "knowledge" / "data"
MANIFEST = DATA / "manifest.json"
TABLES = (
    "classes.csv",
    "ingredients.csv",
    "terms.csv",
    "derived_terms.csv",
    "noise_words.csv",
    "codes.csv",
    "cross_reactivity.csv",
    "therapeutic_groups.csv",
    "site_specific_classes.csv",
    "allergy_categories.csv",
    "side_chains.csv",
    "side_chain_levels.csv",
    "side_effects.csv",
    "product_forms.csv",
)


def refresh(release: str | None) -> dict[str, object]:
    current = json.loads(MANIFEST.read_text(encoding="utf-8")) if MANIFEST.exists() else {}
    files = {name: file_digest((DATA / name).read_text(encoding="utf-8")) for name in TABLES}
    return {
        "name": current.get("name", "uac-bundled"),
        "release": release or current.get("release", "2026.11"),
        "files": files,
    }


RELEASE = re.compile(r"\d{4}\.\d{2}(\.\d+)?")
"""Year.month, optionally .N for a second release in one month."""


def main(arguments: list[str]) -> None:
    release = arguments[0] if arguments else None
    if len(arguments) > 1 or (release is not None and not RELEASE.fullmatch(release)):
        sys.exit(
            f"usage: python -m scripts.knowledge.refresh_manifest [RELEASE like 2026.12]\n{__doc__}"
        )
    manifest = refresh(release)
    MANIFEST.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
