"""Cost of the rules for one more prescription, by how many prescriptions are already active.

One subject, N active prescriptions cycling through common drugs (so duplicate therapies and
drug-allergy conflicts are found among them), and a penicillin allergy; then the time of
`evaluate` (every rule, the bundled knowledge) for the transition that adds one more
prescription, best of several tries. Then the same for a subject with N allergies and N
prescriptions, none of them in conflict, and one more prescription that conflicts with none.
With the rules checking only the pairs the new prescription is in, the time grows with N, not
with N squared (nor with allergies times prescriptions). Last, N prescriptions of twelve
different medicines, so that the polypharmacy rule, an aggregate, walks the timeline of every
prescription on each event (linear in N too). Then an acknowledgement, which every rule judges
over the whole state, for a subject with N preferences that each hold until a date, and the
render of that subject's state document (both linear in N). Then the fold and the rules for
one more prescription of a subject whose N earlier courses each ended with its validity window
(flat in N), and of one more statement of a preference restated N times, each statement for
two days (flat in N); then N orders of one drug left active, folded and judged one at a
time (one duplicate-therapy alert per order after the first). Last, the acknowledgement of a
raised alert of a subject with a long history (it is judged against the grade the alert had
when it was recorded, folding the alert's claims again). Run: `make bench`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from uuid import UUID

from benchmarks.output import machine_speed_around
from benchmarks.synthetic import START, event_of
from projections.document import state_document
from projections.state import UserState, evolve, initial_state
from rules.base import Rule
from rules.engine import default_rules, evaluate
from rules.knowledge.bundled import load_bundled_knowledge
from schemas.events import (
    AcknowledgementAction,
    AlertAcknowledged,
    AllergyRecorded,
    Event,
    FactAsserted,
    MedicationPrescribed,
    Origin,
    Payload,
    PreferenceStated,
)

SIZES = (10, 100, 1_000, 4_000)
TRIES = 5
DRUGS = ("amoxicillin", "ibuprofen", "naproxen", "lisinopril", "atorvastatin", "metformin")
"""Two NSAIDs among them, so duplicate therapies are found as well as penicillin conflicts."""
IMPORTED = Origin.IMPORTED
ACCEPTED = AcknowledgementAction.ACCEPTED
YEAR = timedelta(days=365)
UNRELATED_ALLERGENS = ("latex", "peanut", "bee venom", "shellfish", "cat dander")
UNRELATED_DRUGS = ("metformin", "lisinopril", "atorvastatin", "omeprazole", "levothyroxine")
"""No allergen of these conflicts with any drug of these, nor two of the drugs with each other."""
MEDICINES = (
    *UNRELATED_DRUGS,
    "amlodipine",
    "sertraline",
    "furosemide",
    "gabapentin",
    "tamsulosin",
    "allopurinol",
    "montelukast",
)
"""Twelve different medicines: with all of them in use, a polypharmacy review is open."""


def _prescription(n: int) -> Event:
    drug = DRUGS[n % len(DRUGS)]
    payload = MedicationPrescribed(prescription_id=f"rx-{n}", drug=drug)
    return event_of("bench", "s-1", n + 1, START + timedelta(minutes=n + 1), payload, IMPORTED)


def _best_evaluation(rules: tuple[Rule, ...], state: UserState, event: Event) -> tuple[float, int]:
    """Seconds of the fastest of TRIES evaluations of `event` on `state`, and its alert count."""
    after = evolve(state, event)
    best, alerts = float("inf"), 0
    for _ in range(TRIES):
        started = time.perf_counter()
        alerts = len(evaluate(rules, state, after, event))
        best = min(best, time.perf_counter() - started)
    return best, alerts


def _allergies_and_prescriptions(rules: tuple[Rule, ...]) -> None:
    print("rules cost of one more prescription, by N allergies and N prescriptions:")
    state, recorded = initial_state("bench", "s-2"), 0
    for size in SIZES[:-1]:
        while recorded < size:
            allergen = UNRELATED_ALLERGENS[recorded % len(UNRELATED_ALLERGENS)]
            drug = UNRELATED_DRUGS[recorded % len(UNRELATED_DRUGS)]
            claims: tuple[Payload, ...] = (
                AllergyRecorded(allergy_id=f"a-{recorded}", substance=allergen),
                MedicationPrescribed(prescription_id=f"rx-{recorded}", drug=drug),
            )
            for offset, payload in enumerate(claims):
                number = 2 * recorded + offset
                at = START + timedelta(minutes=number)
                state = evolve(state, event_of("bench", "s-2", number, at, payload, IMPORTED))
            recorded += 1
        amoxicillin = MedicationPrescribed(prescription_id="rx-new", drug="amoxicillin")
        at = START + timedelta(days=30)
        event = event_of("bench", "s-2", 2 * size, at, amoxicillin, IMPORTED)
        best, alerts = _best_evaluation(rules, state, event)
        print(f"  {size:>6,} each:   {best * 1000:8.2f} ms, {alerts:,} alerts raised")


def _many_medicines(rules: tuple[Rule, ...]) -> None:
    print(f"rules cost of one more prescription, by N prescriptions of {len(MEDICINES)} medicines:")
    state, active = initial_state("bench", "s-3"), 0
    for size in SIZES:
        while active < size:
            drug = MEDICINES[active % len(MEDICINES)]
            payload = MedicationPrescribed(prescription_id=f"rx-{active}", drug=drug)
            at = START + timedelta(minutes=active)
            state = evolve(state, event_of("bench", "s-3", active, at, payload, IMPORTED))
            active += 1
        payload = MedicationPrescribed(prescription_id="rx-new", drug="omeprazole")
        event = event_of("bench", "s-3", size, START + timedelta(days=30), payload, IMPORTED)
        best, alerts = _best_evaluation(rules, state, event)
        print(f"  {size:>6,} active: {best * 1000:8.2f} ms, {alerts:,} alerts raised")


def _windowed_preferences(rules: tuple[Rule, ...]) -> None:
    print("rules cost of an acknowledgement, and document render, by N preferences with windows:")
    state, stated = initial_state("bench", "s-4"), 0
    for size in SIZES:
        while stated < size:
            at = START + timedelta(minutes=stated)
            payload = PreferenceStated(key=f"preference-{stated}", value="yes")
            event = event_of("bench", "s-4", stated, at, payload, Origin.EXPLICIT_STATEMENT)
            state = evolve(state, event.model_copy(update={"valid_until": at + YEAR}))
            stated += 1
        accepted = AlertAcknowledged(alert_id=str(UUID(int=size)), action=ACCEPTED)
        at = START + timedelta(days=30)
        ack = event_of("bench", "s-4", size, at, accepted, Origin.EXPLICIT_STATEMENT)
        best, _ = _best_evaluation(rules, state, ack)
        started = time.perf_counter()
        state_document(state)
        rendered = time.perf_counter() - started
        print(f"  {size:>6,} stated: {best * 1000:8.2f} ms, document {rendered * 1000:8.2f} ms")


def _ended_courses(rules: tuple[Rule, ...]) -> None:
    """Courses that each held for a day, one after the other, as a chronic patient's daily or
    monthly renewals do: expired, they are neither folded again nor judged again."""
    print("fold and rules cost of one more prescription, by N courses ended with their window:")
    _one_more_after_windows(rules, "s-6", _course, "ended")


def _one_more_after_windows(
    rules: tuple[Rule, ...], subject: str, nth: Callable[[int], Event], counted: str
) -> None:
    """The fold and rules cost of event `nth(N)` after events `nth(0)`..`nth(N - 1)`, for
    growing N, in lines that say what the N events are (`counted`)."""
    state, folded = initial_state("bench", subject), 0
    for size in (100, 1_000, 4_000, 16_000):
        while folded < size:
            state = evolve(state, nth(folded))
            folded += 1
        event = nth(size)
        folding = float("inf")
        for _ in range(TRIES):
            started = time.perf_counter()
            evolve(state, event)
            folding = min(folding, time.perf_counter() - started)
        best, records = _best_evaluation(rules, state, event)
        print(
            f"  {size:>6,} {counted}: fold {folding * 1e6:7.1f} us, rules {best * 1000:8.2f} ms,"
            f" {records:,} alert records"
        )


def _course(n: int) -> Event:
    """Course `n`: a prescription held on day `n` only."""
    at = START + timedelta(days=n)
    payload = MedicationPrescribed(prescription_id=f"course-{n}", drug=DRUGS[n % len(DRUGS)])
    event = event_of("bench", "s-6", n, at, payload, IMPORTED)
    return event.model_copy(update={"valid_from": at, "valid_until": at + timedelta(days=1)})


def _orders_of_one_drug(rules: tuple[Rule, ...]) -> None:
    """N orders of one medicine left active (an export whose renewals are never closed),
    folded and judged one at a time: each order after the first is one duplicate therapy of
    the first, so the alert records grow with N, not with N squared."""
    print("fold and rules of N orders of one drug left active, one at a time (total):")
    for size in (100, 400, 2_000):
        state, records = initial_state("bench", "s-8"), 0
        started = time.perf_counter()
        for n in range(size):
            payload = MedicationPrescribed(prescription_id=f"order-{n}", drug="ibuprofen 200 mg")
            at = START + timedelta(hours=n)
            event = event_of("bench", "s-8", n, at, payload, IMPORTED)
            after = evolve(state, event)
            records += len(evaluate(rules, state, after, event))
            state = after
        took = time.perf_counter() - started
        print(f"  {size:>6,} orders: {took:8.2f} s, {records:,} alert records")


def _restated_preference(rules: tuple[Rule, ...]) -> None:
    """One preference restated day after day, each statement for two days (a travel
    assistant's "current city"): the statements whose window closed are neither read nor
    judged again."""
    print("fold and rules cost of restating a preference, by N statements of it, each for 2 days:")
    _one_more_after_windows(rules, "s-7", _statement, "stated")


def _statement(n: int) -> Event:
    """Statement `n` of the preference: made on day `n`, valid for two days."""
    at = START + timedelta(days=n)
    payload = PreferenceStated(key="current-city", value=("Lyon", "Porto", "Graz")[n % 3])
    event = event_of("bench", "s-7", n, at, payload, Origin.EXPLICIT_STATEMENT)
    return event.model_copy(update={"valid_from": at, "valid_until": at + timedelta(days=2)})


def main() -> None:
    rules = default_rules(load_bundled_knowledge())
    allergy = AllergyRecorded(allergy_id="a-1", substance="penicillin")
    state = evolve(
        initial_state("bench", "s-1"), event_of("bench", "s-1", 0, START, allergy, IMPORTED)
    )
    active = 0
    print("rules cost of one more prescription (all rules, bundled knowledge, best of 5):")
    for size in SIZES:
        while active < size:
            state = evolve(state, _prescription(active))
            active += 1
        best, alerts = _best_evaluation(rules, state, _prescription(active))
        print(f"  {size:>6,} active: {best * 1000:8.2f} ms, {alerts:,} alerts raised")
    _allergies_and_prescriptions(rules)
    _many_medicines(rules)
    _windowed_preferences(rules)
    _ended_courses(rules)
    _restated_preference(rules)
    _orders_of_one_drug(rules)
    _acknowledged_on_long_histories(rules)


def _acknowledged_on_long_histories(rules: tuple[Rule, ...]) -> None:
    """An acknowledgement of a raised alert is judged against the grade it answered: the
    alert's grade in its claims as known when it was recorded, so those claims are folded
    again; the rest of the history is not."""
    print("rules cost of acknowledging a raised alert, by N facts of history before it:")
    claims: tuple[Payload, ...] = (
        AllergyRecorded(allergy_id="a-1", substance="penicillin", allergy_type="intolerance"),
        MedicationPrescribed(prescription_id="rx-1", drug="amoxicillin"),
    )
    state = initial_state("bench", "s-5")
    raised = []
    for number, payload in enumerate(claims):
        event = event_of(
            "bench", "s-5", number, START + timedelta(minutes=number), payload, IMPORTED
        )
        after = evolve(state, event)
        raised += evaluate(rules, state, after, event)
        state = after
    told = 0
    for size in (1_000, 10_000, 50_000):
        while told < size:
            at = START + timedelta(hours=1, seconds=told)
            payload = FactAsserted(key=f"note-{told}", value="seen")
            state = evolve(state, event_of("bench", "s-5", told + 10, at, payload, IMPORTED))
            told += 1
        accepted = AlertAcknowledged(alert_id=str(raised[0].alert_id), action=ACCEPTED)
        at = START + timedelta(days=30)
        ack = event_of("bench", "s-5", 10**9 + size, at, accepted, Origin.EXPLICIT_STATEMENT)
        best, records = _best_evaluation(rules, state, ack)
        print(f"  {size:>6,} facts:  {best * 1000:8.2f} ms, {records:,} lifecycle record(s)")


if __name__ == "__main__":
    with machine_speed_around():
        main()
