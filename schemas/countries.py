"""Country codes as events carry them, read one way wherever they are compared: a trip's
countries and the subject's `home_country` fact."""

from __future__ import annotations

from typing import Final

HOME_COUNTRY: Final = "home_country"
"""The fact key that names the subject's home country, against which a trip is international."""

_ALIASES: Final = {"UK": "GB"}
"""Two-letter codes in use for a country whose ISO 3166-1 code is another: "UK" is the United
Kingdom, "GB" in ISO 3166-1 (which reserves "UK" for it)."""


def iso_country(value: str) -> str | None:
    """`value` as an ISO 3166-1 alpha-2 code: spaces around it dropped, in upper case, "UK" read
    as "GB"; None when it is not two letters (an alpha-3 code such as "NLD" or a country's name
    is not guessed at)."""
    code = value.strip().upper()
    if len(code) != 2 or not code.isascii() or not code.isalpha():
        return None
    return _ALIASES.get(code, code)
