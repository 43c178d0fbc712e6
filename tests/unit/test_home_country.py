"""A trip is international against the home country read as its own countries are: codes in
any case and spacing compare alike, "UK" is GB, and a value that is no code leaves it unknown."""

from __future__ import annotations

from datetime import timedelta

import pytest

from projections.document import state_hash
from projections.gate import Admitted, GateContext, GatePolicy, Rejected, TenantPolicy, admit
from projections.queries import trips
from projections.state import initial_state, replay
from schemas.countries import iso_country
from schemas.events import Event
from tests.factories import T0, make_event

POLICY = GatePolicy(tenants={"clinic-a": TenantPolicy(frozenset({"ehr-adapter"}))})


def _home(value: str) -> Event:
    return make_event(
        "FactAsserted", f"home-{value}", payload={"key": "home_country", "value": value}
    )


def _trip(name: str, origin: str, destination: str, days: int = 1) -> Event:
    payload = {
        "trip_id": name,
        "origin_country": origin,
        "destination_country": destination,
        "departure_date": "2024-01-05",
    }
    return make_event("TravelRecorded", name, at=timedelta(days=days), payload=payload)


@pytest.mark.parametrize(
    ("value", "code"),
    [
        pytest.param("NL", "NL", id="given an upper-case code then itself"),
        pytest.param("nl", "NL", id="given a lower-case code then in upper case"),
        pytest.param(" NL ", "NL", id="given spaces around a code then without them"),
        pytest.param("UK", "GB", id="given UK then GB, its ISO 3166-1 code"),
        pytest.param("NLD", None, id="given an alpha-3 code then none"),
        pytest.param("Netherlands", None, id="given a name then none"),
        pytest.param("N1", None, id="given a digit then none"),
    ],
)
def test_a_country_is_read_as_an_iso_alpha_2_code(value: str, code: str | None) -> None:
    assert iso_country(value) == code


@pytest.mark.parametrize(
    ("home", "trip", "shown"),
    [
        pytest.param("nl", _trip("t1", "NL", "NL"), ("NL", "NL", False), id="given home nl"),
        pytest.param(" NL ", _trip("t1", "nl", "nl"), ("NL", "NL", False), id="given home ' NL '"),
        pytest.param("GB", _trip("t1", "GB", "UK"), ("GB", "GB", False), id="given a trip to UK"),
        pytest.param("UK", _trip("t1", "NL", "GB"), ("GB", "GB", False), id="given home UK"),
        pytest.param("nl", _trip("t1", "NL", "BE"), ("NL", "BE", True), id="given a trip abroad"),
        pytest.param("NLD", _trip("t1", "NL", "NL"), (None, "NL", None), id="given home NLD"),
    ],
)
def test_given_a_home_country_then_a_trip_is_international_only_when_it_leaves_it(
    home: str, trip: Event, shown: tuple[str | None, str, bool | None]
) -> None:
    (found,) = trips(replay([_home(home), trip]))
    assert (found.home_country, found.destination_country, found.international) == shown


def test_given_codes_already_in_iso_form_then_the_state_hash_is_the_one_before_the_normalising() -> (
    None
):
    events = [_home("NL"), _trip("t1", "NL", "GB"), _trip("t2", "gb", " nl ", days=2)]
    assert state_hash(replay(events)) == PINNED_HASH


PINNED_HASH = "1ff140b11674581d76452afa15adf5d7d267217cf69e9d76eb9afe9a7cb412c4"


def _admit(event: Event) -> Admitted | Rejected:
    context = GateContext(now=T0 + timedelta(days=30), policy=POLICY, encoded_size=100)
    return admit(event, initial_state("clinic-a", "patient-1"), context)


NAMES_NO_COUNTRY = "is a two-letter code that names no country"


@pytest.mark.parametrize(
    ("event", "refused"),
    [
        pytest.param(_trip("t", "NL", "XX"), ["payload.destination_country"], id="trip to XX"),
        pytest.param(_trip("t", "zz", "NL"), ["payload.origin_country"], id="trip from zz"),
        pytest.param(
            _trip("t", "QM", "AB"),
            ["payload.origin_country", "payload.destination_country"],
            id="both codes unassigned",
        ),
        pytest.param(_home("XX"), ["payload.value"], id="home XX"),
        pytest.param(_trip("t", "NL", "XK"), [], id="trip to Kosovo (XK)"),
        pytest.param(_trip("t", "YU", "DE"), [], id="trip from Yugoslavia, a former code"),
        pytest.param(_trip("t", "uk", "fr"), [], id="trip from UK in lower case"),
        pytest.param(_home("UK"), [], id="home UK"),
    ],
)
def test_given_a_code_that_names_no_country_then_the_gate_refuses_it_naming_the_field(
    event: Event, refused: list[str]
) -> None:
    decision = _admit(event)
    if not refused:
        assert isinstance(decision, Admitted)
        return
    assert isinstance(decision, Rejected)
    assert decision.detail == "; ".join(
        f"invalid_record: {path} {NAMES_NO_COUNTRY} (ISO 3166-1 alpha-2 codes assigned now or "
        "formerly, and XK for Kosovo, do)"
        for path in refused
    )


def test_given_a_trip_to_an_unassigned_code_accepted_before_then_the_fold_reads_it_as_given() -> (
    None
):
    """The gate refuses such a code from now on; one already in the log still folds (it was
    accepted, it is never lost), counted against the home country as before."""
    (trip,) = trips(replay([_home("NL"), _trip("t1", "NL", "XX")]))
    assert (trip.destination_country, trip.international) == ("XX", True)
