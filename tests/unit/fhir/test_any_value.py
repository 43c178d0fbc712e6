"""Whatever a producer sends in any place of a FHIR input (a list where a code belongs, an
object where a reference's text belongs, a number for an id), the import answers with events,
errors naming a reason, lines about what was passed over and skipped resources: it never stops
with an exception, so the rest of the input is still read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas.fhir.mapping import FhirImport, combine, import_fhir, unpack
from tests.unit.fhir.test_mapping import CONTEXT

FIXTURES = Path(__file__).parents[2] / "fixtures" / "fhir"
EXAMPLES = tuple(
    json.loads((FIXTURES / "fhir-r4-examples" / f"{name}.json").read_text(encoding="utf-8"))
    for name in (
        "Patient-example",
        "AllergyIntolerance-example",
        "AllergyIntolerance-nkda",
        "Medication-med0316",
        "MedicationRequest-medrx0301",
        "MedicationRequest-medrx0332",
        "MedicationAdministration-medadmin0303",
    )
)
SYNTHEA = tuple(
    json.loads(
        (FIXTURES / "synthea-10-patients" / f"{kind}.000.ndjson")
        .read_text(encoding="utf-8")
        .splitlines()[0]
    )
    for kind in ("Patient", "AllergyIntolerance", "MedicationRequest")
)
"""A Synthea patient, allergy and order (US Core shapes: extensions, dosage, reactions)."""
RESOURCES = EXAMPLES + SYNTHEA
METHODS = ("POST", "PUT", "DELETE")

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.sampled_from(["Patient/example", "#med0316", "active", "2024-01-01T10:00:00Z", "2024"]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _transaction() -> dict[str, Any]:
    """The resources in one transaction Bundle, each with a request (a deletion among them)."""
    entries = [
        {
            "fullUrl": f"http://example.org/fhir/{resource['resourceType']}/{resource['id']}",
            "resource": json.loads(json.dumps(resource)),
            "request": {"method": METHODS[n % len(METHODS)], "url": resource["resourceType"]},
        }
        for n, resource in enumerate(RESOURCES)
    ]
    return {"resourceType": "Bundle", "type": "transaction", "entry": entries}


def _places(node: object, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every value under `node`."""
    items: list[tuple[Any, Any]] = []
    if isinstance(node, dict):
        items = list(node.items())
    elif isinstance(node, list):
        items = list(enumerate(node))
    found = []
    for key, value in items:
        found.append((*at, key))
        found.extend(_places(value, (*at, key)))
    return found


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_given_any_value_anywhere_in_a_bundle_then_the_import_answers_without_an_exception(
    data: st.DataObject,
) -> None:
    document = _transaction()
    for _ in range(data.draw(st.integers(1, 4))):
        place = data.draw(st.sampled_from(_places(document)))
        holder = document
        for key in place[:-1]:
            holder = holder[key]
        holder[place[-1]] = data.draw(JSON_VALUES)
    result = import_fhir(combine([unpack(document, "file0")]), CONTEXT)
    assert isinstance(result, FhirImport)
