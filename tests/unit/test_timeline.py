"""The incremental timeline always equals a from-scratch fold, however late events arrive,
including histories far longer than the cached tail."""

from __future__ import annotations

from datetime import timedelta
from random import Random

from hypothesis import given, settings
from hypothesis import strategies as st

from projections.timeline import TAIL, Timeline, fold, with_member, with_retraction
from projections.views import ClaimView, preference_step, step_fact
from schemas.events import Event
from tests.factories import make_event

STEPS = {"preference": preference_step(), "fact": step_fact}


def _statements(
    kind: str, minutes: list[int], values: list[str], origins: list[str]
) -> list[Event]:
    event_type = "PreferenceStated" if kind == "preference" else "FactAsserted"
    return [
        make_event(
            event_type,
            f"{kind}-{i}",
            at=timedelta(minutes=m),
            origin=origin,
            payload={"key": "k", "value": v},
        )
        for i, (m, v, origin) in enumerate(zip(minutes, values, origins, strict=True))
    ]


@st.composite
def long_histories(draw: st.DrawFn) -> tuple[str, list[Event]]:
    size = draw(st.integers(1, 3 * TAIL + 10))
    minutes = draw(st.lists(st.integers(0, 10_000), min_size=size, max_size=size, unique=True))
    values = draw(st.lists(st.sampled_from(["a", "b"]), min_size=size, max_size=size))
    origins = draw(
        st.lists(
            st.sampled_from(["explicit_statement", "inferred", "verified_source"]),
            min_size=size,
            max_size=size,
        )
    )
    kind = draw(st.sampled_from(sorted(STEPS)))
    return kind, _statements(kind, sorted(minutes), values, origins)


@given(long_histories(), st.randoms(use_true_random=False), st.data())
@settings(max_examples=150)
def test_given_any_arrival_order_then_the_resolution_equals_a_fresh_fold(
    history: tuple[str, list[Event]], rng: Random, data: st.DataObject
) -> None:
    kind, events = history
    step = STEPS[kind]
    arrival = list(events)
    if data.draw(st.booleans()):
        rng.shuffle(arrival)
    else:
        for index in range(len(arrival) - 1):
            if rng.random() < 0.2:
                arrival[index], arrival[index + 1] = arrival[index + 1], arrival[index]
    timeline: Timeline[ClaimView] | None = None
    for event in arrival:
        timeline = with_member(timeline, event, step)
        assert timeline.resolution == fold(timeline.effective(), step)
    assert timeline is not None
    assert len(timeline.tail) <= 2 * TAIL
    victim = data.draw(st.sampled_from(events))
    retracted = with_retraction(timeline, victim.id, step)
    assert retracted.resolution == fold([e for e in events if e.id != victim.id], step)
