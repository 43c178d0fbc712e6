"""The sink's Prometheus metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class SinkMetrics:
    """The sink's Prometheus metrics, in a registry of its own (one per sink instance)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.rows_written = Counter(
            "uac_sink_rows_written", "Rows inserted, by table", ["table"], registry=self.registry
        )
        self.batches = Counter(
            "uac_sink_batches", "Batches inserted and committed", registry=self.registry
        )
        self.retries = Counter(
            "uac_sink_insert_retries", "Failed insert attempts, retried", registry=self.registry
        )
        self.undecodable = Counter(
            "uac_sink_undecodable_records",
            "Records skipped because they do not decode or map to rows",
            ["topic"],
            registry=self.registry,
        )
        self.skipped = Counter(
            "uac_sink_skipped_records",
            "Records skipped by design: tombstones, and records of erased subjects (unopenable)",
            ["topic", "reason"],
            registry=self.registry,
        )
        self.erased_rows_dropped = Counter(
            "uac_sink_erased_rows_dropped",
            "Pending rows dropped at flush because their subject is in the erasure ledger",
            ["table"],
            registry=self.registry,
        )
        self.erasures = Counter(
            "uac_sink_erasures",
            "Erasure ledger entries carried out (first: receipt written; recheck: seen again)",
            ["outcome"],
            registry=self.registry,
        )
        self.erasure_seconds = Histogram(
            "uac_sink_erasure_seconds",
            "Time to delete, verify and record one erasure in ClickHouse",
            registry=self.registry,
        )
        self.commit_lag = Gauge(
            "uac_sink_commit_lag_records",
            "Records between the last committed offsets and the end of the log, at that commit",
            registry=self.registry,
        )
        self.last_commit = Gauge(
            "uac_sink_last_commit_timestamp_seconds",
            "Unix time of the last successful commit",
            registry=self.registry,
        )
        self.flush_seconds = Histogram(
            "uac_sink_flush_seconds",
            "Time to insert and commit one batch, retries included",
            registry=self.registry,
        )
