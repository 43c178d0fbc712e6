"""A batch of the sink: the rows waiting to be inserted, the erasure ledger entries waiting to
be carried out, the partition spans they came from and the dedup tokens derived from them, and
the backoff between insert attempts."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from aiokafka import TopicPartition

from schemas.erasures import ErasureRecorded
from streams.clickhouse import ErasureOutcome
from streams.rows import COLUMNS, Row

MAX_BATCH_BYTES: Final = 64 * 1024 * 1024
"""A batch is also flushed at this many record bytes: checkpoints carry whole state documents,
so a row count alone does not bound memory."""


@dataclass(frozen=True)
class RetryPolicy:
    """Capped exponential backoff between insert attempts."""

    first_seconds: float = 0.1
    max_seconds: float = 10.0
    factor: float = 2.0

    def delay(self, attempt: int) -> float:
        return float(min(self.max_seconds, self.first_seconds * self.factor**attempt))


class Span(NamedTuple):
    """The records of one partition in a batch: first and last offset, and their timestamps.

    The timestamps make the dedup token tell apart two logs with the same offsets (a topic that
    was deleted and created again while ClickHouse kept its data and its dedup window).
    """

    first: int
    last: int
    first_timestamp: int
    last_timestamp: int

    def extended(self, offset: int, timestamp: int) -> Span:
        first = (self.first, self.first_timestamp) if self.first <= offset else (offset, timestamp)
        last = (self.last, self.last_timestamp) if self.last >= offset else (offset, timestamp)
        return Span(first[0], last[0], first[1], last[1])

    def __str__(self) -> str:
        return f"{self.first}@{self.first_timestamp}-{self.last}@{self.last_timestamp}"


@dataclass
class Batch:
    """Rows waiting to be inserted, erasure ledger entries waiting to be carried out, and the
    partition spans they came from."""

    started: float = field(default_factory=time.monotonic)
    rows: dict[str, list[Row]] = field(default_factory=lambda: {table: [] for table in COLUMNS})
    erasures: list[ErasureRecorded] = field(default_factory=list)
    spans: dict[TopicPartition, Span] = field(default_factory=dict)
    size: int = 0

    @property
    def row_count(self) -> int:
        return sum(len(rows) for rows in self.rows.values())

    @property
    def empty(self) -> bool:
        return not self.spans

    def add(self, record: Any, rows: Iterable[tuple[str, Row]]) -> None:
        """Add a consumed record (offset, timestamp, size) and the rows made from it."""
        partition = TopicPartition(record.topic, record.partition)
        known = self.spans.get(partition)
        self.spans[partition] = (
            Span(record.offset, record.offset, record.timestamp, record.timestamp)
            if known is None
            else known.extended(record.offset, record.timestamp)
        )
        self.size += len(record.value or b"")
        for table, row in rows:
            self.rows[table].append(row)

    def due(self, max_rows: int, max_seconds: float, max_bytes: int = MAX_BATCH_BYTES) -> bool:
        if self.empty:
            return False
        full = self.row_count >= max_rows or self.size >= max_bytes
        return full or time.monotonic() - self.started >= max_seconds

    def token(self, table: str) -> str:
        """The insert_deduplication_token of `table`'s insert: same batch, same token."""
        return batch_token(table, self.spans)

    def next_offsets(self) -> dict[TopicPartition, int]:
        """What to commit once the rows are in: the offset after the last record, per partition."""
        return {partition: span.last + 1 for partition, span in self.spans.items()}


@dataclass
class Applied:
    """What one flush did: rows written and dropped (erased subjects) per table, erasures."""

    written: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    erasures: list[ErasureOutcome] = field(default_factory=list)


def batch_token(table: str, spans: Mapping[TopicPartition, Span]) -> str:
    """A deterministic token from the batch's topic/partition/offset spans (and timestamps)."""
    lines = sorted(f"{tp.topic}/{tp.partition}/{span}" for tp, span in spans.items())
    digest = hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()
    return f"uac-sink/{table}/{digest}"
