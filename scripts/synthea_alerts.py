"""Import the 10-patient Synthea FHIR set, fold it through gate + fold + rules, print the alerts.

Usage: python scripts/synthea_alerts.py [DIRECTORY_OF_NDJSON_FILES]

Prints every alert lifecycle record (subject, status, severity, rule, drug, allergen, match
level), then how many resources were skipped for each reason, the mapping errors and the gate
rejections. Tenant `clinic-a`, actor `fhir-import`, the gate policy of
`deploy/config/tenants.json`. Exits 1 when any resource could not be mapped or any event was
rejected.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIRECTORY = ROOT / "tests" / "fixtures" / "fhir" / "synthea-10-patients"
TENANTS_FILE = ROOT / "deploy" / "config" / "tenants.json"
TENANT, ACTOR = "clinic-a", "fhir-import"
EXPORTED_BY = datetime(2025, 9, 17, tzinfo=UTC)
"""The fallback time: the data set's commit date, by when every resource existed."""


def main(arguments: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from projections.gate import GateContext
    from rules.batch import Submitted, replay_batch
    from rules.engine import default_rules
    from rules.knowledge.bundled import load_bundled_knowledge
    from schemas.alerts import Alert
    from streams.fhir_files import read_fhir_files
    from streams.tenants import load_gate_policy

    directory = Path(arguments[0]) if arguments else DEFAULT_DIRECTORY
    paths = sorted(directory.glob("*.ndjson"))
    submitted, errors, skipped, notes = read_fhir_files(
        paths, tenant_id=TENANT, actor=ACTOR, fallback_time=EXPORTED_BY
    )
    policy, now = load_gate_policy(TENANTS_FILE), datetime.now(UTC)

    def context_for(item: Submitted, owners: dict[str, str]) -> GateContext:
        return GateContext(
            now=now, policy=policy, encoded_size=item.encoded_size, claim_owners=owners
        )

    results = replay_batch(submitted, context_for, default_rules(load_bundled_knowledge()))

    def row(alert: Alert) -> str:
        finding = alert.drug_allergy
        drug = finding.drug if finding else alert.title
        allergen, level = (finding.allergen, finding.level) if finding else ("-", "-")
        return (
            f"{alert.subject_id} | {alert.status.value} | {alert.severity.value} | "
            f"{alert.rule_id} | {drug} | {allergen} | {level} | {alert.occurred_at:%Y-%m-%d}"
        )

    alerts = [alert for result in results.values() for alert in result.alerts]
    print(f"files: {', '.join(path.name for path in paths)}")
    print(f"events: {len(submitted)}; subjects: {len(results)}; alert records: {len(alerts)}")
    print("subject | status | severity | rule | drug | allergen | level | date")
    for alert in alerts:
        print(row(alert))
    print("skipped by reason:")
    counts: dict[str, int] = {}
    for skip in skipped:
        counts[skip.reason] = counts.get(skip.reason, 0) + 1
    for reason, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        print(f"  {count:>5}  {reason}")
    for error in errors:
        print(f"error {error.origin}: {error.reason}: {error.message}")
    for note in notes:
        print(f"note {note.message()}")
    rejections = [(s, r) for result in results.values() for s, r in result.rejections]
    for item, rejection in rejections:
        print(f"rejected {item.origin}: {rejection.detail}")
    print(f"errors: {len(errors)}; rejected events: {len(rejections)}")
    return 1 if errors or rejections else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
