"""The write gate's pure decision: may this event enter the subject's memory?

`admit` sees the event, the subject's current state and a context the wiring builds (the clock,
the tenant policy, the erasure ledger, the encoded size). It never reads a clock or a file
itself. Every reason that applies is reported, not only the first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from enum import Enum
from typing import Any, Final, NamedTuple
from uuid import UUID

from projections.characters import unprintable_characters
from projections.document import plain
from projections.secrets import FreeText, secrets_in
from projections.state import UserState, claim_address, claim_key
from projections.views import valid_at, weaker_than
from schemas.allergy_statements import statement_categories
from schemas.base import blank_required_text
from schemas.countries import HOME_COUNTRY, iso_country, names_a_country
from schemas.events import (
    CLOCK_ACTOR,
    AlertAcknowledged,
    AllergyRecorded,
    AllergyStatusChanged,
    ClaimRetracted,
    ClockAdvanced,
    ErasureRequested,
    Event,
    EventType,
    FactAsserted,
    MedicationPrescribed,
    MedicationStopped,
    Origin,
    Sensitivity,
    TravelRecorded,
)
from schemas.reasons import ReasonCode

HEALTH_PAYLOADS = (
    AllergyRecorded,
    AllergyStatusChanged,
    MedicationPrescribed,
    MedicationStopped,
    AlertAcknowledged,
)
"""Payloads that are health data (GDPR art. 9) whatever sensitivity the producer labelled (an
acknowledgement is a clinician's decision about a health alert, often with its reason)."""


@dataclass(frozen=True)
class TenantPolicy:
    actors: frozenset[str]
    consent_exempt_purposes: frozenset[str] = frozenset({"care"})
    """Purposes with a legal basis other than consent for special-category data (e.g. care)."""
    signing_actors: frozenset[str] = frozenset()
    """Actors with a registered public key: their events count only when signed with it."""


class Signature(Enum):
    """What the wiring found when it checked a message's signature against the key of the
    event's actor."""

    VALID = "valid"
    ABSENT = "absent"
    INVALID = "invalid"
    NOT_CHECKED = "not_checked"
    """No signature was looked at (a file folded by `uac replay --file` has none)."""


DEFAULT_MAX_EVENT_BYTES = 64 * 1024
"""The largest encoded event the gate admits unless configured otherwise (`oversize`)."""


@dataclass(frozen=True)
class GatePolicy:
    tenants: Mapping[str, TenantPolicy]
    max_future_skew: timedelta = timedelta(minutes=5)
    earliest_plausible: datetime = datetime(1900, 1, 1, tzinfo=UTC)
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    require_sealed: bool = False
    """Refuse personal events that were not sealed with their subject's key (crypto-shredding
    needs every copy on the log sealed); erasure requests are exempt so they always get through."""
    max_history_bytes: int | None = None
    """The most encoded event bytes one subject's history may hold (the subject's checkpoint, a
    single Kafka record, holds the whole state); None: no limit. Erasure requests are exempt, and
    so are the clock's events (at most two per validity window)."""


@dataclass(frozen=True)
class GateContext:
    now: datetime
    policy: GatePolicy
    encoded_size: int
    erased: bool = False
    sealed: bool = False
    history_bytes: int = 0
    """Encoded bytes of the events the subject's history already holds."""
    claim_owners: Mapping[str, str] = field(default_factory=dict)
    """Known claim id -> `tenant:subject`, when the wiring can see other subjects (batch files)."""
    signature: Signature = Signature.NOT_CHECKED


class Problem(NamedTuple):
    reason: ReasonCode
    detail: str


@dataclass(frozen=True)
class Admitted:
    event: Event


@dataclass(frozen=True)
class Rejected:
    problems: tuple[Problem, ...]

    @property
    def reasons(self) -> tuple[ReasonCode, ...]:
        return tuple(dict.fromkeys(problem.reason for problem in self.problems))

    @property
    def detail(self) -> str:
        return "; ".join(f"{p.reason.value}: {p.detail}" for p in self.problems)


Decision = Admitted | Rejected


def admit(event: Event, state: UserState, context: GateContext) -> Decision:
    if context.erased or state.erased:
        return Rejected(
            (Problem(ReasonCode.SUBJECT_ERASED, "the subject was erased (its key is destroyed)"),)
        )
    duplicate = _duplicate(event, state)
    if duplicate is not None:
        return Rejected((duplicate,))
    text = FreeText(
        {"payload": event.payload, **{name: getattr(event, name) for name in _FREE_TEXT_ENVELOPE}}
    )
    problems = (
        _authorisation(event, context.policy, context.signature)
        + _plausibility(event, context)
        + _capacity(event, context)
        + _privacy(event, state, context, text)
        + _references(event, state, context)
        + _coherence(event)
        + _alert_reference(event)
        + _countries(event)
        + _blank_text(event)
        + _unprintable_text(event, text)
    )
    return Rejected(problems) if problems else Admitted(event)


def _alike(first: Any, second: Any) -> bool:
    """Equal JSON values, a boolean never equal to a number (Python's `True == 1` is not JSON's:
    a fact `true` re-sent as `1` under the same event id is another event)."""
    if isinstance(first, bool) or isinstance(second, bool):
        return type(first) is type(second) and first == second
    if isinstance(first, dict) and isinstance(second, dict):
        return first.keys() == second.keys() and all(_alike(first[k], second[k]) for k in first)
    if isinstance(first, list) and isinstance(second, list):
        return len(first) == len(second) and all(map(_alike, first, second))
    return bool(first == second)


def _duplicate(event: Event, state: UserState) -> Problem | None:
    seen = state.events.get(event.id)
    if seen is None:
        return None
    if seen == event and _alike(plain(seen), plain(event)):
        return Problem(ReasonCode.DUPLICATE_EVENT_ID, f"event {event.id} was already accepted")
    detail = f"event id {event.id} was used for another event"
    if event.origin is Origin.IMPORTED:
        detail += (
            " (an imported record changed without a new source version, for FHIR "
            "meta.versionId or meta.lastUpdated: nothing says which version is newer)"
        )
    return Problem(ReasonCode.EVENT_ID_REUSED, detail)


def _authorisation(event: Event, policy: GatePolicy, signature: Signature) -> tuple[Problem, ...]:
    tenant = policy.tenants.get(event.tenant_id)
    if tenant is None:
        return (
            Problem(ReasonCode.UNKNOWN_TENANT, f"tenant {event.tenant_id!r} is not configured"),
        )
    clock = isinstance(event.payload, ClockAdvanced)
    if clock != (event.actor == CLOCK_ACTOR):
        detail = (
            f"{EventType.CLOCK_ADVANCED.value} is written by actor {CLOCK_ACTOR!r} only, "
            "and that actor writes nothing else"
        )
        return (Problem(ReasonCode.CLOCK_RESERVED, detail),)
    if event.actor not in tenant.actors and not clock:
        detail = f"actor {event.actor!r} may not write for tenant {event.tenant_id!r}"
        return (Problem(ReasonCode.ACTOR_NOT_ALLOWED, detail),)
    if event.actor in tenant.signing_actors and signature in (Signature.ABSENT, Signature.INVALID):
        return (_unsigned(event, signature),)
    return ()


def _unsigned(event: Event, signature: Signature) -> Problem:
    """An event of an actor with a registered key whose message is not signed by that key."""
    if signature is Signature.ABSENT:
        detail = f"actor {event.actor!r} signs its events and this message carries no signature"
        return Problem(ReasonCode.SIGNATURE_MISSING, detail)
    detail = f"the message's signature is not that of actor {event.actor!r}'s registered key"
    return Problem(ReasonCode.SIGNATURE_INVALID, detail)


_DAY_BEGUN_SOMEWHERE = timedelta(hours=14)
"""How far ahead of UTC a day begins (UTC+14): a date without a time, read as the start of its
day in UTC, may be today for its producer that long before it is in UTC."""


def _in_future(moment: datetime, context: GateContext) -> bool:
    """After now plus the clock skew allowed; a time at the start of a UTC day (a date written
    without a time, as a FHIR `authoredOn` "2026-12-07" is read) only once its day has begun
    nowhere on earth."""
    latest = context.now + context.policy.max_future_skew
    if moment.astimezone(UTC).time() == time(0):
        latest = max(latest, context.now + _DAY_BEGUN_SOMEWHERE)
    return moment > latest


def _utc(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"


def _plausibility(event: Event, context: GateContext) -> tuple[Problem, ...]:
    policy = context.policy
    problems = []
    for moment, name, reason in (
        (event.occurred_at, "occurred_at", ReasonCode.OCCURRED_IN_FUTURE),
        (event.recorded_at, "recorded_at", ReasonCode.RECORDED_IN_FUTURE),
    ):
        if _in_future(moment, context):
            detail = f"{name} {_utc(moment)} is in the future (now is {_utc(context.now)})"
            problems.append(Problem(reason, detail))
    if min(event.occurred_at, event.recorded_at) < policy.earliest_plausible:
        detail = f"times before {policy.earliest_plausible:%Y-%m-%d} are not plausible"
        problems.append(Problem(ReasonCode.TOO_OLD, detail))
    if context.encoded_size > policy.max_event_bytes:
        detail = f"{context.encoded_size} bytes exceeds the limit of {policy.max_event_bytes}"
        problems.append(Problem(ReasonCode.OVERSIZE, detail))
    return tuple(problems)


def is_special_category(event: Event) -> bool:
    return event.sensitivity is Sensitivity.SPECIAL_CATEGORY or isinstance(
        event.payload, HEALTH_PAYLOADS
    )


def consent_allows(
    state: UserState, purpose: str, tenant: TenantPolicy | None, at: datetime | None
) -> bool:
    """Whether special-category data may be used for `purpose` for this subject at `at` (the
    time of the claim, or of the read): a consent counts only inside its validity window."""
    if tenant is not None and purpose in tenant.consent_exempt_purposes:
        return True
    timeline = state.consents.get(purpose)
    consent = None if timeline is None else timeline.resolution
    if consent is None or not (consent.granted and consent.special_category):
        return False
    return at is None or valid_at(consent.event, at)


def _capacity(event: Event, context: GateContext) -> tuple[Problem, ...]:
    limit = context.policy.max_history_bytes
    if limit is None or isinstance(event.payload, (ErasureRequested, ClockAdvanced)):
        return ()
    if context.history_bytes + context.encoded_size <= limit:
        return ()
    detail = (
        f"the subject's history holds {context.history_bytes} bytes; this event would exceed "
        f"the limit of {limit}"
    )
    return (Problem(ReasonCode.SUBJECT_HISTORY_FULL, detail),)


_FREE_TEXT_ENVELOPE = ("source_ref", "purpose", "scope")
"""Envelope fields a producer writes freely (ids, tenant and actor are checked otherwise; a
subject id is not screened: an 18-digit national id passes the card check one time in ten)."""


def _privacy(
    event: Event, state: UserState, context: GateContext, text: FreeText
) -> tuple[Problem, ...]:
    policy = context.policy
    problems = [
        Problem(ReasonCode.SECRET_IN_TEXT, f"{finding.field} looks like {finding.kind}")
        for finding in secrets_in(text)
    ]
    tenant = policy.tenants.get(event.tenant_id)
    if is_special_category(event) and not consent_allows(
        state, event.purpose, tenant, event.occurred_at
    ):
        detail = f"no consent for special-category data for purpose {event.purpose!r}"
        problems.append(Problem(ReasonCode.SPECIAL_CATEGORY_WITHOUT_CONSENT, detail))
    exempt = isinstance(event.payload, ErasureRequested)
    if policy.require_sealed and not context.sealed and not exempt:
        detail = "personal events must be sealed with the subject's key (use the UaC publisher)"
        problems.append(Problem(ReasonCode.NOT_SEALED, detail))
    return tuple(problems)


def _references(event: Event, state: UserState, context: GateContext) -> tuple[Problem, ...]:
    problems = []
    if event.supersedes is not None:
        problems.extend(_supersedes(event, event.supersedes, state, context))
    if isinstance(event.payload, ClaimRetracted):
        claim_id = event.payload.claim_id
        target = state.events.get(claim_id)
        if target is not None and isinstance(target.payload, ClaimRetracted):
            detail = (
                f"claim {claim_id} is itself a retraction: a retraction cannot be taken back; "
                "to restore the claim it retracted, send that claim again as a new event"
            )
            problems.append(Problem(ReasonCode.RETRACTS_UNKNOWN_CLAIM, detail))
        elif target is None or claim_address(target) is None:
            owner = context.claim_owners.get(claim_id)
            where = f" (it belongs to {owner})" if owner and owner != event.key else ""
            detail = f"claim {claim_id} is not a known claim of this subject{where}"
            problems.append(Problem(ReasonCode.RETRACTS_UNKNOWN_CLAIM, detail))
        elif weaker_than(event, target):
            detail = (
                f"retracts {claim_id}, a {target.origin.value} claim: an {event.origin.value}"
                " retraction never takes back an explicit or verified claim"
            )
            problems.append(Problem(ReasonCode.RETRACTS_STRONGER_CLAIM, detail))
        elif target.purpose != event.purpose:
            detail = (
                f"retracts {claim_id}, a claim recorded for {target.purpose!r}: a retraction "
                f"recorded for {event.purpose!r} may not change it (record it for "
                f"{target.purpose!r})"
            )
            problems.append(Problem(ReasonCode.RETRACTS_OTHER_PURPOSE, detail))
    return tuple(problems)


def _coherence(event: Event) -> tuple[Problem, ...]:
    """An allergy record whose substance, uncoded, says there is no known allergy ("NKDA")
    but that is not `negated`: held as an allergy it would sit on the allergy list as an active
    allergy to "NKDA". The detail names the categories, never the text."""
    payload = event.payload
    if not isinstance(payload, AllergyRecorded) or payload.negated or payload.codes:
        return ()
    categories = statement_categories(payload.substance)
    if categories is None:
        return ()
    covered = ", ".join(category.value for category in categories)
    detail = (
        "the substance is a 'no known allergy' statement, not a substance: send the record with "
        f"negated=true and the categories it covers ({covered}), or name the allergen"
    )
    return (Problem(ReasonCode.NEGATION_NOT_FLAGGED, detail),)


_NOT_STATED: Final = frozenset({Origin.INFERRED, Origin.OBSERVED_BEHAVIOR})
"""Origins of a claim nobody stated: a model's inference, a pattern seen in behaviour."""


def _alert_reference(event: Event) -> tuple[Problem, ...]:
    """An acknowledgement whose `alert_id` is no UUID: alert ids are UUIDs (uuid5), so it can
    never name an alert, and held it would wait for one forever without a word (an unknown UUID
    is admitted: the acknowledgement may come before its alert). Nor may an acknowledgement be
    inferred or observed: held, a guess would take a critical alert off a clinician's list."""
    payload = event.payload
    if not isinstance(payload, AlertAcknowledged):
        return ()
    try:
        UUID(payload.alert_id)
    except ValueError:
        detail = (
            "payload.alert_id is not an alert id (alert ids are UUIDs, as uac alerts gives them)"
        )
        return (Problem(ReasonCode.INVALID_RECORD, detail),)
    if event.origin in _NOT_STATED:
        detail = (
            f"an {event.origin.value} acknowledgement: accepting or overriding an alert is a "
            "person's decision (send it as explicit_statement, user_provided_fact, imported or "
            "verified_source, with the actor who took it)"
        )
        return (Problem(ReasonCode.ACKNOWLEDGEMENT_NOT_STATED, detail),)
    return ()


def _countries(event: Event) -> tuple[Problem, ...]:
    """A trip's country, or a `home_country` fact, that is not an ISO 3166-1 alpha-2 code as
    the fold compares them (`iso_country`), or a code that names no country
    (`names_a_country`): held, a `home_country` could tell no trip international or not, and a
    trip to "XX" would count as international. The detail names the field, never the value."""
    payload = event.payload
    if isinstance(payload, TravelRecorded):
        codes = {
            "payload.origin_country": payload.origin_country,
            "payload.destination_country": payload.destination_country,
        }
    elif isinstance(payload, FactAsserted) and payload.key == HOME_COUNTRY:
        if not isinstance(payload.value, str) or iso_country(payload.value) is None:
            detail = (
                "payload.value is not an ISO 3166-1 alpha-2 country code (two letters, e.g. NL; "
                f"UK is read as GB), which the fact {HOME_COUNTRY} takes"
            )
            return (Problem(ReasonCode.INVALID_RECORD, detail),)
        codes = {"payload.value": payload.value}
    else:
        return ()
    return tuple(
        Problem(
            ReasonCode.INVALID_RECORD,
            f"{path} is a two-letter code that names no country (ISO 3166-1 alpha-2 codes "
            "assigned now or formerly, and XK for Kosovo, do)",
        )
        for path, value in codes.items()
        if not names_a_country(iso_country(value) or value)
    )


def _blank_text(event: Event) -> tuple[Problem, ...]:
    """Text a record cannot be without (a substance, a drug, a code, an id, a purpose) sent as
    spaces only: it says nothing, as empty text would, which the model refuses; held, a blank
    substance would stand on the allergy list as an allergy to nothing."""
    return tuple(
        Problem(ReasonCode.INVALID_RECORD, f"{path} is blank (spaces or invisible characters only)")
        for path in blank_required_text(event)
    )


def _unprintable_text(event: Event, text: FreeText) -> tuple[Problem, ...]:
    """A control character anywhere, or a character that does not print in a name (tenant,
    subject, actor, purpose, scope): see `projections.characters`."""
    return tuple(
        Problem(ReasonCode.INVALID_RECORD, found.describe())
        for found in unprintable_characters(event, text)
    )


def _supersedes(
    event: Event, target_id: str, state: UserState, context: GateContext
) -> list[Problem]:
    target = state.events.get(target_id)
    if target is None:
        owner = context.claim_owners.get(target_id)
        if owner is not None and owner != event.key:
            detail = f"supersedes {target_id}, a claim of another subject"
            return [Problem(ReasonCode.SUPERSEDES_OTHER_SUBJECT, detail)]
        return [
            Problem(ReasonCode.SUPERSEDES_UNKNOWN_CLAIM, f"supersedes unknown claim {target_id}")
        ]
    if target.type is not event.type:
        detail = (
            f"supersedes {target_id}, a {target.type.value}: a correction replaces a claim of "
            f"its own type (a {event.type.value} that corrected it would erase it)"
        )
        return [Problem(ReasonCode.SUPERSEDES_OTHER_TYPE, detail)]
    if claim_key(target) != claim_key(event) or claim_key(event) is None:
        detail = f"supersedes {target_id}, which is a claim about another key"
        return [Problem(ReasonCode.SUPERSEDES_OTHER_KEY, detail)]
    if weaker_than(event, target):
        detail = (
            f"supersedes {target_id}, a {target.origin.value} claim: a correction replaces its "
            f"claim outright, and an {event.origin.value} claim never overrides an explicit or "
            "verified one (send it without supersedes: the policy weighs it)"
        )
        return [Problem(ReasonCode.SUPERSEDES_STRONGER_CLAIM, detail)]
    if target.purpose != event.purpose:
        detail = (
            f"supersedes {target_id}, a claim recorded for {target.purpose!r}: a correction "
            f"recorded for {event.purpose!r} may not replace it (retract it for "
            f"{target.purpose!r}, then record the claim for {event.purpose!r})"
        )
        return [Problem(ReasonCode.SUPERSEDES_OTHER_PURPOSE, detail)]
    return []
