"""Country codes as events carry them, read one way wherever they are compared: a trip's
countries and the subject's `home_country` fact."""

from __future__ import annotations

from typing import Final

import pycountry

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


_NAMED: Final = frozenset(
    {country.alpha_2 for country in pycountry.countries}
    | {
        code
        for country in pycountry.historic_countries
        if (code := getattr(country, "alpha_2", None)) is not None
    }
    | {"XK"}
)
"""The alpha-2 codes that name a country: assigned in ISO 3166-1 (pycountry's data), formerly
assigned (ISO 3166-3: YU, SU, AN... for a trip long ago), and XK, the code in common use for
Kosovo (ISO reserves the X range for such use)."""


def names_a_country(code: str) -> bool:
    """Whether an alpha-2 code (as `iso_country` reads it) names a country, rather than one
    unassigned ("XX", "QQ", "AB") or reserved for private use ("ZZ")."""
    return code in _NAMED
