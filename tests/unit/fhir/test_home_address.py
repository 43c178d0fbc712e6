"""Which of a Patient's addresses names the home country, judged when the record was made (here
the import's fallback time, 2025-09-17): never an old or temporary one, nor one that has not
begun, a current one before one whose period has ended, a home address before a work or billing one,
and the first address that has a country (not just the first address)."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.events import FactAsserted
from tests.unit.fhir.test_mapping import PATIENT, changed, run


@pytest.mark.parametrize(
    ("addresses", "country"),
    [
        pytest.param(
            [{"use": "old", "country": "US"}, {"use": "work", "country": "DE"}],
            "DE",
            id="an old address is not where the patient lives",
        ),
        pytest.param(
            [{"use": "temp", "country": "TH"}, {"country": "GB"}],
            "GB",
            id="a temporary address is not where the patient lives",
        ),
        pytest.param(
            [
                {"use": "home", "country": "US", "period": {"start": "2000", "end": "2019"}},
                {"use": "home", "country": "DE", "period": {"start": "2020"}},
            ],
            "DE",
            id="a current home address before one whose period has ended",
        ),
        pytest.param(
            [{"use": "home", "city": "Berlin"}, {"use": "home", "country": "DE"}],
            "DE",
            id="a home address without a country does not hide one with a country",
        ),
        pytest.param(
            [{"use": "billing", "country": "CH"}, {"use": "work", "country": "FR"}],
            "FR",
            id="a work address before a billing address",
        ),
        pytest.param(
            [{"use": "work", "country": "FR"}, {"country": "BE"}],
            "BE",
            id="an address of no stated use before a work address",
        ),
        pytest.param(
            [{"use": "HOME", "country": "NL"}, {"country": "BE"}],
            "NL",
            id="the use is read whatever its case",
        ),
        pytest.param(
            [{"use": "home", "country": "US", "period": {"end": "2019"}}],
            "US",
            id="an ended home address when it is the only one",
        ),
        pytest.param(
            [
                {"use": "home", "country": "DE", "period": {"start": "2020", "end": "2030-12-31"}},
                {"use": "work", "country": "CH"},
            ],
            "DE",
            id="a home address whose period ends after the record was made is still in force",
        ),
        pytest.param(
            [
                {"use": "home", "country": "DE", "period": {"end": "2027-02-28"}},
                {"use": "home", "country": "FR", "period": {"start": "2027-03-01"}},
            ],
            "DE",
            id="an announced move is not yet the home",
        ),
        pytest.param(
            [
                {"use": "home", "country": "FR", "period": {"start": "2027-03-01"}},
                {"use": "home", "country": "DE"},
            ],
            "DE",
            id="an address that begins after the record was made, listed first, is not the home",
        ),
    ],
)
def test_the_home_country_comes_from_the_address_the_patient_lives_at(
    addresses: list[dict[str, Any]], country: str
) -> None:
    result = run(changed(PATIENT, address=addresses))
    assert (result.errors, result.skipped) == ([], [])
    assert [event.payload for _, event in result.events] == [
        FactAsserted(key="home_country", value=country)
    ]


@pytest.mark.parametrize(
    "addresses",
    [
        pytest.param([{"use": "old", "country": "US"}], id="only an old address"),
        pytest.param([{"use": "temp", "country": "TH"}], id="only a temporary address"),
        pytest.param(
            [{"use": "home", "country": "FR", "period": {"start": "2027-03-01"}}],
            id="only an address that has not begun",
        ),
    ],
)
def test_a_patient_with_no_address_they_live_at_gets_no_home_country(
    addresses: list[dict[str, Any]],
) -> None:
    result = run(changed(PATIENT, address=addresses))
    assert (result.events, result.errors) == ([], [])
    assert [s.reason for s in result.skipped] == [
        "Patient without an address country: no home_country fact (the records naming it are still imported)"
    ]


@pytest.mark.parametrize(
    ("addresses", "notice"),
    [
        pytest.param(
            [{"use": "home", "country": "NL"}, {"use": "home", "country": "BE"}],
            "address: addresses of the same use and standing name 'NL' and 'BE'; 'NL', listed "
            "first, is taken as the home country",
            id="two home addresses in two countries are reported",
        ),
        pytest.param(
            [{"use": "home", "country": "NL"}, {"use": "home", "country": "NLD"}],
            None,
            id="two spellings of one country are not",
        ),
        pytest.param(
            [{"use": "home", "country": "NL"}, {"use": "work", "country": "BE"}],
            None,
            id="a home and a work address are not",
        ),
    ],
)
def test_addresses_that_tie_in_different_countries_are_reported(
    addresses: list[dict[str, Any]], notice: str | None
) -> None:
    """The first listed is taken, as before; the record does not say which the patient lives
    in, so the import says so instead of choosing without a word."""
    result = run(changed(PATIENT, address=addresses))
    assert [event.payload for _, event in result.events] == [
        FactAsserted(key="home_country", value="NL")
    ]
    assert [line.detail for line in result.passed_over] == ([] if notice is None else [notice])
