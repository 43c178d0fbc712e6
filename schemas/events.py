"""The event envelope and its typed payloads (mirrors `avro/event.v3.avsc` field by field)."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Final
from uuid import UUID

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    FiniteFloat,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails

from schemas.base import CalendarDate, UtcMillis, WireModel
from schemas.countries import iso_country
from schemas.severity import Severity


class EventType(StrEnum):
    ALLERGY_RECORDED = "AllergyRecorded"
    ALLERGY_STATUS_CHANGED = "AllergyStatusChanged"
    MEDICATION_PRESCRIBED = "MedicationPrescribed"
    MEDICATION_STOPPED = "MedicationStopped"
    TRAVEL_RECORDED = "TravelRecorded"
    PREFERENCE_STATED = "PreferenceStated"
    FACT_ASSERTED = "FactAsserted"
    CLAIM_RETRACTED = "ClaimRetracted"
    CONSENT_CHANGED = "ConsentChanged"
    ALERT_ACKNOWLEDGED = "AlertAcknowledged"
    ERASURE_REQUESTED = "ErasureRequested"
    CLOCK_ADVANCED = "ClockAdvanced"


class Origin(StrEnum):
    EXPLICIT_STATEMENT = "explicit_statement"
    USER_PROVIDED_FACT = "user_provided_fact"
    OBSERVED_BEHAVIOR = "observed_behavior"
    INFERRED = "inferred"
    IMPORTED = "imported"
    VERIFIED_SOURCE = "verified_source"


class Sensitivity(StrEnum):
    NORMAL = "normal"
    SENSITIVE = "sensitive"
    SPECIAL_CATEGORY = "special_category"


class AllergyType(StrEnum):
    ALLERGY = "allergy"
    INTOLERANCE = "intolerance"


class AllergyCategory(StrEnum):
    FOOD = "food"
    MEDICATION = "medication"
    ENVIRONMENT = "environment"
    BIOLOGIC = "biologic"


class Criticality(StrEnum):
    LOW = "low"
    HIGH = "high"
    UNABLE_TO_ASSESS = "unable_to_assess"


class VerificationStatus(StrEnum):
    UNCONFIRMED = "unconfirmed"
    CONFIRMED = "confirmed"
    REFUTED = "refuted"
    ENTERED_IN_ERROR = "entered_in_error"


class ClinicalStatus(StrEnum):
    ACTIVE = "active"
    INACTIVE = "inactive"
    RESOLVED = "resolved"


class ReactionSeverity(StrEnum):
    MILD = "mild"
    MODERATE = "moderate"
    SEVERE = "severe"


class AcknowledgementAction(StrEnum):
    ACCEPTED = "accepted"
    OVERRIDDEN = "overridden"


def canonical_uuid(value: object) -> str:
    """A UUID in its canonical lowercase hyphenated text form."""
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, str):
        return str(UUID(value))
    raise ValueError("expected a UUID")


EventId = Annotated[str, BeforeValidator(canonical_uuid)]
"""A producer-chosen UUID, kept as its canonical text (the dedup key and claim id)."""


def canonical_reference(value: object) -> object:
    """A reference to an event or alert id in the canonical text of that id when it is a UUID
    in another spelling (upper case, braces, `urn:uuid:`), as `event_id` is kept, so it finds
    what it names; any other value is left as sent (and refers to nothing known)."""
    if not isinstance(value, str):
        return value
    try:
        return str(UUID(value))
    except ValueError:
        return value


IdReference = Annotated[str, BeforeValidator(canonical_reference)]
"""The id of another event (`supersedes`, a retracted claim) or of an alert, as sent or, for a
UUID, in its canonical text."""


class Coding(WireModel):
    system: str = Field(min_length=1)
    code: str = Field(min_length=1)
    display: str | None = None


class Reaction(WireModel):
    manifestation: str = Field(min_length=1)
    severity: ReactionSeverity | None = None


class AllergyRecorded(WireModel):
    allergy_id: str = Field(min_length=1)
    substance: str = Field(min_length=1)
    codes: tuple[Coding, ...] = ()
    allergy_type: AllergyType | None = None
    categories: tuple[AllergyCategory, ...] = ()
    criticality: Criticality | None = None
    verification_status: VerificationStatus = VerificationStatus.CONFIRMED
    clinical_status: ClinicalStatus | None = None
    negated: bool = Field(default=False, strict=True)
    reactions: tuple[Reaction, ...] = ()
    note: str | None = None


class AllergyStatusChanged(WireModel):
    allergy_id: str = Field(min_length=1)
    verification_status: VerificationStatus | None = None
    clinical_status: ClinicalStatus | None = None
    reason: str | None = None

    @model_validator(mode="after")
    def _changes_something(self) -> AllergyStatusChanged:
        if self.verification_status is None and self.clinical_status is None:
            raise ValueError("an allergy status change needs a verification or clinical status")
        return self


class MedicationPrescribed(WireModel):
    prescription_id: str = Field(min_length=1)
    drug: str = Field(min_length=1)
    codes: tuple[Coding, ...] = ()
    dose: str | None = None
    route: str | None = None
    note: str | None = None


class MedicationStopped(WireModel):
    prescription_id: str = Field(min_length=1)
    reason: str | None = None
    entered_in_error: bool = Field(default=False, strict=True)
    """The prescription was recorded in error (FHIR `entered-in-error`): it never held, so a
    read as of a time before this stop leaves it out too, while a plain stop ends it only from
    its time on."""


def _country(value: str) -> str:
    code = iso_country(value)
    if code is None:
        raise ValueError("not an ISO 3166-1 alpha-2 country code (two letters, e.g. NL)")
    return code


class TravelRecorded(WireModel):
    trip_id: str = Field(min_length=1)
    origin_country: str
    destination_country: str
    departure_date: CalendarDate
    return_date: CalendarDate | None = None
    note: str | None = None

    _normalise_countries = field_validator("origin_country", "destination_country")(_country)

    @model_validator(mode="after")
    def _returns_after_departure(self) -> TravelRecorded:
        if self.return_date is not None and self.return_date < self.departure_date:
            raise ValueError("return_date is before departure_date")
        return self


class PreferenceStated(WireModel):
    key: str = Field(min_length=1)
    value: str
    note: str | None = None


AvroLong = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
FactValue = bool | AvroLong | FiniteFloat | str
"""What Avro's `[string, long, double, boolean]` carries and canonical JSON can write: no NaN or
infinity (an integer beyond a long is read as a double, as Avro would write it)."""


class FactAsserted(WireModel):
    key: str = Field(min_length=1)
    value: FactValue


class ClaimRetracted(WireModel):
    claim_id: IdReference = Field(min_length=1)
    reason: str | None = None


class ConsentChanged(WireModel):
    purpose: str = Field(min_length=1)
    granted: bool = Field(strict=True)
    special_category: bool = Field(default=False, strict=True)


class AlertAcknowledged(WireModel):
    alert_id: IdReference = Field(min_length=1)
    action: AcknowledgementAction
    reason: str | None = None
    severity: Severity | None = None
    """The grade of the alert the person answered (its severity when they decided): the
    acknowledgement covers it and milder ones. None: the grade the alert had in the record as
    it was known when the acknowledgement was recorded (`rules.acknowledgements`)."""

    @model_validator(mode="after")
    def _override_needs_reason(self) -> AlertAcknowledged:
        overridden = self.action is AcknowledgementAction.OVERRIDDEN
        if overridden and not (self.reason and self.reason.strip()):
            raise ValueError("overriding an alert needs a reason")
        return self


class ErasureRequested(WireModel):
    reason: str | None = None


class ClockAdvanced(WireModel):
    """The subject's time reached the event's `occurred_at`, a moment where a claim's validity
    window opens or closes. Written by the worker's clock (actor `CLOCK_ACTOR`) only; it
    records no claim."""


CLOCK_ACTOR: Final = "uac-clock"
DEFAULT_PURPOSE: Final = "care"
"""The purpose a record is for when it names none, and that of a read that names none."""


Payload = (
    AllergyRecorded
    | AllergyStatusChanged
    | MedicationPrescribed
    | MedicationStopped
    | TravelRecorded
    | PreferenceStated
    | FactAsserted
    | ClaimRetracted
    | ConsentChanged
    | AlertAcknowledged
    | ErasureRequested
    | ClockAdvanced
)

PAYLOAD_MODELS: Final[dict[str, type[WireModel]]] = {
    EventType(model.__name__).value: model
    for model in (
        AllergyRecorded,
        AllergyStatusChanged,
        MedicationPrescribed,
        MedicationStopped,
        TravelRecorded,
        PreferenceStated,
        FactAsserted,
        ClaimRetracted,
        ConsentChanged,
        AlertAcknowledged,
        ErasureRequested,
        ClockAdvanced,
    )
}


class Event(WireModel):
    """The envelope every producer sends. `type` names the payload record."""

    event_id: EventId
    tenant_id: str = Field(min_length=1, pattern=r"^[^:\s]+$")
    subject_id: str = Field(min_length=1, pattern=r"^[^:\s]+$")
    actor: str = Field(min_length=1)
    type: EventType
    occurred_at: UtcMillis
    recorded_at: UtcMillis
    origin: Origin
    source_ref: str | None = None
    confidence: float = Field(ge=0.0, le=1.0, allow_inf_nan=False, strict=True)
    sensitivity: Sensitivity = Sensitivity.NORMAL
    purpose: str = Field(default=DEFAULT_PURPOSE, min_length=1)
    scope: str = Field(default="subject", min_length=1)
    valid_from: UtcMillis | None = None
    valid_until: UtcMillis | None = None
    supersedes: IdReference | None = None
    payload: Payload

    @model_validator(mode="before")
    @classmethod
    def _payload_by_type(cls, data: Any) -> Any:
        """Validate the payload with the model its `type` names (never by guessing from keys)."""
        if isinstance(data, dict) and isinstance(data.get("payload"), dict):
            event_type = data.get("type")
            model = PAYLOAD_MODELS.get(event_type) if isinstance(event_type, str) else None
            if model is None:
                raise ValueError(_unknown_type(event_type))
            try:
                return {**data, "payload": model.model_validate(data["payload"])}
            except ValidationError as error:
                raise _under_payload(error) from None
        if isinstance(data, dict) and not isinstance(data.get("payload", {}), (dict, BaseModel)):
            raise _payload_not_an_object(data["payload"])
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Event:
        if type(self.payload).__name__ != self.type.value:
            raise ValueError(f"payload is {type(self.payload).__name__} but type is {self.type}")
        if self.valid_from and self.valid_until and self.valid_until <= self.valid_from:
            raise ValueError("valid_until must be after valid_from")
        return self

    @property
    def key(self) -> str:
        """The Kafka message key and table key: `tenant_id:subject_id`."""
        return subject_key(self.tenant_id, self.subject_id)

    @property
    def id(self) -> str:
        """The event id (the claim id other events refer to)."""
        return self.event_id


def _payload_not_an_object(payload: object) -> ValidationError:
    """A payload sent as null, text or a number: one error at `payload`, not one per payload
    type the union could have been."""
    return ValidationError.from_exception_data(
        "Event", [InitErrorDetails(type="dict_type", loc=("payload",), input=payload)]
    )


def _under_payload(error: ValidationError) -> ValidationError:
    """The payload's errors located under `payload` (`payload.departure_date`, not a bare
    `departure_date` that reads as an envelope field)."""
    return ValidationError.from_exception_data(
        error.title,
        [
            InitErrorDetails(
                type=item["type"],
                loc=("payload", *item["loc"]),
                input=item["input"],
                ctx=item.get("ctx", {}),
            )
            for item in error.errors()
        ],
    )


def _unknown_type(event_type: object) -> str:
    """Names a type sent as a word (`TeleportRecorded`, a producer's typo), never other text:
    the detail reaches the quarantine topic, where a misplaced value must not be readable."""
    named = (
        f" {event_type!r}"
        if isinstance(event_type, str) and _TYPE_NAME.fullmatch(event_type)
        else ""
    )
    return f"unknown event type{named} (the types are {', '.join(sorted(PAYLOAD_MODELS))})"


_TYPE_NAME: Final = re.compile(r"[A-Za-z]{1,40}")


def subject_key(tenant_id: str, subject_id: str) -> str:
    return f"{tenant_id}:{subject_id}"
