"""Patient -> FactAsserted(home_country) (see `schemas.fhir.mapping`). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Final

from schemas.countries import HOME_COUNTRY
from schemas.events import Event, EventType, FactAsserted
from schemas.fhir.json_access import (
    Json,
    Unmappable,
    Unsupported,
    end_time_at,
    objects_at,
    string_at,
    time_at,
    within,
)
from schemas.fhir.sources import Index, Source, new_event, subject_id_of, timing_of

_ISO_ALPHA_2_CODES: Final = """
    AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR
    BS BT BV BW BY BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ
    EC EE EG EH ER ES ET FI FJ FK FM FO FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW
    GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO JP KE KG KH KI KM KN KP KR KW KY
    KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ MR MS MT MU MV
    MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR PS PT PW PY
    QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF TG
    TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM
    ZW
    """
_ISO_ALPHA_2: Final = frozenset(_ISO_ALPHA_2_CODES.split())
"""ISO 3166-1 alpha-2 codes (the 249 officially assigned, as in tzdata's iso3166.tab)."""
_COUNTRY_ALIASES: Final = {
    "USA": "US", "UNITED STATES": "US", "UNITED STATES OF AMERICA": "US",
    "GBR": "GB", "UK": "GB", "UNITED KINGDOM": "GB",
    "CAN": "CA", "CANADA": "CA", "MEX": "MX", "MEXICO": "MX",
    "DEU": "DE", "GERMANY": "DE", "DEUTSCHLAND": "DE", "FRA": "FR", "FRANCE": "FR",
    "NLD": "NL", "NETHERLANDS": "NL", "THE NETHERLANDS": "NL", "BEL": "BE", "BELGIUM": "BE",
    "ESP": "ES", "SPAIN": "ES", "ITA": "IT", "ITALY": "IT", "PRT": "PT", "PORTUGAL": "PT",
    "CHE": "CH", "SWITZERLAND": "CH", "AUT": "AT", "AUSTRIA": "AT", "IRL": "IE", "IRELAND": "IE",
    "SWE": "SE", "SWEDEN": "SE", "NOR": "NO", "NORWAY": "NO", "DNK": "DK", "DENMARK": "DK",
    "FIN": "FI", "FINLAND": "FI", "POL": "PL", "POLAND": "PL",
    "AUS": "AU", "AUSTRALIA": "AU", "NZL": "NZ", "NEW ZEALAND": "NZ",
    "JPN": "JP", "JAPAN": "JP", "CHN": "CN", "CHINA": "CN", "中国": "CN",
    "IND": "IN", "INDIA": "IN", "BRA": "BR", "BRAZIL": "BR", "ZAF": "ZA", "SOUTH AFRICA": "ZA",
}  # fmt: skip
"""Alpha-3 codes and English names mapped without doubt; anything else is reported."""


def country_code(text: str) -> str | None:
    """ISO 3166-1 alpha-2 code of a FHIR address country, or None when it is not certain."""
    key = " ".join(text.replace(".", "").upper().split())
    if key in _ISO_ALPHA_2:
        return key
    return _COUNTRY_ALIASES.get(key)


def patient_events(source: Source, index: Index) -> list[Event]:
    subject_id = index.current_patient(subject_id_of(source.resource_id))
    if subject_id != subject_id_of(source.resource_id):
        raise Unsupported(
            "Patient replaced by another at the source (Patient.link): no longer used, the "
            "records naming it are filed under the patient replacing it"
        )
    known_at = timing_of(source, ()).recorded_at
    address = _home_address(source.resource, known_at)
    country = None if address is None else string_at(address, "country", at="address")
    if address is not None and country is not None:
        _note_rivals(source, address, country, known_at)
    if address is None or country is None:
        raise Unsupported(
            "Patient without an address country: no home_country fact (the records naming it are still imported)"
        )
    code = country_code(country)
    if code is None:
        raise Unsupported(f"Patient address country {country!r} is not an ISO 3166-1 code or name")
    start = within("address", lambda: time_at(address, "period", "start"))
    timing = timing_of(source, (start,))
    payload = FactAsserted(key=HOME_COUNTRY, value=code)
    return [
        new_event(
            source, subject_id, timing, payload, f"{EventType.FACT_ASSERTED.value}:{HOME_COUNTRY}"
        )
    ]


_NOT_HOME_USES: Final = frozenset({"old", "temp"})
"""Address uses that never say where a patient lives: an address no longer in use, and a
temporary one (a hotel, a ward abroad)."""
_USE_RANK: Final = {"home": 0, "work": 2, "billing": 3}
"""Which address says most surely where the patient lives: the home address, else one of no
(or another) stated use (rank 1), else a work address, else a billing one."""


def _home_address(resource: Json, known_at: datetime) -> Json | None:
    """The address that names the home country when the record was made (`known_at`): of the
    addresses with a country and a use that can be a home (not `old` or `temp`) and that had
    begun by then (an announced move is not yet a home), one in force then (its `period` not
    ended by then) before an ended one, then by use (`_USE_RANK`), then the first in the list.
    A period bound that cannot be read counts as absent here (the chosen address's start is
    still read strictly)."""
    candidates = _could_be_home(resource, known_at)
    return min(candidates, key=lambda address: _address_rank(address, known_at), default=None)


def _could_be_home(resource: Json, known_at: datetime) -> list[Json]:
    """The addresses with a country and a use that can be a home, begun by `known_at`."""
    return [
        address
        for address in objects_at(resource, "address")
        if _has_country(address)
        and _use(address) not in _NOT_HOME_USES
        and not _begins_after(address, known_at)
    ]


def _note_rivals(source: Source, chosen: Json, country: str, known_at: datetime) -> None:
    """Say so when another address of the same standing names another country: the first
    listed is taken, and the record does not say which one the patient lives in."""
    rank = _address_rank(chosen, known_at)
    rivals = sorted(
        {
            other_country
            for address in _could_be_home(source.resource, known_at)
            if address is not chosen
            and _address_rank(address, known_at) == rank
            and isinstance(other_country := address.get("country"), str)
            and country_code(other_country) != country_code(country)
        }
    )
    if rivals:
        others = ", ".join(repr(rival) for rival in rivals)
        source.passed_over.append(
            f"address: addresses of the same use and standing name {country!r} and {others}; "
            f"{country!r}, listed first, is taken as the home country"
        )


def _has_country(address: Json) -> bool:
    country = address.get("country")
    return country is not None and not (isinstance(country, str) and not country.strip())


def _use(address: Json) -> str | None:
    use = address.get("use")
    return use.strip().casefold() if isinstance(use, str) else None


def _address_rank(address: Json, known_at: datetime) -> tuple[bool, int]:
    end = _period_bound(address, "end")
    ended = end is not None and end <= known_at
    return ended, _USE_RANK.get(_use(address) or "", 1)


def _begins_after(address: Json, known_at: datetime) -> bool:
    start = _period_bound(address, "start")
    return start is not None and start > known_at


def _period_bound(address: Json, bound: str) -> datetime | None:
    """The address's `period.start` (as the instant it starts) or `period.end` (as the instant
    it ends before); None when absent or unreadable."""
    period = address.get("period")
    if not isinstance(period, Mapping):
        return None
    read = end_time_at if bound == "end" else time_at
    try:
        return read(period, bound)
    except Unmappable:
        return None
