"""`uac worker`: check the topics, load the erasure ledger, build the Faust app around the pure
core, run it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from functools import partial

import faust

from rules.base import Rule
from rules.engine import default_rules
from rules.knowledge.bundled import load_bundled_knowledge
from schemas.codec import event_codec
from streams.agents import register_agents
from streams.app import changelog_specs, create_app
from streams.group_access import ensure_group_access
from streams.kafka_address import bootstrap_servers
from streams.keys import FileKeyStore, SubjectKeys
from streams.ledger import ErasureLedger, load_ledger, reconcile
from streams.log_repeats import hold_back_repeats
from streams.processing import BatchProcessor
from streams.record_batches import default_partition
from streams.rulebook import Rulebook, check_rulebook
from streams.runtime import tune_garbage_collector
from streams.sealing import Sealer
from streams.settings import Settings
from streams.tenants import TenantsPolicy, tenants_policy_of
from streams.tenants_watch import TenantsWatch
from streams.topic_reader import ensure_readable
from streams.topics import Topics, ensure_topics
from streams.worker_http import serve_worker_http
from streams.worker_metrics import WorkerMetrics


def build_processor(
    tenants: TenantsPolicy, keys: SubjectKeys, rules: Sequence[Rule], partitions: int
) -> BatchProcessor:
    """The worker's batch step, for an events topic of `partitions` partitions."""
    return BatchProcessor(
        codec=event_codec(),
        rules=rules,
        gate_policy=tenants.gate_policy,
        sealer=Sealer(keys),
        actor_keys=tenants.actor_keys,
        home_partition=partial(default_partition, partitions=partitions),
    )


async def prepare(
    settings: Settings, bootstrap: str, keys: SubjectKeys, rulebook: Rulebook
) -> tuple[ErasureLedger, str | None]:
    """Topics checked and readable, the consumer group usable, ledger loaded, every ledger
    entry's key destroyed (reconciliation after a crash between recording an erasure and
    destroying its key), and the rulebook checked (`streams.rulebook`: what an operator must
    know when the alerts were judged by other rules)."""
    topics = Topics(settings.topic_prefix, settings.partitions)
    changelogs = changelog_specs(settings.app_id, settings.partitions)
    await ensure_topics(bootstrap, topics.specs() + changelogs, settings.topic_replication_factor)
    await ensure_group_access(bootstrap, settings.app_id)
    consumed = [topics.events, topics.erasures, *(spec.name for spec in changelogs)]
    await ensure_readable(bootstrap, consumed)
    ledger = await load_ledger(bootstrap, topics.erasures, keys)
    reconcile(ledger, keys)
    unjudged = await check_rulebook(bootstrap, topics.rulebook, topics.accepted, rulebook)
    return ledger, unjudged


def run_worker(settings: Settings, loglevel: str = "warn") -> None:
    """Run until SIGINT/SIGTERM. Fails fast if the tenants file cannot be used or the topics
    do not match the configuration."""
    bootstrap = bootstrap_servers(settings)
    keys = FileKeyStore(settings.keys_dir)
    tenants = tenants_policy_of(settings)
    knowledge = load_bundled_knowledge()
    rules = default_rules(knowledge)
    processor = build_processor(tenants, keys, rules, settings.partitions)
    rulebook = Rulebook.of(rules, knowledge.version)
    ledger, unjudged = asyncio.run(prepare(settings, bootstrap, keys, rulebook))
    pipeline = create_app(settings, bootstrap, keys, ledger)
    metrics = WorkerMetrics()
    metrics.tenants_file_enforced(tenants.sha256)
    metrics.rulebook_unjudged.set(0 if unjudged is None else 1)
    if settings.worker_metrics_port is not None:
        serve_worker_http(
            pipeline, metrics, settings.worker_metrics_port, settings.worker_metrics_host
        )
    register_agents(
        pipeline,
        processor,
        TenantsWatch(settings, tenants),
        settings.batch_size,
        settings.batch_seconds,
        settings.checkpoint_seconds,
        settings.clock_seconds,
        settings.stall_restart_seconds,
        metrics,
    )
    tune_garbage_collector()
    worker = _Worker(pipeline.app, loglevel=loglevel, quiet=True)
    worker.spinner = None  # its log handler sets the root logger to DEBUG: every record is built
    worker.execute_from_commandline()


class _Worker(faust.Worker):
    def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
        """Faust's set-up of the root logger, then repeated Kafka client errors held back."""
        super().on_setup_root_logger(logger, level)
        hold_back_repeats(logger.handlers)
