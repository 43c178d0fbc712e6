"""Prometheus metrics of the stream worker (served with its health when UAC_WORKER_METRICS_PORT
is set: `streams.worker_http`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from streams.processing import BatchOutput


@dataclass
class WorkerMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    lag_by_partition: dict[int, int] = field(default_factory=dict)
    """What the lag gauge reports: records still to process per owned events partition."""
    broker_heard_at: float | None = None
    """When (`time.monotonic()`) the broker last answered the worker: a reading of the end
    offsets of its partitions, a batch of events fetched, a rebalance completed."""

    def __post_init__(self) -> None:
        self.decisions = Counter(
            "uac_worker_decisions_total",
            "Gate decisions by outcome",
            ["outcome"],
            registry=self.registry,
        )
        self.rejections = Counter(
            "uac_worker_rejections_total",
            "Rejections by reason code",
            ["reason"],
            registry=self.registry,
        )
        self.alerts = Counter(
            "uac_worker_alerts_total",
            "Alert lifecycle records by rule and status",
            ["rule", "status"],
            registry=self.registry,
        )
        self.erasures = Counter(
            "uac_worker_erasures_total", "Subjects erased", registry=self.registry
        )
        self.checkpoint_failures = Counter(
            "uac_worker_checkpoint_failures_total",
            "Subjects whose checkpoint could not be made (logged by reference)",
            registry=self.registry,
        )
        self.checkpoint_batches_refused = Counter(
            "uac_worker_checkpoint_batches_refused_total",
            "Batches of checkpoints Kafka refused (e.g. a state larger than the state topic's"
            " max.message.bytes); those subjects' checkpoints stay behind their states",
            registry=self.registry,
        )
        self.clock_ticks = Counter(
            "uac_worker_clock_ticks_total",
            "ClockAdvanced events published for subjects whose validity bound passed",
            registry=self.registry,
        )
        self.redelivered_records = Counter(
            "uac_worker_redelivered_records_total",
            "Records delivered again after the worker had processed them (left out)",
            registry=self.registry,
        )
        self.gaps = Counter(
            "uac_worker_offset_gaps_total",
            "Offset ranges holding events that the consumer passed over (read from the log)",
            registry=self.registry,
        )
        self.recovered_records = Counter(
            "uac_worker_recovered_records_total",
            "Records the consumer passed over that the worker read from the log and processed",
            registry=self.registry,
        )
        self.rewinds = Counter(
            "uac_worker_consumer_rewinds_total",
            "Times the consumer was sent back to offsets it fetched but never delivered",
            registry=self.registry,
        )
        self.offsets_lost_to_retention = Counter(
            "uac_worker_offsets_lost_to_retention_total",
            "Passed-over offsets already deleted by retention when the worker went to read them",
            registry=self.registry,
        )
        self.lag = Gauge(
            "uac_worker_lag_records",
            "Records of the events topic this worker has still to process, per partition it owns",
            ["partition"],
            registry=self.registry,
        )
        self.rulebook_unjudged = Gauge(
            "uac_worker_rulebook_unjudged",
            "1 when the alerts were judged by other rules or knowledge than the worker's (or the"
            " pipeline has no record of which): run `uac rejudge` with the workers stopped",
            registry=self.registry,
        )
        self.tenants_file = Gauge(
            "uac_worker_tenants_file",
            "1 for the tenants file the worker enforces, by the sha256 of its bytes",
            ["sha256"],
            registry=self.registry,
        )
        self.tenants_file_refusals = Counter(
            "uac_worker_tenants_file_refusals_total",
            "Changed tenants files the worker could not use (it kept the last one it could)",
            registry=self.registry,
        )
        self.batch_seconds = Histogram(
            "uac_worker_batch_seconds",
            "Time to process and publish one batch",
            registry=self.registry,
        )

    def observe(self, output: BatchOutput, seconds: float) -> None:
        self.decisions.labels(outcome="accepted").inc(len(output.accepted))
        self.decisions.labels(outcome="rejected").inc(len(output.quarantined))
        for decision in output.quarantined:
            for reason in decision.reasons:
                self.rejections.labels(reason=reason).inc()
        for alert in output.alerts:
            self.alerts.labels(rule=alert.rule_id, status=alert.status.value).inc()
        self.erasures.inc(len(output.erasures))
        self.batch_seconds.observe(seconds)

    def observe_lag(self, behind: Mapping[int, int]) -> None:
        """The records still to process per owned partition; partitions the worker no longer
        owns leave the gauge (their new owner reports them)."""
        for partition in self.lag_by_partition.keys() - behind.keys():
            self.lag.remove(str(partition))
        for partition, records in behind.items():
            self.lag.labels(partition=str(partition)).set(records)
        self.lag_by_partition = dict(behind)

    def tenants_file_enforced(self, sha256: str) -> None:
        self.tenants_file.clear()
        self.tenants_file.labels(sha256=sha256).set(1)
