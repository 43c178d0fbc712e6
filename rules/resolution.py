"""A rule's reader of the knowledge layer: resolves a claim's name and codes, once per
distinct input (a subject's prescriptions and allergies are judged again on every event)."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from rules.knowledge.model import Coding, DrugKnowledge, DrugResolution
from schemas.events import Coding as WireCoding


class CachedResolver:
    def __init__(self, knowledge: DrugKnowledge) -> None:
        self._resolve = lru_cache(maxsize=65536)(knowledge.resolve)

    def __call__(self, text: str, codes: Iterable[WireCoding]) -> DrugResolution:
        """What `text` with its `codes` (as a claim carries them) resolves to."""
        return self._resolve(text, tuple(Coding(c.system, c.code, c.display) for c in codes))
