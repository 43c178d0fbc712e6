"""Derive `data/derived_terms.csv` from the MIT-licensed `drug-named-entity-recognition` data.

Usage:
    pip download --no-deps drug-named-entity-recognition==2.0.9 -d /tmp/dner
    unzip /tmp/dner/*.whl -d /tmp/dner/x
    python -m scripts.knowledge.derive_dner_terms \\
        /tmp/dner/x/drug_named_entity_recognition/drug_ner_dictionary.pkl.bz2
    python -m scripts.knowledge.refresh_manifest 2026.12

Only synonyms and brand names of drugs that the curated tables already know are kept: a DNER
canonical name must resolve completely through the curated lexicon (ingredient names, curated
terms, noise words), and each of its variants is added only when it is new, short and maps to
exactly one canonical name. The package is not a run-time dependency.
"""

from __future__ import annotations

import bz2
import csv
import pickle
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rules.knowledge.recognise import Recogniser
from rules.knowledge.tables import build_lexicon, core_tables, data_text
from scripts.knowledge.refresh_manifest import DATA, TABLES

SOURCE = "drug-named-entity-recognition 2.0.9 (MIT)"
PLAIN_NAME = re.compile(r"[^\W\d_][\w' .\-/]*", re.UNICODE)
KINDS = {True: "brand", False: "synonym"}
MAX_WORDS = 4
MIN_LENGTH = 4
OUTPUT = DATA / "derived_terms.csv"


def curated_recogniser() -> tuple[Recogniser, frozenset[str]]:
    """A recogniser over the curated lexicon only, and the non-drug (food, environment) names."""
    texts = {name: data_text(name) for name in TABLES}
    _, ingredients, known = core_tables(texts)
    non_drugs = frozenset(name for name, item in ingredients.items() if item.kind != "drug")
    lexicon = build_lexicon(texts, ingredients, known, with_derived=False)
    return Recogniser(lexicon, {}), non_drugs


def load_dictionary(path: Path) -> dict[str, Any]:
    with bz2.open(path, "rb") as packed:
        dictionary: dict[str, Any] = pickle.load(packed)  # noqa: S301 - trusted pinned file
    return dictionary


def derived_rows(dictionary: dict[str, Any]) -> Iterator[tuple[str, str, str, str]]:
    recogniser, non_drugs = curated_recogniser()
    variants: dict[str, list[str]] = dictionary["drug_variant_to_canonical"]
    variant_data: dict[str, dict[str, Any]] = dictionary["drug_variant_to_variant_data"]
    for variant, canonicals in sorted(variants.items()):
        if len(canonicals) != 1 or not _plausible(variant, recogniser):
            continue
        concepts, unknown = recogniser.parse(canonicals[0])
        if not concepts or unknown or non_drugs.intersection(concepts):
            continue
        is_brand = variant_data.get(variant, {}).get("is_brand")
        kind = KINDS.get(is_brand, "variant") if isinstance(is_brand, bool) else "variant"
        yield variant, ";".join(sorted(set(concepts))), kind, SOURCE


def _plausible(variant: str, recogniser: Recogniser) -> bool:
    """New to the curated lexicon, short, and not a word the curated tables already read."""
    words, unknown = recogniser.parse(variant)
    return (
        PLAIN_NAME.fullmatch(variant) is not None
        and len(variant) >= MIN_LENGTH
        and len(variant.split()) <= MAX_WORDS
        and not any(char.isdigit() for char in variant)
        and bool(unknown)
        and not words
    )


def main(arguments: list[str]) -> None:
    rows = sorted(set(derived_rows(load_dictionary(Path(arguments[0])))))
    with OUTPUT.open("w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(("term", "concepts", "kind", "source"))
        writer.writerows(rows)


if __name__ == "__main__":
    main(sys.argv[1:])
