"""Consumer lag as `uac lag` and the worker's gauge report it: records between a group's
committed offset and the end of the log, never counting what retention already deleted."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest

from streams.keys import FileKeyStore
from streams.lag import GroupLag, PartitionLag, pipeline_groups
from streams.sealing import Sealer
from streams.settings import Settings
from streams.sink_records import RecordRows
from streams.topics import Topics
from streams.worker_metrics import WorkerMetrics


def test_given_a_committed_offset_then_the_lag_is_what_lies_after_it() -> None:
    assert PartitionLag("t", 0, committed=7, start=0, end=10).lag == 3


def test_given_nothing_committed_then_every_kept_record_is_lag() -> None:
    assert PartitionLag("t", 0, committed=None, start=4, end=10).lag == 6


def test_given_retention_deleted_records_past_the_commit_then_they_are_not_lag() -> None:
    assert PartitionLag("t", 0, committed=2, start=5, end=10).lag == 5


def test_given_a_caught_up_group_then_no_lag() -> None:
    assert PartitionLag("t", 0, committed=10, start=0, end=10).lag == 0
    assert PartitionLag("t", 0, committed=None, start=0, end=0).lag == 0


def test_a_groups_lag_sums_its_partitions_and_reads_as_json() -> None:
    group = GroupLag(
        "uac",
        1,
        (PartitionLag("e", 0, 3, 0, 5), PartitionLag("e", 1, None, 0, 4)),
    )
    assert group.lag == 6
    report = group.as_json()
    assert (report["group"], report["members"], report["lag"]) == ("uac", 1, 6)
    assert report["partitions"] == [
        {"topic": "e", "partition": 0, "committed": 3, "start": 0, "end": 5, "lag": 2},
        {"topic": "e", "partition": 1, "committed": None, "start": 0, "end": 4, "lag": 4},
    ]


def test_the_sinks_lag_covers_every_topic_the_sink_consumes(tmp_path: Path) -> None:
    settings, topics = Settings(app_id="uac-x"), Topics("p.", 2)
    groups = pipeline_groups(settings, topics)
    assert groups["uac-x"] == (topics.events,)
    consumed = {*RecordRows(topics, Sealer(FileKeyStore(tmp_path))).topics, topics.erasures}
    assert set(groups["uac-x-sink"]) == consumed


def _gauge(metrics: WorkerMetrics) -> dict[str, float]:
    lines = generate_latest(metrics.registry).decode().splitlines()
    prefix = 'uac_worker_lag_records{partition="'
    return {
        line[len(prefix) :].split('"')[0]: float(line.rsplit(" ", 1)[1])
        for line in lines
        if line.startswith(prefix)
    }


def test_the_worker_gauge_reports_the_partitions_it_owns_now() -> None:
    metrics = WorkerMetrics()
    metrics.observe_lag({0: 5, 1: 0})
    assert _gauge(metrics) == {"0": 5.0, "1": 0.0}
    metrics.observe_lag({1: 2, 3: 1})
    assert _gauge(metrics) == {"1": 2.0, "3": 1.0}
    metrics.observe_lag({})
    assert _gauge(metrics) == {}
