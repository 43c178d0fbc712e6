"""Cost of the rules for one more prescription, by how many prescriptions are already active.

One subject, N active prescriptions cycling through common drugs (so duplicate therapies and
drug-allergy conflicts are found among them), and a penicillin allergy; then the time of
`evaluate` (every rule, the bundled knowledge) for the transition that adds one more
prescription, best of several tries. With the rules checking only the pairs the new
prescription is in, the time grows with N, not with N squared. Run: `make bench`.
"""

from __future__ import annotations

import time
from datetime import timedelta

from benchmarks.output import machine_speed_around
from benchmarks.synthetic import START, event_of
from projections.state import evolve, initial_state
from rules.engine import default_rules, evaluate
from rules.knowledge.bundled import load_bundled_knowledge
from schemas.events import AllergyRecorded, Event, MedicationPrescribed, Origin

SIZES = (10, 100, 1_000, 4_000)
TRIES = 5
DRUGS = ("amoxicillin", "ibuprofen", "naproxen", "lisinopril", "atorvastatin", "metformin")
"""Two NSAIDs among them, so duplicate therapies are found as well as penicillin conflicts."""
IMPORTED = Origin.IMPORTED


def _prescription(n: int) -> Event:
    drug = DRUGS[n % len(DRUGS)]
    payload = MedicationPrescribed(prescription_id=f"rx-{n}", drug=drug)
    return event_of("bench", "s-1", n + 1, START + timedelta(minutes=n + 1), payload, IMPORTED)


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
        event = _prescription(active)
        after = evolve(state, event)
        best = float("inf")
        for _ in range(TRIES):
            started = time.perf_counter()
            alerts = evaluate(rules, state, after, event)
            best = min(best, time.perf_counter() - started)
        print(f"  {size:>6,} active: {best * 1000:8.2f} ms, {len(alerts):,} alerts raised")


if __name__ == "__main__":
    with machine_speed_around():
        main()
