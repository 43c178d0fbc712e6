"""`uac worker`: check the topics, load the erasure ledger, build the Faust app around the pure
core, run it."""

from __future__ import annotations

import asyncio

import faust

from rules.engine import default_rules
from rules.knowledge.bundled import load_bundled_knowledge
from schemas.codec import event_codec
from streams.agents import register_agents
from streams.app import changelog_specs, create_app
from streams.group_access import ensure_group_access
from streams.kafka_address import bootstrap_servers
from streams.keys import FileKeyStore, SubjectKeys
from streams.ledger import ErasureLedger, load_ledger
from streams.processing import BatchProcessor
from streams.runtime import tune_garbage_collector
from streams.sealing import Sealer
from streams.settings import Settings
from streams.tenants import TenantsPolicy, tenants_policy_of
from streams.tenants_watch import TenantsWatch
from streams.topic_reader import ensure_readable
from streams.topics import Topics, ensure_topics
from streams.worker_http import serve_worker_http
from streams.worker_metrics import WorkerMetrics


def build_processor(tenants: TenantsPolicy, keys: SubjectKeys) -> BatchProcessor:
    return BatchProcessor(
        codec=event_codec(),
        rules=default_rules(load_bundled_knowledge()),
        gate_policy=tenants.gate_policy,
        sealer=Sealer(keys),
        actor_keys=tenants.actor_keys,
    )


async def prepare(settings: Settings, bootstrap: str, keys: SubjectKeys) -> ErasureLedger:
    """Topics checked and readable, the consumer group usable, ledger loaded, and every ledger
    entry's key destroyed (reconciliation after a crash between recording an erasure and
    destroying its key)."""
    topics = Topics(settings.topic_prefix, settings.partitions)
    changelogs = changelog_specs(settings.app_id, settings.partitions)
    await ensure_topics(bootstrap, topics.specs() + changelogs, settings.topic_replication_factor)
    await ensure_group_access(bootstrap, settings.app_id)
    consumed = [topics.events, topics.erasures, *(spec.name for spec in changelogs)]
    await ensure_readable(bootstrap, consumed)
    ledger = await load_ledger(bootstrap, topics.erasures, keys)
    for ref in ledger.refs:
        keys.destroy_by_ref(ref)
    return ledger


def run_worker(settings: Settings, loglevel: str = "warn") -> None:
    """Run until SIGINT/SIGTERM. Fails fast if the tenants file cannot be used or the topics
    do not match the configuration."""
    bootstrap = bootstrap_servers(settings)
    keys = FileKeyStore(settings.keys_dir)
    tenants = tenants_policy_of(settings)
    processor = build_processor(tenants, keys)
    ledger = asyncio.run(prepare(settings, bootstrap, keys))
    pipeline = create_app(settings, bootstrap, keys, ledger)
    metrics = WorkerMetrics()
    metrics.tenants_file_enforced(tenants.sha256)
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
    worker = faust.Worker(pipeline.app, loglevel=loglevel, quiet=True)
    worker.spinner = None  # its log handler sets the root logger to DEBUG: every record is built
    worker.execute_from_commandline()
