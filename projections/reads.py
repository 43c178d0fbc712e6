"""Purpose-bound reads: what of a subject's memory may be used for a given purpose.

Memory is evidence, not permission. A claim is returned only when it was recorded for the
purpose of the read, when special-category data (health data always is) has a legal basis for
that purpose (a consent-exempt purpose of the tenant, such as care, or the subject's explicit
consent), and while its validity window is open at the time of the read (the wiring passes its
clock; without one, the subject's `as_of`). A read names its purpose; one that does not gets
`DEFAULT_PURPOSE`, never everything. The state document files preferences, facts and
acknowledgements by purpose (`{purpose: {key: ...}}`); a read returns those of its purpose
(`{key: ...}`) and counts the others as withheld.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from projections.as_of import state_as_of
from projections.document import plain, provenance, state_document
from projections.gate import TenantPolicy, consent_allows
from projections.queries import events_in_order
from projections.state import UserState
from projections.views import DEFAULT_POLICY, FoldPolicy
from schemas.countries import HOME_COUNTRY
from schemas.events import DEFAULT_PURPOSE

SPECIAL = "special_category"


class _Filter:
    def __init__(
        self,
        state: UserState,
        purpose: str,
        tenant: TenantPolicy | None,
        read_at: datetime | None,
        special_allowed: bool | None = None,
    ) -> None:
        self.purpose = purpose
        self.moment: datetime | None = state.as_of if read_at is None else read_at
        self.special_allowed = (
            consent_allows(state, purpose, tenant, self.moment)
            if special_allowed is None
            else special_allowed
        )
        self.withheld = 0

    def allows(self, ref: Mapping[str, Any], health: bool = False) -> bool:
        allowed = self.may_use(ref, health) and in_force(ref, self.moment)
        if not allowed:
            self.withheld += 1
        return allowed

    def may_use(self, ref: Mapping[str, Any], health: bool = False) -> bool:
        """Whether the claim was recorded for the purpose, with a legal basis if special."""
        special = health or ref["sensitivity"] == SPECIAL
        return ref["purpose"] == self.purpose and (self.special_allowed or not special)


def in_force(ref: Mapping[str, Any], moment: datetime | None) -> bool:
    """Whether the claim's validity window holds `moment` (its `valid_from` has come, its
    `valid_until` not yet); without a moment, it does."""
    if moment is None:
        return True
    at = plain(moment)
    since, until = ref.get("valid_from"), ref.get("valid_until")
    return (since is None or since <= at) and (until is None or at < until)


def consents_with_windows(
    state: UserState, consents: Mapping[str, Mapping[str, Any]], moment: datetime | None
) -> dict[str, dict[str, Any]]:
    """Each consent of a state document with its validity window and whether it holds
    `moment`: a consent that expired still reads `granted`, but no longer counts."""
    windowed = {}
    for purpose, consent in consents.items():
        ref = provenance(state.events[consent["event_id"]])
        window = {"valid_from": ref.get("valid_from"), "valid_until": ref.get("valid_until")}
        windowed[purpose] = {**consent, **window, "in_force": in_force(ref, moment)}
    return windowed


def readable_document(
    state: UserState,
    purpose: str = DEFAULT_PURPOSE,
    tenant: TenantPolicy | None = None,
    policy: FoldPolicy = DEFAULT_POLICY,
    read_at: datetime | None = None,
) -> dict[str, Any]:
    """The state document restricted to what `purpose` may use at `read_at` (default: the
    subject's `as_of`), with a count of what was withheld."""
    return _restricted(state, _Filter(state, purpose, tenant, read_at), policy)


def readable_document_as_of(
    state: UserState,
    valid_time: datetime,
    read_at: datetime,
    known_at: datetime | None = None,
    purpose: str = DEFAULT_PURPOSE,
    tenant: TenantPolicy | None = None,
    policy: FoldPolicy = DEFAULT_POLICY,
) -> dict[str, Any]:
    """The subject as it stood at `valid_time` (as it was known at `known_at`, if given:
    `projections.as_of.state_as_of`), restricted to what `purpose` may use.

    The claims are those in force at `valid_time`; the legal basis is the one in force at
    `read_at`, judged on the whole current `state`: a consent withdrawn since the past moment
    hides that past too (a past consent is no permission to read now)."""
    past = (
        state
        if state.erased or not state.events
        else state_as_of(list(events_in_order(state)), valid_time, known_at, policy)
    )
    allowed = consent_allows(state, purpose, tenant, read_at)
    document = _restricted(past, _Filter(past, purpose, tenant, valid_time, allowed), policy)
    document["read"] |= {"as_of": plain(valid_time), "known_at": plain(known_at)}
    return document


def _readable_medications(
    standings: Mapping[str, list[dict[str, Any]]], check: _Filter
) -> dict[str, list[dict[str, Any]]]:
    """The prescriptions a read may use, `active` (in force at the moment of the read, which
    may differ from the state's `as_of` that the document's standings are judged at) and
    `stopped`; one scheduled or expired at that moment is withheld."""
    readable = {
        standing: [m for m in entries if check.allows(m["prescribed"], health=True)]
        for standing, entries in standings.items()
    }
    stopped = readable.pop("stopped", [])
    return {"active": [m for entries in readable.values() for m in entries], "stopped": stopped}


def _readable_claims(
    by_purpose: Mapping[str, Mapping[str, Any]], check: _Filter
) -> dict[str, dict[str, Any]]:
    """The preference or fact keys a read may use, `{key: ...}`, each with the statements of
    its history the read may use; every statement of a key it may not use is withheld."""
    readable = {}
    for claims in by_purpose.values():
        for key, claim in claims.items():
            if check.allows(claim["current"]):
                readable[key] = claim | {
                    "history": [h for h in claim["history"] if check.allows(h)]
                }
            else:
                check.withheld += len(claim["history"]) - 1
    return readable


def _restricted(state: UserState, check: _Filter, policy: FoldPolicy) -> dict[str, Any]:
    document = state_document(state, policy=policy, moment=check.moment)
    document["allergies"] = [
        a for a in document["allergies"] if check.allows(a["recorded"], health=True)
    ]
    document["medications"] = _readable_medications(document["medications"], check)
    home = document["facts"].get(check.purpose, {}).get(HOME_COUNTRY)
    home_usable = home is None or all(check.may_use(claim) for claim in home["history"])
    document["trips"] = [
        trip if home_usable else trip | {"home_country": None, "international": None}
        for trip in document["trips"]
        if check.allows(trip["recorded"])
    ]
    for kind in ("preferences", "facts"):
        document[kind] = _readable_claims(document[kind], check)
    document["acknowledgements"] = {
        alert_id: entry
        for entries in document["acknowledgements"].values()
        for alert_id, entry in entries.items()
        if check.allows(provenance(state.events[entry["event_id"]]), health=True)
    }
    document["conflicts"] = [
        usable
        for conflict in document["conflicts"]
        if (usable := _usable_conflict(conflict, check)) is not None
    ]
    document["consents"] = consents_with_windows(state, document["consents"], check.moment)
    document["read"] = {"purpose": check.purpose, "withheld": check.withheld}
    return document


def _usable_conflict(conflict: Mapping[str, Any], check: _Filter) -> dict[str, Any] | None:
    """The conflict with the claims the read may use, while it still disputes something: its
    held claim (listed first) and a challenger are usable, as `claim-needs-confirmation` asks
    only while both are in force."""
    held, *challengers = conflict["claims"]
    usable = [claim for claim in challengers if check.allows(claim)]
    if not usable or not check.allows(held):
        return None
    return {**conflict, "claims": [held, *usable]}
