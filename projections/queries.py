"""Questions answered from state, in the spirit of "User as Code": counts, histories, actives.

Everything here is derived at read time from the folded timelines, so it can never disagree
with the state it reads.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import date, datetime
from typing import NamedTuple

from immutables import Map

from projections.state import Kind, UserState, keyed_for, step_for
from projections.timeline import Timeline, fold, sort_key
from projections.views import (
    DEFAULT_POLICY,
    AllergyView,
    ClaimView,
    Conflict,
    FoldPolicy,
    MedicationView,
    claim_value,
    step_fact,
    valid_at,
)
from schemas.countries import HOME_COUNTRY, iso_country
from schemas.events import DEFAULT_PURPOSE, Event, FactValue


class Trip(NamedTuple):
    trip_id: str
    origin_country: str
    destination_country: str
    departure_date: date
    return_date: date | None
    home_country: str | None
    international: bool | None
    event: Event


def home_country_at(state: UserState, day: date, purpose: str = DEFAULT_PURPOSE) -> str | None:
    """The subject's home country on `day` by the `home_country` facts recorded for `purpose`
    and true then: from their date (a correction from the date of the claim it corrects, when
    earlier and it names no `valid_from` of its own) until their `valid_until`; read as a trip's
    countries are (`iso_country`: " nl " is NL, "UK" is GB), and unknown when it is not a
    two-letter code."""
    timeline = state.facts.get(keyed_for(Kind.FACT, HOME_COUNTRY, purpose))
    if timeline is None:
        return None
    known = [
        event
        for event in timeline.effective()
        if _fact_date(event, timeline.members) <= day
        and (event.valid_until is None or day < event.valid_until.date())
    ]
    view = fold(known, step_fact)
    return iso_country(view.value) if view is not None and isinstance(view.value, str) else None


def _fact_date(event: Event, members: Mapping[str, Event]) -> date:
    """From when a fact holds: its `valid_from`, else when it was stated; a correction without
    a `valid_from` takes the place of what it corrects, so from that claim's date if earlier."""
    found = (event.valid_from or event.occurred_at).date()
    seen = {event.id}
    while event.valid_from is None and event.supersedes is not None:
        corrected = members.get(event.supersedes)
        if corrected is None or corrected.id in seen:
            break
        event = corrected
        seen.add(event.id)
        found = min(found, (event.valid_from or event.occurred_at).date())
    return found


def trips(state: UserState) -> list[Trip]:
    """Every trip, oldest first, with `international` derived from the home country recorded
    for the trip's purpose."""
    found = []
    for view in state.trip_views():
        trip = view.trip
        home = home_country_at(state, trip.departure_date, view.event.purpose)
        international = None if home is None else trip.destination_country != home
        found.append(
            Trip(
                trip.trip_id,
                trip.origin_country,
                trip.destination_country,
                trip.departure_date,
                trip.return_date,
                home,
                international,
                view.event,
            )
        )
    return sorted(found, key=lambda t: (t.departure_date, t.trip_id))


def international_trips(state: UserState, year: int) -> list[Trip]:
    return [t for t in trips(state) if t.international and t.departure_date.year == year]


def active_allergies(state: UserState, at: datetime | None = None) -> list[AllergyView]:
    """Allergies that are real and current, and whose record is valid at `at` (default: as_of)."""
    moment = at or state.as_of
    return [
        view
        for view in state.allergy_views()
        if view.active and (moment is None or valid_at(view.record, moment))
    ]


def no_known_allergy_statements(state: UserState, at: datetime | None = None) -> list[AllergyView]:
    """ "No known allergy" records in force whose record is valid at `at` (default: as_of)."""
    moment = at or state.as_of
    return [
        view
        for view in state.allergy_views()
        if view.negated and view.in_force and (moment is None or valid_at(view.record, moment))
    ]


