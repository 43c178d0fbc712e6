"""Shared fixtures for the drug knowledge layer tests."""

from __future__ import annotations

import pytest

from rules.knowledge.bundled import BundledKnowledge, load_bundled_knowledge


@pytest.fixture(scope="session")
def knowledge() -> BundledKnowledge:
    return load_bundled_knowledge()
