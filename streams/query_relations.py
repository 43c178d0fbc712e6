"""The relations analysts query: each a read of a storage table, or of the current checkpoint
document, filtered by the tenant, the read's purpose and the subject's consent (the contract is
in `streams.analytics`)."""

from __future__ import annotations

from typing import Final

from projections.gate import HEALTH_PAYLOADS
from schemas.events import EventType
from streams.clickhouse import DATABASE

TENANT_PARAMETER: Final = "tenant"
PURPOSE_PARAMETER: Final = "purpose"
READ_AT_PARAMETER: Final = "read_at"
ERASED_PARAMETER: Final = "erased"


HEALTH_EVENT_TYPES: Final = tuple(EventType(payload.__name__).value for payload in HEALTH_PAYLOADS)
"""Event types that are special-category data whatever their sensitivity label (as the gate)."""


_TABLE_RELATIONS: Final = (
    "events",
    "gate_decisions",
    "alerts",
    "state_checkpoints",
    "erasures",
    "audit_reads",
)


_OF_TENANT = "tenant_id = {tenant:String}"
_NOT_ERASED = (
    "(empty({erased:Array(String)}) OR subject_id IS NULL"
    " OR lower(hex(SHA256(concat(tenant_id, ':', subject_id)))) NOT IN {erased:Array(String)})"
)
"""A row about no subject whose erasure is under way (its key destroyed, its rows not yet
deleted by a sink): `erased` holds their `subject_ref`s (`schemas.erasures.ref_of_key`)."""
_OF_TENANT_SUBJECTS = f"{_OF_TENANT} AND {_NOT_ERASED}"
_CHECKPOINT_COLUMNS = (
    "tenant_id, subject_id, version, state_hash, last_event_id, as_of, erased, source_topic, "
    "source_partition, source_offset, ingested_at"
)
_LATEST_DOCUMENTS = f"""SELECT * FROM {DATABASE}.state_checkpoints FINAL WHERE {_OF_TENANT_SUBJECTS}
    ORDER BY subject_id, version DESC, source_offset DESC LIMIT 1 BY subject_id"""  # noqa: S608
"""The current checkpoint of each subject with its document (internal: never a relation)."""
_HELD_CONSENT = "state_json, 'state', 'consents', {purpose:String}"
"""Where the document holds the subject's consent for the read's purpose."""
_CONSENT = f"JSONExtractBool({_HELD_CONSENT}, '%s')"
_CONSENT_EVENT = f"toUUIDOrNull(JSONExtractString({_HELD_CONSENT}, 'event_id'))"
_READ_AT = "{read_at:DateTime64(3, 'UTC')}"
_IN_FORCE = f"coalesce(valid_from <= {_READ_AT}, true) AND coalesce(valid_until > {_READ_AT}, true)"
_CONSENTS_IN_FORCE = f"""SELECT subject_id, event_id FROM {DATABASE}.events
    WHERE {_OF_TENANT_SUBJECTS} AND type = 'ConsentChanged' AND {_IN_FORCE}"""  # noqa: S608
_CONSENTING_SUBJECTS = f"""SELECT subject_id FROM ({_LATEST_DOCUMENTS})
    WHERE {_CONSENT % "granted"} AND {_CONSENT % "special_category"}
    AND (subject_id, {_CONSENT_EVENT}) IN ({_CONSENTS_IN_FORCE})"""  # noqa: S608
"""Subjects whose current state records consent to special-category use for the purpose, in
force at the time of the read (the subject's own event's `valid_from`/`valid_until`, as
`consent_allows`: two subjects may hold events of one id)."""
_BY_CONSENT = f"subject_id IN ({_CONSENTING_SUBJECTS})"
_EXEMPT = "true"
_HEALTH_TYPES = ", ".join(f"'{name}'" for name in HEALTH_EVENT_TYPES)
_SPECIAL_EVENT = f"(sensitivity = 'special_category' OR type IN ({_HEALTH_TYPES}))"


def _claim_ref(claim: str, ref: str, field: str) -> str:
    return f"JSONExtractString({claim}, '{ref}', '{field}')"


def _claim_time(claim: str, ref: str, field: str) -> str:
    return f"parseDateTime64BestEffortOrNull({_claim_ref(claim, ref, field)}, 3, 'UTC')"


def _claim_readable(claim: str, ref: str, allowed: str, *, always_special: bool) -> str:
    """A current-view claim is shown when recorded for the read's purpose, allowed if special,
    and valid at the time of the read (from its `valid_from`, before its `valid_until`)."""
    special = (
        "true"
        if always_special
        else f"{_claim_ref(claim, ref, 'sensitivity')} = 'special_category'"
    )
    return (
        f"{_claim_ref(claim, ref, 'purpose')} = {{purpose:String}}"
        f" AND (NOT ({special}) OR {allowed})"
        f" AND coalesce({_claim_time(claim, ref, 'valid_from')} <= {_READ_AT}, true)"
        f" AND coalesce({_claim_time(claim, ref, 'valid_until')} > {_READ_AT}, true)"
    )


