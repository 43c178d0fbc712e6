"""The erasure ledger: which subjects were erased, as known to this process.

The durable ledger is the compacted erasures topic (one `ErasureRecorded` per subject, keyed by
`subject_ref`). Every process that could bring a subject back (the worker's gate, the sink,
the readers) loads it at start-up and follows it, and also trusts the key store's own record
of destroyed keys, so an erasure holds even for a process that has not seen the entry yet.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from schemas.codec import erasure_codec
from schemas.erasures import ErasureRecorded, ref_of_key
from streams.keys import SubjectKeys
from streams.topic_reader import follow_topic, read_topic

log = logging.getLogger(__name__)


@dataclass
class ErasureLedger:
    keys: SubjectKeys
    refs: set[str] = field(default_factory=set)

    def is_erased(self, subject: str, *, key_in_use: bool = False) -> bool:
        """Whether `tenant:subject` was erased (ledger entry or destroyed key). `key_in_use`:
        the caller has just opened a record with the subject's key, so the key store was
        asked already and only the ledger is."""
        if ref_of_key(subject) in self.refs:
            return True
        return not key_in_use and self.keys.is_destroyed(subject)

    def add(self, entry: ErasureRecorded) -> None:
        self.refs.add(entry.subject_ref)


def reconcile(ledger: ErasureLedger, keys: SubjectKeys) -> None:
    """Destroy the key of every subject the ledger names (again): after a crash between
    recording an erasure and destroying its key, or a key store restored from a copy taken
    before the erasure. A destruction the key store already holds is left as it is."""
    for ref in ledger.refs:
        keys.destroy_by_ref(ref)


async def load_ledger(bootstrap: str, topic: str, keys: SubjectKeys) -> ErasureLedger:
    ledger = ErasureLedger(keys)
    codec = erasure_codec()
    for record in await read_topic(bootstrap, topic):
        if record.value is not None:
            ledger.add(codec.decode(record.value))
    return ledger


async def follow_ledger(
    bootstrap: str, topic: str, ledger: ErasureLedger, stop: asyncio.Event
) -> None:
    """Keep `ledger` current with entries other processes record, until `stop`."""
    codec = erasure_codec()
    async for record in follow_topic(bootstrap, topic, stop):
        if record.value is not None:
            entry = codec.decode(record.value)
            if entry.subject_ref not in ledger.refs:
                log.info("erasure ledger: subject %s… erased", entry.subject_ref[:12])
            ledger.add(entry)