def active_medications(state: UserState, at: datetime | None = None) -> list[MedicationView]:
    """Prescriptions in force at `at` (default: as_of): not stopped, and in their window."""
    moment = at or state.as_of
    before_its_time = moment is not None and state.as_of is not None and moment < state.as_of
    candidates = state.medication_views() if before_its_time else state.unended_medication_views()
    return [view for view in candidates if medication_standing(view, moment) == ACTIVE]


ACTIVE = "active"
MEDICATION_STANDINGS = (ACTIVE, "scheduled", "expired", "stopped")
"""How a prescription stands at the state's `as_of`: in force; not stopped but its `valid_from`
still to come; not stopped but past its `valid_until`; stopped (or entered in error)."""


def medication_standing(view: MedicationView, moment: datetime | None) -> str:
    prescribed = view.prescribed
    if not view.active:
        return "stopped"
    if moment is not None and prescribed.valid_from is not None and moment < prescribed.valid_from:
        return "scheduled"
    if moment is not None and prescribed.valid_until is not None:
        return ACTIVE if moment < prescribed.valid_until else "expired"
    return ACTIVE


def _in_force_members(
    timeline: Timeline[ClaimView],
    moment: datetime | None,
    unexpired: Map[str, Event] | None = None,
) -> list[Event] | None:
    """The statements of a key that count and are in force at `moment` (maybe none); None when
    all are (the key's resolution over all of them stands). `unexpired`: the key's statements
    whose window has not closed before `moment`, when known (the others cannot be in force)."""
    if moment is None:
        return None
    members, hidden = timeline.members, timeline.retracted | timeline.superseded
    candidates = members if unexpired is None else unexpired
    in_force = [
        event
        for event in candidates.values()
        if event.event_id not in hidden and valid_at(event, moment)
    ]
    counting = len(members) - sum(1 for event_id in hidden if event_id in members)
    return None if len(in_force) == counting else sorted(in_force, key=sort_key)


def claim_views_at(
    state: UserState, kind: Kind, moment: datetime | None, policy: FoldPolicy = DEFAULT_POLICY
) -> list[ClaimView]:
    """The preference or fact views at `moment`, by key: each key folded from its statements in
    force then, when only some are (a held claim whose `valid_until` has passed gives way to the
    statement that disputed it, or that it outranked; one whose `valid_from` is still to come is
    not held yet), else its resolution over all of them. When none is in force, the key's view
    is the claim that held it last, disputed by nothing (a read, which keeps to the claims in
    force, shows none)."""
    timelines = state.timelines(kind)
    return [
        view
        for key in sorted(timelines.keys())
        if (view := _view_at(state, timelines[key], kind, key, moment, policy)) is not None
    ]


def claim_view_at(
    state: UserState,
    kind: Kind,
    key: str,
    moment: datetime | None,
    policy: FoldPolicy = DEFAULT_POLICY,
) -> ClaimView | None:
    """The view of one preference or fact key (its timeline key) at `moment`: see
    `claim_views_at`."""
    timeline: Timeline[ClaimView] | None = state.timelines(kind).get(key)
    if timeline is None:
        return None
    return _view_at(state, timeline, kind, key, moment, policy)


def _view_at(
    state: UserState,
    timeline: Timeline[ClaimView],
    kind: Kind,
    key: str,
    moment: datetime | None,
    policy: FoldPolicy,
) -> ClaimView | None:
    """A key's view at `moment`: its resolution when no statement of it has a validity window
    (it is in force whole at any moment), else the fold of its statements in force then."""
    unexpired = state.windowed.get((kind, key))
    if unexpired is None:
        return timeline.resolution
    as_of = state.as_of
    from_now_on = moment is not None and as_of is not None and moment >= as_of
    in_force = _in_force_members(timeline, moment, unexpired if from_now_on else None)
    if in_force is None:
        return timeline.resolution
    if not in_force:
        held = timeline.resolution
        return None if held is None else held._replace(conflict=None)
    return fold(in_force, step_for(kind, policy))


