"""The worker's start-up check of its consumer group: an account the group's ACLs refuse (no
Describe to find its coordinator, or no Read to join it) stops it with the group named; the
coordinator refusing the probe's session timeout means the account may join; a cluster still
electing the group's coordinator is asked again; any other failure is left to the consumer,
never a reason not to start."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import TypeAlias

import pytest
from aiokafka.errors import (
    CoordinatorNotAvailableError,
    GroupAuthorizationFailedError,
    InvalidSessionTimeoutError,
    KafkaError,
    UnsupportedVersionError,
)

from streams import group_access
from streams.group_access import GroupNotAuthorized, ensure_group_access, not_authorized

Answer: TypeAlias = KafkaError | type[KafkaError]
JOINABLE = InvalidSessionTimeoutError


def answering(monkeypatch: pytest.MonkeyPatch, *answers: Answer) -> list[str]:
    """join_answer answers with each in turn (an error instance is raised, as a refused
    coordinator lookup is; an error class is the coordinator's answer); the groups asked."""
    asked: list[str] = []
    remaining: Iterator[Answer] = iter(answers)

    async def join_answer(_bootstrap: str, group: str) -> type[KafkaError]:
        asked.append(group)
        answer = next(remaining)
        if isinstance(answer, KafkaError):
            raise answer
        return answer

    monkeypatch.setattr(group_access, "join_answer", join_answer)
    return asked


def check(patience: float = 5.0) -> None:
    asyncio.run(ensure_group_access("127.0.0.1:9092", "uac", patience))


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(
            GroupAuthorizationFailedError("Unable to get coordinator id for uac"),
            id="no Describe: the coordinator lookup is refused",
        ),
        pytest.param(GroupAuthorizationFailedError, id="no Read: the join is refused"),
    ],
)
def test_given_a_group_the_acls_refuse_then_the_group_is_named(
    monkeypatch: pytest.MonkeyPatch, answer: Answer
) -> None:
    answering(monkeypatch, answer)
    with pytest.raises(GroupNotAuthorized, match="may not use consumer group 'uac': grant it"):
        check()


def test_given_a_join_refused_for_its_session_timeout_then_the_worker_starts_quietly(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    asked = answering(monkeypatch, JOINABLE)
    with caplog.at_level(logging.WARNING, logger="streams.group_access"):
        check()
    assert asked == ["uac"]
    assert caplog.text == ""


@pytest.mark.parametrize(
    "not_elected",
    [
        pytest.param(CoordinatorNotAvailableError(), id="lookup"),
        pytest.param(CoordinatorNotAvailableError, id="join"),
    ],
)
def test_given_a_coordinator_not_elected_yet_then_it_is_asked_again(
    monkeypatch: pytest.MonkeyPatch, not_elected: Answer
) -> None:
    asked = answering(monkeypatch, not_elected, JOINABLE)
    check()
    assert asked == ["uac", "uac"]


@pytest.mark.parametrize(
    ("answers", "patience"),
    [
        pytest.param((UnsupportedVersionError(),), 5.0, id="an error not worth asking again"),
        pytest.param((UnsupportedVersionError,), 5.0, id="a join answer not worth asking again"),
        pytest.param((CoordinatorNotAvailableError(),) * 2, 0.0, id="patience run out"),
    ],
)
def test_given_another_failure_then_the_worker_starts_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    answers: tuple[Answer, ...],
    patience: float,
) -> None:
    answering(monkeypatch, *answers)
    with caplog.at_level(logging.WARNING, logger="streams.group_access"):
        check(patience)
    assert "consumer group uac not checked" in caplog.text


def test_a_refusal_without_a_group_still_reads_as_one() -> None:
    assert "the consumer group of this command" in str(not_authorized(None))
    assert "consumer group 'uac-sink'" in str(not_authorized("uac-sink"))
