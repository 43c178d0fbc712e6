-- UaC governance tables: erasure receipts and the audit of reads (written by `streams/sink.py`
-- and `streams/analytics.py`). Applied after 001_tables.sql by `streams.clickhouse.apply_schema`.
--
-- Neither table holds personal data: a subject is named only by `subject_ref`, the sha256 hex
-- of 'tenant_id:subject_id' (see `schemas.erasures.subject_ref`), so both survive the erasures
-- they record. `tenant_id` stays the first ORDER BY key, as in every UaC table.

-- One receipt per carried-out erasure (one per ErasureRecorded ledger entry). The sink writes it
-- once, after the subject's rows were deleted by a mutation (parts rewritten, not masked) and a
-- count with `apply_deleted_mask = 0` found none left; a ledger entry seen again is re-checked
-- but never writes a second receipt. `removed_rows` maps each table to the rows physically
-- removed from it (copies that had not been collapsed by ReplacingMergeTree yet included).
CREATE TABLE IF NOT EXISTS uac.erasures
(
    erasure_id    String,
    tenant_id     LowCardinality(String),
    subject_ref   String,
    requested_at  DateTime64(3, 'UTC'),
    recorded_at   DateTime64(3, 'UTC'),
    completed_at  DateTime64(3, 'UTC'),
    requested_by  LowCardinality(String),
    key_destroyed Bool,
    removed_rows  Map(String, UInt64),
    verified      Bool
)
ENGINE = ReplacingMergeTree
ORDER BY (tenant_id, erasure_id)
SETTINGS non_replicated_deduplication_window = 10000;

-- Every read of personal data: the audit topic's ReadAudited records (CLI reads) and one row per
-- analyst query or alert explanation served by the query layer. `detail` says what was read
-- without any value (the sha256 of the SQL, or the alert id); `subject_ref` is NULL for reads
-- across subjects.
CREATE TABLE IF NOT EXISTS uac.audit_reads
(
    audit_id    UUID,
    tenant_id   LowCardinality(String),
    subject_ref Nullable(String),
    actor       LowCardinality(String),
    purpose     LowCardinality(String),
    action      LowCardinality(String),
    detail      String,
    read_at     DateTime64(3, 'UTC'),
    ingested_at DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
ORDER BY (tenant_id, read_at, audit_id)
SETTINGS non_replicated_deduplication_window = 10000;
