"""Where Kafka is: an explicit bootstrap from settings, or the local broker under UAC_HOME."""

from __future__ import annotations

from streams import local_kafka
from streams.settings import Settings


class KafkaNotFound(RuntimeError):
    pass


def bootstrap_servers(settings: Settings) -> str:
    if settings.kafka_bootstrap:
        return settings.kafka_bootstrap
    broker = local_kafka.status(settings.kafka_state_dir)
    if broker is None:
        raise KafkaNotFound(
            f"no Kafka: set UAC_KAFKA_BOOTSTRAP or run `uac kafka start` (looked in {settings.kafka_state_dir})"
        )
    return broker.bootstrap
