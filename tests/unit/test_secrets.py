"""Secret screening: one combined search stands in for every token pattern."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from projections.secrets import (
    _ANY_TOKEN,
    _TOKEN_PATTERNS,
    FreeText,
    secrets_in,
    secrets_in_text,
    text_fields,
)

FRAGMENTS = (
    "sk_live_",
    "pk-test-",
    "AKIA",
    "ghp_",
    "xoxb-",
    "eyJ",
    ".eyJ",
    "-----BEGIN RSA PRIVATE KEY-----",
    "Password",
    "api key",
    "token",
    " is ",
    ": ",
    "=",
    "4111 1111 1111 1111",
    "4111",
    " 1111",
    "\n",
)
texts = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(alphabet="aZ09_-. :=/", max_size=40)),
    max_size=8,
).map("".join)


@given(texts)
def test_given_any_text_then_the_combined_search_finds_what_some_pattern_finds(text: str) -> None:
    assert bool(_ANY_TOKEN.search(text)) == any(p.search(text) for _, p in _TOKEN_PATTERNS)


@given(texts)
def test_given_any_text_then_the_kinds_named_are_those_of_the_patterns_that_match(
    text: str,
) -> None:
    kinds = {finding.kind for finding in secrets_in_text("note", text)}
    expected = {kind for kind, pattern in _TOKEN_PATTERNS if pattern.search(text)}
    assert kinds - {"a payment card number"} == expected


class Reaction(BaseModel):
    manifestation: str
    notes: tuple[str, ...]


class Claim(BaseModel):
    text: str
    reactions: tuple[Reaction, ...]
    tags: list[str]
    reference: int = 0


claims = st.builds(
    Claim,
    text=texts,
    reactions=st.lists(st.builds(Reaction, manifestation=texts, notes=st.tuples(texts, texts))).map(
        tuple
    ),
    tags=st.lists(texts, max_size=3),
    reference=st.one_of(st.integers(), st.just(4111111111111111)),
)


@given(claims)
def test_given_any_value_then_its_findings_are_those_of_each_string_searched_alone(
    claim: Claim,
) -> None:
    alone = [
        finding
        for field, text in text_fields(claim, "payload")
        for finding in secrets_in_text(field, text)
    ]
    assert secrets_in(FreeText({"payload": claim})) == alone


def test_given_a_card_number_sent_as_a_number_then_it_is_found() -> None:
    claim = Claim(text="x", reactions=(), tags=[], reference=4111111111111111)
    found = secrets_in(FreeText({"payload": claim}))
    assert [(f.field, f.kind) for f in found] == [("payload.reference", "a payment card number")]


def test_given_a_card_number_split_across_two_strings_then_nothing_is_found() -> None:
    claim = Claim(text="4111 1111", reactions=(), tags=["1111 1111"])
    assert secrets_in(FreeText({"payload": claim})) == []


def test_given_a_card_number_in_a_nested_string_then_its_path_is_named() -> None:
    reaction = Reaction(manifestation="rash", notes=("paid with 4111 1111 1111 1111",))
    claim = Claim(text="x", reactions=(reaction,), tags=[])
    found = secrets_in(FreeText({"payload": claim}))
    assert [(f.field, f.kind) for f in found] == [
        ("payload.reactions[0].notes[0]", "a payment card number")
    ]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        pytest.param("card 4111 1111 1111 1111 exp 12/29", True, id="given a card number"),
        pytest.param("call daughter +86 138 0013 8002", False, id="given an international phone"),
        pytest.param("ref 86 138 0013 8002", True, id="given the same digits without a plus"),
    ],
)
def test_a_card_number_is_found_but_not_an_international_phone_number(
    text: str, found: bool
) -> None:
    assert bool(secrets_in_text("note", text)) is found