def _claim_columns(claim: str, ref: str) -> str:
    return (
        f"{_claim_ref(claim, ref, 'purpose')} AS purpose, "
        f"{_claim_time(claim, ref, 'valid_until')} AS valid_until"
    )


def _claim_event_columns(claim: str, ref: str) -> str:
    """The event that recorded the claim: its id and its valid time (`occurred_at`)."""
    return (
        f"{_claim_ref(claim, ref, 'event_id')} AS event_id, "
        f"{_claim_time(claim, ref, 'occurred_at')} AS recorded_at"
    )


_HOME_CLAIMS = (
    "JSONExtractArrayRaw(state_json, 'state', 'facts', {purpose:String}, 'home_country', 'history')"
)


def _home_usable(allowed: str) -> str:
    """Whether the read may use every `home_country` claim a trip's home country and
    `international` are derived from (those recorded for the trip's purpose, which is the
    read's): special ones only with a legal basis (otherwise the two columns are NULL, as for
    an unknown home country)."""
    return (
        f"NOT arrayExists(claim -> JSONExtractString(claim, 'sensitivity') = 'special_category', "
        f"{_HOME_CLAIMS}) OR {allowed}"
    )


def _trips(allowed: str) -> str:
    return f"""SELECT
    tenant_id, subject_id, version AS state_version,
    JSONExtractString(trip, 'trip_id') AS trip_id,
    JSONExtractString(trip, 'origin_country') AS origin_country,
    JSONExtractString(trip, 'destination_country') AS destination_country,
    toDate32(JSONExtractString(trip, 'departure_date')) AS departure_date,
    toDate32OrNull(JSONExtractString(trip, 'return_date')) AS return_date,
    if({_home_usable(allowed)}, nullIf(JSONExtractString(trip, 'home_country'), ''), NULL)
        AS home_country,
    if({_home_usable(allowed)}, JSONExtract(trip, 'international', 'Nullable(Bool)'), NULL)
        AS international,
    {_claim_event_columns("trip", "recorded")},
    {_claim_columns("trip", "recorded")}
FROM ({_LATEST_DOCUMENTS}) ARRAY JOIN JSONExtractArrayRaw(state_json, 'state', 'trips') AS trip
WHERE {_claim_readable("trip", "recorded", allowed, always_special=False)}"""  # noqa: S608


def _allergies(allowed: str) -> str:
    return f"""SELECT
    tenant_id, subject_id, version AS state_version,
    JSONExtractString(allergy, 'allergy_id') AS allergy_id,
    JSONExtractString(allergy, 'substance') AS substance,
    nullIf(JSONExtractString(allergy, 'allergy_type'), '') AS allergy_type,
    JSONExtract(allergy, 'categories', 'Array(String)') AS categories,
    nullIf(JSONExtractString(allergy, 'criticality'), '') AS criticality,
    JSONExtractString(allergy, 'verification_status') AS verification_status,
    nullIf(JSONExtractString(allergy, 'clinical_status'), '') AS clinical_status,
    JSONExtract(allergy, 'negated', 'Bool') AS negated,
    JSONExtract(allergy, 'active', 'Bool') AS active,
    JSONExtractRaw(allergy, 'reactions') AS reactions,
    JSONExtractRaw(allergy, 'codes') AS codes,
    JSONExtractString(allergy, 'recorded', 'event_id') AS recorded_event_id,
    parseDateTime64BestEffortOrNull(
        JSONExtractString(allergy, 'recorded', 'occurred_at'), 3, 'UTC') AS recorded_at,
    JSONExtractString(allergy, 'last_change', 'event_id') AS last_change_event_id,
    parseDateTime64BestEffortOrNull(
        JSONExtractString(allergy, 'last_change', 'occurred_at'), 3, 'UTC') AS last_changed_at,
    {_claim_columns("allergy", "recorded")}
FROM ({_LATEST_DOCUMENTS})
ARRAY JOIN JSONExtractArrayRaw(state_json, 'state', 'allergies') AS allergy
WHERE {_claim_readable("allergy", "recorded", allowed, always_special=True)}"""  # noqa: S608


