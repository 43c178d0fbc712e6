"""Reason codes for every rejection: the vocabulary of the quarantine topic and gate_decisions.

Codes are part of the public contract (docs/producer.md lists them); never rename one.
"""

from __future__ import annotations

from enum import StrEnum


class ReasonCode(StrEnum):
    # The bytes could not be turned into a valid event.
    BAD_FRAMING = "bad_framing"
    UNKNOWN_SCHEMA_ID = "unknown_schema_id"
    INCOMPATIBLE_SCHEMA = "incompatible_schema"
    MALFORMED_AVRO = "malformed_avro"
    MALFORMED_JSON = "malformed_json"
    INVALID_RECORD = "invalid_record"
    KEY_MISMATCH = "key_mismatch"
    WRONG_PARTITION = "wrong_partition"
    # Who may write.
    UNKNOWN_TENANT = "unknown_tenant"
    ACTOR_NOT_ALLOWED = "actor_not_allowed"
    CLOCK_RESERVED = "clock_reserved"
    SIGNATURE_MISSING = "signature_missing"
    SIGNATURE_INVALID = "signature_invalid"
    # Idempotency.
    DUPLICATE_EVENT_ID = "duplicate_event_id"
    EVENT_ID_REUSED = "event_id_reused"
    # Plausibility.
    OCCURRED_IN_FUTURE = "occurred_in_future"
    RECORDED_IN_FUTURE = "recorded_in_future"
    TOO_OLD = "too_old"
    OVERSIZE = "oversize"
    SUBJECT_HISTORY_FULL = "subject_history_full"
    # Privacy.
    SECRET_IN_TEXT = "secret_in_text"  # noqa: S105 (a reason code, not a secret)
    SPECIAL_CATEGORY_WITHOUT_CONSENT = "special_category_without_consent"
    SUBJECT_ERASED = "subject_erased"
    NOT_SEALED = "not_sealed"
    UNREADABLE_SEAL = "unreadable_seal"
    # References between claims.
    SUPERSEDES_UNKNOWN_CLAIM = "supersedes_unknown_claim"
    SUPERSEDES_OTHER_SUBJECT = "supersedes_other_subject"
    SUPERSEDES_OTHER_KEY = "supersedes_other_key"
    SUPERSEDES_OTHER_TYPE = "supersedes_other_type"
    SUPERSEDES_STRONGER_CLAIM = "supersedes_stronger_claim"
    SUPERSEDES_OTHER_PURPOSE = "supersedes_other_purpose"
    RETRACTS_UNKNOWN_CLAIM = "retracts_unknown_claim"
    RETRACTS_STRONGER_CLAIM = "retracts_stronger_claim"
    RETRACTS_OTHER_PURPOSE = "retracts_other_purpose"
    BEFORE_ITS_CLAIM = "before_its_claim"
    """No longer given: a stop or status change dated before its claim is admitted and flagged
    by the `follow-up-before-its-claim` rule, whatever the order of arrival. Records that
    earlier releases quarantined with it may be redriven (they are admitted now)."""
    # A record that contradicts itself.
    NEGATION_NOT_FLAGGED = "negation_not_flagged"
    # A decision only a person can take, written by a process.
    ACKNOWLEDGEMENT_NOT_STATED = "acknowledgement_not_stated"
    # The pipeline failed on this message; it is kept here instead of being lost.
    PROCESSING_ERROR = "processing_error"