def open_conflicts(
    state: UserState, moment: datetime | None = None, policy: FoldPolicy = DEFAULT_POLICY
) -> list[Conflict]:
    """The open conflicts of the preference and fact keys at `moment` (default: every
    statement, whatever its validity)."""
    views = [
        *claim_views_at(state, Kind.PREFERENCE, moment, policy),
        *claim_views_at(state, Kind.FACT, moment, policy),
    ]
    return [view.conflict for view in views if view.conflict is not None]


class ClaimHistoryEntry(NamedTuple):
    event: Event
    value: FactValue
    status: str
    replaced_by: str | None


def claim_history(
    state: UserState,
    kind: Kind,
    key: str,
    policy: FoldPolicy = DEFAULT_POLICY,
    moment: datetime | None = None,
) -> list[ClaimHistoryEntry]:
    """Every statement about a preference/fact key, oldest first, with what became of it (at
    `moment`, as `claim_views_at` resolves the key then; default: whatever their validity).

    status: `current` (the value in force), `superseded` (was in force, replaced by a later
    statement), `corrected` (explicitly replaced via `supersedes`), `retracted`, `challenging`
    (disagrees with the value in force; see the open conflict), `not_adopted` (outranked, e.g.
    an inference against an explicit statement), and at a moment when not every statement is
    in force, for one out of force that nothing replaced, `expired` (its `valid_until` has
    passed) or `scheduled` (its `valid_from` is still to come). `replaced_by` names the
    statement that took its place: none for a statement whose correction was retracted (it
    holds again).
    """
    timeline: Timeline[ClaimView] | None = state.timelines(kind).get(key)
    if timeline is None:
        return []
    replaced_by, final = _winner_changes(timeline.effective(), kind, policy)
    in_force = _in_force_members(timeline, moment)
    out_of_force: datetime | None = None
    if in_force is not None and moment is not None:
        replaced_in_force, final = _winner_changes(in_force, kind, policy)
        kept = {e.id for e in in_force}
        replaced_by = {
            claim: by for claim, by in replaced_by.items() if claim not in kept
        } | replaced_in_force
        out_of_force = moment
    statements = sorted(timeline.members.values(), key=sort_key)
    correctors = {
        e.supersedes: e.id for e in statements if e.supersedes and e.id not in timeline.retracted
    }
    if final is not None and final.winner.supersedes in correctors:
        correctors[final.winner.supersedes] = final.winner.id
    return [
        ClaimHistoryEntry(
            event,
            claim_value(event),
            _status(event, timeline, final, replaced_by, out_of_force),
            correctors.get(event.id) or replaced_by.get(event.id),
        )
        for event in statements
    ]


def _winner_changes(
    statements: list[Event], kind: Kind, policy: FoldPolicy
) -> tuple[dict[str, str], ClaimView | None]:
    step = step_for(kind, policy)
    replaced_by: dict[str, str] = {}
    view: ClaimView | None = None
    for event in statements:
        previous = view
        view = step(view, event)
        if previous is not None and view is not None and previous.winner.id != view.winner.id:
            replaced_by[previous.winner.id] = view.winner.id
    return replaced_by, view


def _status(
    event: Event,
    timeline: Timeline[ClaimView],
    final: ClaimView | None,
    replaced_by: dict[str, str],
    moment: datetime | None,
) -> str:
    if event.id in timeline.retracted:
        return "retracted"
    if event.id in timeline.superseded:
        return "corrected"
    if moment is not None and not valid_at(event, moment):
        if event.id in replaced_by:
            return "superseded"
        return (
            "scheduled" if event.valid_from is not None and moment < event.valid_from else "expired"
        )
    if final is not None and event.id == final.winner.id:
        return "current"
    if event.id in replaced_by:
        return "superseded"
    if (
        final is not None
        and final.conflict is not None
        and event.id in {challenger.id for challenger in final.conflict.challengers}
    ):
        return "challenging"
    return "not_adopted"


def events_in_order(state: UserState) -> Iterator[Event]:
    """Every folded event, in valid-time order."""
    return iter(sorted(state.events.values(), key=sort_key))