def _medications(allowed: str) -> str:
    return f"""SELECT
    tenant_id, subject_id, state_version,
    JSONExtractString(medication, 'prescription_id') AS prescription_id,
    JSONExtractString(medication, 'drug') AS drug,
    nullIf(JSONExtractString(medication, 'dose'), '') AS dose,
    nullIf(JSONExtractString(medication, 'route'), '') AS route,
    active,
    JSONExtractRaw(medication, 'codes') AS codes,
    JSONExtractString(medication, 'prescribed', 'event_id') AS prescribed_event_id,
    parseDateTime64BestEffortOrNull(
        JSONExtractString(medication, 'prescribed', 'occurred_at'), 3, 'UTC') AS prescribed_at,
    nullIf(JSONExtractString(medication, 'stopped', 'event_id'), '') AS stopped_event_id,
    parseDateTime64BestEffortOrNull(
        JSONExtractString(medication, 'stopped', 'occurred_at'), 3, 'UTC') AS stopped_at,
    nullIf(JSONExtractString(medication, 'stop_reason'), '') AS stop_reason,
    JSONExtract(medication, 'entered_in_error', 'Bool') AS entered_in_error,
    nullIf(JSONExtractString(medication, 'voided', 'event_id'), '') AS voided_event_id,
    {_claim_columns("medication", "prescribed")}
FROM (
    SELECT tenant_id, subject_id, version AS state_version,
        tupleElement(entry, 1) AS medication, tupleElement(entry, 2) AS active
    FROM ({_LATEST_DOCUMENTS}) ARRAY JOIN arrayConcat(
        arrayMap(m -> (m, true), JSONExtractArrayRaw(state_json, 'state', 'medications', 'active')),
        arrayMap(m -> (m, true), JSONExtractArrayRaw(state_json, 'state', 'medications', 'scheduled')),
        arrayMap(m -> (m, true), JSONExtractArrayRaw(state_json, 'state', 'medications', 'expired')),
        arrayMap(m -> (m, false), JSONExtractArrayRaw(state_json, 'state', 'medications', 'stopped'))
    ) AS entry
)
WHERE {_claim_readable("medication", "prescribed", allowed, always_special=True)}"""  # noqa: S608


_HELD_VALUE_JSON = "JSONExtractRaw(claim, 'value')"


def _held_claims(kind: str, allowed: str) -> str:
    """One row per key of the document's `preferences` or `facts` map of the read's purpose: the
    value the fold holds and the claim that holds it (`current`). The key's `history` is left
    out: the `events` relation has the claims a read may see."""
    return f"""SELECT
    tenant_id, subject_id, state_version, key,
    if(JSONType(claim, 'value') = 'String', JSONExtractString(claim, 'value'), {_HELD_VALUE_JSON})
        AS value,
    {_HELD_VALUE_JSON} AS value_json,
    {_claim_ref("claim", "current", "origin")} AS origin,
    JSONExtractFloat(claim, 'current', 'confidence') AS confidence,
    nullIf({_claim_ref("claim", "current", "source_ref")}, '') AS source_ref,
    {_claim_event_columns("claim", "current")},
    nullIf(JSONExtractString(claim, 'needs_confirmation'), '') AS needs_confirmation,
    {_claim_columns("claim", "current")}
FROM (
    SELECT tenant_id, subject_id, version AS state_version,
        tupleElement(entry, 1) AS key, tupleElement(entry, 2) AS claim
    FROM ({_LATEST_DOCUMENTS})
    ARRAY JOIN JSONExtractKeysAndValuesRaw(state_json, 'state', '{kind}', {{purpose:String}})
        AS entry
)
WHERE {_claim_readable("claim", "current", allowed, always_special=False)}"""  # noqa: S608


def _consents() -> str:
    """The subject's consent for the read's purpose, as the current checkpoint holds it (granted
    or withdrawn, in force or not), with the validity and provenance of the subject's
    `ConsentChanged` that set it. `in_force` is the test the legal basis applies
    (`_CONSENTS_IN_FORCE`): false while that event is not in `events`. Consents for other
    purposes are not shown."""
    return f"""SELECT
    c.tenant_id AS tenant_id, c.subject_id AS subject_id, c.state_version AS state_version,
    c.purpose AS purpose, c.granted AS granted, c.special_category AS special_category,
    c.event_id AS event_id, c.recorded_at AS recorded_at,
    e.valid_from AS valid_from, e.valid_until AS valid_until, e.in_force AS in_force,
    e.origin AS origin, e.source_ref AS source_ref
FROM (
    SELECT tenant_id, subject_id, version AS state_version, {{purpose:String}} AS purpose,
        JSONExtract({_HELD_CONSENT}, 'granted', 'Bool') AS granted,
        JSONExtract({_HELD_CONSENT}, 'special_category', 'Bool') AS special_category,
        JSONExtractString({_HELD_CONSENT}, 'event_id') AS event_id,
        parseDateTime64BestEffortOrNull(JSONExtractString({_HELD_CONSENT}, 'occurred_at'), 3, 'UTC')
            AS recorded_at
    FROM ({_LATEST_DOCUMENTS})
    WHERE JSONHas({_HELD_CONSENT})
) AS c
LEFT JOIN (
    SELECT subject_id, toString(event_id) AS event_id, valid_from, valid_until,
        CAST({_IN_FORCE} AS Bool) AS in_force, toNullable(origin) AS origin, source_ref
    FROM {DATABASE}.events FINAL WHERE {_OF_TENANT_SUBJECTS} AND type = 'ConsentChanged'
) AS e ON e.subject_id = c.subject_id AND e.event_id = c.event_id"""  # noqa: S608


