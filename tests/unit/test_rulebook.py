"""The rulebook says which rules and knowledge judged the alerts; a worker of another build
says what changed and what to run, a worker of the same build says nothing."""

from __future__ import annotations

from rules.engine import default_rules
from rules.knowledge.bundled import load_bundled_knowledge
from streams.rulebook import Rulebook, unjudged

KNOWLEDGE = load_bundled_knowledge()
CURRENT = Rulebook.of(default_rules(KNOWLEDGE), KNOWLEDGE.version)


def test_the_rulebook_names_every_rule_with_its_version_and_the_knowledge_release() -> None:
    assert "polypharmacy v2" in CURRENT.rules and "drug-allergy-conflict v1" in CURRENT.rules
    assert CURRENT.rules == tuple(sorted(CURRENT.rules))
    assert Rulebook.decode(CURRENT.encode()) == CURRENT


def test_given_the_same_rulebook_or_an_empty_pipeline_then_nothing_to_say() -> None:
    assert unjudged(CURRENT, CURRENT, history=True) is None
    assert unjudged(None, CURRENT, history=False) is None


def test_given_another_rulebook_then_every_change_and_the_command_are_named() -> None:
    earlier = Rulebook(
        (*(rule for rule in CURRENT.rules if rule != "polypharmacy v2"), "retired-rule v3"),
        "uac-bundled-2026.12.1",
    )
    warning = unjudged(earlier, CURRENT, history=True)
    assert warning is not None
    assert "new polypharmacy v2" in warning
    assert "no longer retired-rule v3" in warning
    assert f"knowledge uac-bundled-2026.12.1 -> {KNOWLEDGE.version}" in warning
    assert "uac rejudge" in warning


def test_given_accepted_events_but_no_rulebook_then_a_rejudge_is_asked_for() -> None:
    warning = unjudged(None, CURRENT, history=True)
    assert warning is not None and "no record" in warning and "uac rejudge" in warning


def test_an_unreadable_record_is_refused_by_decode_with_an_error_the_reader_catches() -> None:
    for value in (b"not json", b"{}", b'{"rules": 3, "knowledge": "x"}'):
        try:
            Rulebook.decode(value)
        except (ValueError, KeyError, TypeError):
            continue
        raise AssertionError(f"{value!r} was read as a rulebook")
