"""Secret screening: one combined search stands in for every token pattern."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from projections.secrets import _ANY_TOKEN, _TOKEN_PATTERNS, secrets_in_text

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
