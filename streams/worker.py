"""`uac worker`: check the topics, build the Faust app around the pure core, run it."""

from __future__ import annotations

import asyncio

import faust

from rules.engine import default_rules
from rules.knowledge.bundled import load_bundled_knowledge
from schemas.codec import event_codec
from streams.agents import register_agents
from streams.app import create_app
from streams.kafka_address import bootstrap_servers
from streams.processing import BatchProcessor
from streams.settings import Settings
from streams.tenants import load_gate_policy
from streams.topics import Topics, ensure_topics


def build_processor(settings: Settings) -> BatchProcessor:
    return BatchProcessor(
        codec=event_codec(),
        rules=default_rules(load_bundled_knowledge()),
        gate_policy=load_gate_policy(
            settings.tenants_file,
            max_future_skew_seconds=settings.max_future_skew_seconds,
            max_event_bytes=settings.max_event_bytes,
        ),
    )


def run_worker(settings: Settings, loglevel: str = "warn") -> None:
    """Run until SIGINT/SIGTERM. Fails fast if the topics do not match the configuration."""
    bootstrap = bootstrap_servers(settings)
    asyncio.run(
        ensure_topics(bootstrap, Topics(settings.topic_prefix, settings.partitions).specs())
    )
    pipeline = create_app(settings, bootstrap)
    register_agents(
        pipeline, build_processor(settings), settings.batch_size, settings.batch_seconds
    )
    faust.Worker(pipeline.app, loglevel=loglevel, quiet=True).execute_from_commandline()
