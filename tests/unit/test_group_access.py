"""The worker's start-up check of its consumer group: an account the group's ACLs refuse stops
it with the group named; a cluster still electing the group's coordinator is asked again; any
other failure is left to the consumer, never a reason not to start."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest
from aiokafka.errors import (
    CoordinatorNotAvailableError,
    GroupAuthorizationFailedError,
    KafkaError,
    UnsupportedVersionError,
)

from streams import group_access
from streams.group_access import GroupNotAuthorized, ensure_group_access, not_authorized


def answering(monkeypatch: pytest.MonkeyPatch, *answers: KafkaError | None) -> list[str]:
    """committed_offsets answers with each error in turn (None: the offsets); the groups asked."""
    asked: list[str] = []
    remaining: Iterator[KafkaError | None] = iter(answers)

    async def committed(_bootstrap: str, group: str, _partitions: object) -> dict[object, int]:
        asked.append(group)
        answer = next(remaining)
        if answer is not None:
            raise answer
        return {}

    monkeypatch.setattr(group_access, "committed_offsets", committed)
    return asked


def check(patience: float = 5.0) -> None:
    asyncio.run(ensure_group_access("127.0.0.1:9092", "uac", [], patience))


def test_given_a_group_the_acls_refuse_then_the_group_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answering(monkeypatch, GroupAuthorizationFailedError("Unable to get coordinator id for uac"))
    with pytest.raises(GroupNotAuthorized, match="may not use consumer group 'uac': grant it"):
        check()


def test_given_a_coordinator_not_elected_yet_then_it_is_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = answering(monkeypatch, CoordinatorNotAvailableError(), None)
    check()
    assert asked == ["uac", "uac"]


@pytest.mark.parametrize(
    ("answers", "patience"),
    [
        pytest.param((UnsupportedVersionError(),), 5.0, id="an error not worth asking again"),
        pytest.param((CoordinatorNotAvailableError(),) * 2, 0.0, id="patience run out"),
    ],
)
def test_given_another_failure_then_the_worker_starts_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    answers: tuple[KafkaError, ...],
    patience: float,
) -> None:
    answering(monkeypatch, *answers)
    with caplog.at_level(logging.WARNING, logger="streams.group_access"):
        check(patience)
    assert "consumer group uac not checked" in caplog.text


def test_a_refusal_without_a_group_still_reads_as_one() -> None:
    assert "the consumer group of this command" in str(not_authorized(None))
    assert "consumer group 'uac-sink'" in str(not_authorized("uac-sink"))