def _of_tenant(table: str, columns: str = "*", *, about_subjects: bool = True) -> str:
    """The tenant's rows of a storage table (the base of every relation), those about a
    subject whose erasure is under way left out."""
    where = _OF_TENANT_SUBJECTS if about_subjects else _OF_TENANT
    return f"SELECT {columns} FROM {DATABASE}.{table} FINAL WHERE {where}"  # noqa: S608


def _gate_decisions(allowed: str) -> str:
    """Every decision of the tenant, but one about a health event (an allergy or medication
    record, an acknowledgement) names its subject only where the read may see that subject's
    special-category data: that someone was prescribed something is health data, while the
    counts of decisions by type and reason stay whole. Such a row also leaves out what would
    name the subject through another row: its event id, its position in the log (a subject's
    events share a partition, so the neighbouring offset is often its own), its decision id
    (a uuid5 of that position, which a query can recompute), and its times to the
    millisecond (the events of one subject sent together are decided at one instant): they
    are given to the hour."""
    hidden = f"coalesce(event_type IN ({_HEALTH_TYPES}), false) AND NOT ({allowed})"
    withheld = ", ".join(
        [
            *(f"if({hidden}, NULL, {column}) AS {column}" for column in _LINKING_DECISION_COLUMNS),
            *(
                f"if({hidden}, toDateTime64(toStartOfHour({column}), 3, 'UTC'), {column}) "
                f"AS {column}"
                for column in _DECISION_TIMES
            ),
        ]
    )
    return (
        f"SELECT * REPLACE ({withheld}) "  # noqa: S608
        f"FROM {DATABASE}.gate_decisions FINAL WHERE {_OF_TENANT_SUBJECTS}"
    )


_LINKING_DECISION_COLUMNS: Final = (
    "decision_id",
    "subject_id",
    "event_id",
    "source_partition",
    "source_offset",
)
_DECISION_TIMES: Final = ("decided_at", "ingested_at")


def _relations(allowed: str) -> dict[str, str]:
    """Relation name -> definition, given the condition that lets a subject's special-category
    data be read for the read's purpose; later definitions may use earlier ones."""
    purpose_bound = f"AND purpose = {{purpose:String}} AND (NOT {_SPECIAL_EVENT} OR {allowed})"
    return {
        "events": f"{_of_tenant('events')} {purpose_bound}",
        "gate_decisions": _gate_decisions(allowed),
        "alerts": f"{_of_tenant('alerts')} AND purpose = {{purpose:String}} AND {allowed}",
        "state_checkpoints": _of_tenant("state_checkpoints", _CHECKPOINT_COLUMNS),
        "open_alerts": """SELECT * FROM (
    SELECT * FROM alerts ORDER BY alert_id, source_offset DESC LIMIT 1 BY alert_id
) WHERE status IN ('raised', 'acknowledged', 'overridden')""",
        "current_state": (
            "SELECT * FROM state_checkpoints ORDER BY subject_id, version DESC, source_offset DESC "
            "LIMIT 1 BY subject_id"
        ),
        "trips": _trips(allowed),
        "allergies": _allergies(allowed),
        "medications": _medications(allowed),
        "preferences": _held_claims("preferences", allowed),
        "facts": _held_claims("facts", allowed),
        "consents": _consents(),
        "erasures": _of_tenant("erasures", about_subjects=False),
        "audit_reads": _of_tenant("audit_reads", about_subjects=False),
    }


_EXEMPT_RELATIONS: Final = _relations(_EXEMPT)
_CONSENT_RELATIONS: Final = _relations(_BY_CONSENT)
RELATIONS: Final = tuple(_EXEMPT_RELATIONS)
"""The relation names analysts query."""


def relations(*, purpose_exempt: bool) -> dict[str, str]:
    """The relation definitions for a read whose purpose is (or is not) consent-exempt."""
    return dict(_EXEMPT_RELATIONS if purpose_exempt else _CONSENT_RELATIONS)


STORAGE_TABLES: Final = frozenset(f"{DATABASE}.{table}" for table in _TABLE_RELATIONS)
READABLE_TABLES: Final = STORAGE_TABLES | {"system.one"}
"""What a full query may read: the wrapped tables and the one-row dummy of `SELECT 1`."""
