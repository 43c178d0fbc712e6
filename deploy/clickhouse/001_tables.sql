-- UaC history in ClickHouse: every accepted event, every gate decision, every alert lifecycle
-- record and every state checkpoint the worker publishes (written by `streams/sink.py`).
--
-- Applied idempotently by `streams.clickhouse.apply_schema` (statements separated by semicolons).
-- Rules kept by every table:
--   * `tenant_id` is the first ORDER BY key, so a tenant-filtered read touches only its range.
--   * ReplacingMergeTree keyed so that a re-inserted row is a duplicate of the first copy:
--     read with FINAL (the analytics layer does) and a replay or redelivery is harmless.
--   * `non_replicated_deduplication_window` makes `insert_deduplication_token` work on a
--     non-replicated table (the embedded chDB engine included): the same batch re-sent with the
--     same token after a failure is dropped by the engine.
--   * Every timestamp is DateTime64(3, 'UTC') and is inserted tz-aware.
--   * `source_*` columns locate the Kafka record a row came from (lineage and audit);
--     `ingested_at` is when the sink wrote it.

CREATE DATABASE IF NOT EXISTS uac;

CREATE TABLE IF NOT EXISTS uac.events
(
    tenant_id          LowCardinality(String),
    subject_id         String,
    event_id           UUID,
    type               LowCardinality(String),
    actor              LowCardinality(String),
    occurred_at        DateTime64(3, 'UTC'),
    recorded_at        DateTime64(3, 'UTC'),
    origin             LowCardinality(String),
    source_ref         Nullable(String),
    confidence         Float64,
    sensitivity        LowCardinality(String),
    purpose            LowCardinality(String),
    scope              LowCardinality(String),
    valid_from         Nullable(DateTime64(3, 'UTC')),
    valid_until        Nullable(DateTime64(3, 'UTC')),
    supersedes         Nullable(String),
    payload            String CODEC(ZSTD(3)),
    decision_id        UUID,
    decided_at         DateTime64(3, 'UTC'),
    source_topic       LowCardinality(String),
    source_partition   UInt32,
    source_offset      UInt64,
    accepted_partition UInt32,
    accepted_offset    UInt64,
    ingested_at        DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
ORDER BY (tenant_id, subject_id, event_id)
SETTINGS non_replicated_deduplication_window = 10000;

CREATE TABLE IF NOT EXISTS uac.gate_decisions
(
    tenant_id        LowCardinality(String),
    decision_id      UUID,
    outcome          LowCardinality(String),
    reasons          Array(LowCardinality(String)),
    detail           String,
    event_id         Nullable(String),
    subject_id       Nullable(String),
    actor            Nullable(String),
    event_type       LowCardinality(Nullable(String)),
    message_sha256   FixedString(64),
    source_topic     LowCardinality(String),
    source_partition UInt32,
    source_offset    UInt64,
    decided_at       DateTime64(3, 'UTC'),
    ingested_at      DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
ORDER BY (tenant_id, decision_id)
SETTINGS non_replicated_deduplication_window = 10000;

CREATE TABLE IF NOT EXISTS uac.alerts
(
    tenant_id        LowCardinality(String),
    alert_id         UUID,
    lifecycle_id     UUID,
    subject_id       String,
    rule_id          LowCardinality(String),
    rule_version     UInt32,
    status           LowCardinality(String),
    severity         LowCardinality(String),
    title            String,
    detail           String,
    cause            Array(String),
    evidence         String,
    drug_allergy     Nullable(String),
    trigger_event_id String,
    occurred_at      DateTime64(3, 'UTC'),
    reason           Nullable(String),
    source_topic     LowCardinality(String),
    source_partition UInt32,
    source_offset    UInt64,
    ingested_at      DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
ORDER BY (tenant_id, alert_id, lifecycle_id)
SETTINGS non_replicated_deduplication_window = 10000;

CREATE TABLE IF NOT EXISTS uac.state_checkpoints
(
    tenant_id        LowCardinality(String),
    subject_id       String,
    version          UInt64,
    state_hash       FixedString(64),
    last_event_id    Nullable(String),
    as_of            Nullable(DateTime64(3, 'UTC')),
    erased           Bool,
    state_json       String CODEC(ZSTD(3)),
    source_topic     LowCardinality(String),
    source_partition UInt32,
    source_offset    UInt64,
    ingested_at      DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
ORDER BY (tenant_id, subject_id, version)
SETTINGS non_replicated_deduplication_window = 10000;
