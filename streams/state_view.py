"""How `uac state` shows a subject's state document to a person: a heading (whose memory, how
many events, as of when, for which purpose and what it withheld), then a table per kind of claim
that holds any (allergies, medications by standing, trips, preferences, facts, open conflicts,
consents, acknowledgements of alerts) and one line naming the kinds that hold none. Times are
UTC. `--json` prints the document itself, with every claim's provenance; this view shows where
each claim came from (its origin) and when, not its event ids."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from streams.console_text import styled, titled_table, when


def state_view(document: Mapping[str, Any]) -> RenderableType:
    """The state document of one subject, as `uac state` prints it without `--json`."""
    key = f"{document['tenant_id']}:{document['subject_id']}"
    sections: list[tuple[str, Table | None]] = [
        ("allergies", _allergies(document["allergies"])),
        ("medications", _medications(document["medications"])),
        ("trips", _trips(document["trips"])),
        ("preferences", _claims("Preferences", document["preferences"])),
        ("facts", _claims("Facts", document["facts"])),
        ("open conflicts", _conflicts(document["conflicts"])),
        ("consents", _consents(document["consents"])),
        ("acknowledgements", _acknowledgements(document["acknowledgements"])),
    ]
    shown: list[RenderableType] = [table for _, table in sections if table is not None]
    empty = [name for name, table in sections if table is None]
    if document["pending_retractions"]:
        waiting = ", ".join(document["pending_retractions"])
        shown.append(Text(f"retractions waiting for their claim: {waiting}"))
    if empty:
        shown.append(Text(f"nothing to show for this read: {', '.join(empty)}", style="dim"))
    return Group(
        Rule(styled(key, "bold", f"  version {document['version']}")), *_heading(document), *shown
    )


def _heading(document: Mapping[str, Any]) -> list[Text]:
    """When the subject is shown at, what the read may use, and its hash."""
    read = document["read"]
    at = f"as of {when(document['as_of'])} UTC"
    if "as_of" in read:
        known = "" if read["known_at"] is None else f", as known at {when(read['known_at'])}"
        at = f"as it stood at {when(read['as_of'])} UTC{known}"
    withheld = f"{read['withheld']} item(s) withheld" if read["withheld"] else "nothing withheld"
    return [
        Text(at),
        Text(f"read for purpose {read['purpose']}: {withheld}"),
        Text(f"state_hash {document['state_hash']}"),
    ]


def _origin(claim: Mapping[str, Any] | None) -> str:
    """Who said so, and when: `explicit_statement 2024-03-04 09:15:00`."""
    if claim is None:
        return "-"
    return f"{claim['origin']} {when(claim['occurred_at'])}"


def _yes_no(flag: bool | None) -> str:
    """`-` when the document withholds it (a trip whose home country the read may not use)."""
    return "-" if flag is None else "yes" if flag else "no"


def _allergies(allergies: Sequence[Mapping[str, Any]]) -> Table | None:
    if not allergies:
        return None
    table = titled_table(
        "Allergies", "substance", "status", "criticality", "reactions", "origin, when"
    )
    for allergy in allergies:
        reactions = ", ".join(
            f"{reaction['manifestation']} ({reaction['severity']})"
            if reaction.get("severity")
            else str(reaction["manifestation"])
            for reaction in allergy["reactions"]
        )
        status = [
            *(["no-allergy statement"] if allergy["negated"] else []),
            "active" if allergy["active"] else "not active",
            allergy["verification_status"],
        ]
        table.add_row(
            str(allergy["substance"]),
            ", ".join(status),
            allergy["criticality"] or "-",
            reactions or "-",
            _origin(allergy["recorded"]),
        )
    return table


def _medications(standings: Mapping[str, Sequence[Mapping[str, Any]]]) -> Table | None:
    if not any(standings.values()):
        return None
    table = titled_table("Medications", "standing", "drug", "dose, route", "prescribed", "stopped")
    for standing, medications in standings.items():
        for medication in medications:
            stopped = medication["stopped"]
            ended = "-" if stopped is None else _origin(stopped)
            if medication["stop_reason"]:
                ended += f" ({medication['stop_reason']})"
            if medication["entered_in_error"]:
                ended += " (entered in error)"
            table.add_row(
                standing,
                str(medication["drug"]),
                " ".join(part for part in (medication["dose"], medication["route"]) if part) or "-",
                _origin(medication["prescribed"]),
                ended,
            )
    return table


def _trips(trips: Sequence[Mapping[str, Any]]) -> Table | None:
    if not trips:
        return None
    table = titled_table("Trips", "departure", "return", "from", "to", "international")
    for trip in trips:
        table.add_row(
            trip["departure_date"] or "-",
            trip["return_date"] or "-",
            trip["origin_country"] or "-",
            trip["destination_country"],
            _yes_no(trip["international"]),
        )
    return table


def _claims(title: str, claims: Mapping[str, Mapping[str, Any]]) -> Table | None:
    if not claims:
        return None
    table = titled_table(title, "key", "value", "origin, when", "earlier values")
    for key, claim in claims.items():
        earlier = [
            f"{entry['value']} ({entry['status']})"
            for entry in claim["history"]
            if entry["event_id"] != (claim["current"] or {}).get("event_id")
        ]
        value = str(claim["value"])
        if claim["needs_confirmation"]:
            value += " (needs confirmation)"
        table.add_row(key, value, _origin(claim["current"]), ", ".join(earlier) or "-")
    return table


def _conflicts(conflicts: Sequence[Mapping[str, Any]]) -> Table | None:
    if not conflicts:
        return None
    table = titled_table("Open conflicts", "kind", "key", "claims")
    for conflict in conflicts:
        claims = "; ".join(f"{claim['value']} ({_origin(claim)})" for claim in conflict["claims"])
        table.add_row(conflict["kind"], conflict["key"], claims)
    return table


def _consents(consents: Mapping[str, Mapping[str, Any]]) -> Table | None:
    if not consents:
        return None
    table = titled_table("Consents", "purpose", "granted", "special category", "since", "in force")
    for purpose, consent in consents.items():
        until = consent.get("valid_until")
        in_force = _yes_no(consent.get("in_force", True))
        table.add_row(
            purpose,
            _yes_no(consent["granted"]),
            _yes_no(consent["special_category"]),
            when(consent["occurred_at"]),
            in_force if until is None else f"{in_force} (until {when(until)})",
        )
    return table


def _acknowledgements(acknowledgements: Mapping[str, Mapping[str, Any]]) -> Table | None:
    if not acknowledgements:
        return None
    table = titled_table("Acknowledged alerts", "alert", "action", "reason", "when")
    for alert_id, entry in acknowledgements.items():
        table.add_row(
            alert_id, entry["action"], entry.get("reason") or "-", when(entry.get("occurred_at"))
        )
    return table
