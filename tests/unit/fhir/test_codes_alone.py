"""Allergies and orders sent by their codes alone (no display, no text), as a minimal producer
or a terminology-normalising interface sends them: the alert is judged on the codes, never left
`unverified` for want of words."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.severity import Severity
from tests.unit.fhir.test_clinical_scenarios import (
    drug_allergy_alerts,
    fold,
    subject,
    submitted_from,
)

SNOMED = "http://snomed.info/sct"
RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"
PATIENT = "coded-only"


def allergy(system: str, code: str) -> dict[str, Any]:
    return {
        "resourceType": "AllergyIntolerance",
        "id": "coded-allergy",
        "clinicalStatus": {
            "coding": [
                {
                    "system": "http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical",
                    "code": "active",
                }
            ]
        },
        "code": {"coding": [{"system": system, "code": code}]},
        "patient": {"reference": f"Patient/{PATIENT}"},
        "recordedDate": "2024-01-01",
    }


def order(concept: dict[str, Any]) -> dict[str, Any]:
    return {
        "resourceType": "MedicationRequest",
        "id": "coded-order",
        "status": "active",
        "intent": "order",
        "medicationCodeableConcept": concept,
        "subject": {"reference": f"Patient/{PATIENT}"},
        "authoredOn": "2024-02-01",
    }


AMOXICILLIN_BY_CODE = {"coding": [{"system": RXNORM, "code": "308182"}]}


@pytest.mark.parametrize(
    ("allergen", "drug"),
    [
        pytest.param(
            allergy(SNOMED, "91936005"),
            AMOXICILLIN_BY_CODE,
            id="SNOMED allergy to penicillin (finding) and RxNorm amoxicillin 250 mg capsule",
        ),
        pytest.param(
            allergy(SNOMED, "764146007"),
            {"text": "amoxicillin 500 mg capsule"},
            id="SNOMED penicillin (substance) and an amoxicillin order in words",
        ),
        pytest.param(
            allergy(SNOMED, "373270004"),
            AMOXICILLIN_BY_CODE,
            id="SNOMED penicillin class substance (the IPS example's code) and RxNorm amoxicillin",
        ),
        pytest.param(
            allergy(RXNORM, "7980"),
            AMOXICILLIN_BY_CODE,
            id="RxNorm penicillin G ingredient and RxNorm amoxicillin 250 mg capsule",
        ),
    ],
)
def test_given_a_penicillin_allergy_and_an_amoxicillin_order_by_codes_alone_then_a_critical_alert(
    allergen: dict[str, Any], drug: dict[str, Any]
) -> None:
    results = fold(submitted_from([allergen, order(drug)]))

    alerts = drug_allergy_alerts(subject(results, PATIENT), "coded-order")
    assert [alert.severity for alert in alerts] == [Severity.CRITICAL]
    assert alerts[0].drug_allergy is not None
    assert alerts[0].drug_allergy.level == "same_class"


def test_given_a_snomed_penicillin_allergy_by_code_then_azithromycin_raises_nothing() -> None:
    results = fold(
        submitted_from([allergy(SNOMED, "91936005"), order({"text": "azithromycin 250 mg"})])
    )

    assert drug_allergy_alerts(subject(results, PATIENT)) == []


def test_given_codes_alone_then_the_title_names_what_they_were_read_as() -> None:
    results = fold(submitted_from([allergy(SNOMED, "91936005"), order(AMOXICILLIN_BY_CODE)]))

    (alert,) = drug_allergy_alerts(subject(results, PATIENT), "coded-order")
    assert (
        alert.title
        == "308182 (amoxicillin) conflicts with the recorded 91936005 (penicillins) allergy"
    )


@pytest.mark.parametrize(
    ("allergy_system", "drug_system"),
    [
        pytest.param("http://snomed.info/sct/", f"{RXNORM}/", id="with a trailing slash"),
        pytest.param(
            "https://snomed.info/sct",
            "https://www.nlm.nih.gov/research/umls/rxnorm",
            id="with https",
        ),
        pytest.param(
            "http://snomed.info/sct/731000124108", RXNORM, id="as a SNOMED CT edition URI"
        ),
    ],
)
def test_given_code_systems_written_otherwise_then_the_codes_are_still_read(
    allergy_system: str, drug_system: str
) -> None:
    allergen = allergy(allergy_system, "91936005")
    drug = {"coding": [{"system": drug_system, "code": "308182"}]}

    results = fold(submitted_from([allergen, order(drug)]))

    alerts = drug_allergy_alerts(subject(results, PATIENT), "coded-order")
    assert [alert.severity for alert in alerts] == [Severity.CRITICAL]


def unconfirmed_with_reaction(code: str) -> dict[str, Any]:
    """An unconfirmed, low-criticality penicillin allergy whose one reaction is coded only."""
    return allergy(SNOMED, "91936005") | {
        "verificationStatus": {
            "coding": [
                {
                    "system": "http://terminology.hl7.org/CodeSystem/allergyintolerance-verification",
                    "code": "unconfirmed",
                }
            ]
        },
        "criticality": "low",
        "reaction": [{"manifestation": [{"coding": [{"system": SNOMED, "code": code}]}]}],
    }


def test_given_a_reaction_coded_only_as_anaphylaxis_then_it_is_read_as_anaphylaxis() -> None:
    """An unconfirmed low-criticality record is lowered one step, unless its reaction was
    severe: anaphylaxis by its SNOMED CT code (39579001) is, as the word is."""
    results = fold(
        submitted_from([unconfirmed_with_reaction("39579001"), order(AMOXICILLIN_BY_CODE)])
    )

    (alert,) = drug_allergy_alerts(subject(results, PATIENT), "coded-order")
    assert alert.severity is Severity.CRITICAL
    allergies = subject(results, PATIENT).state.allergy_views()
    assert [r.manifestation for a in allergies for r in a.reactions] == ["SNOMED CT 39579001"]


def test_given_a_reaction_coded_only_as_stevens_johnson_then_a_cephalosporin_needs_evaluation() -> (
    None
):
    """After SJS (SNOMED CT 73442001) a related drug needs an allergist's evaluation first: a
    dissimilar cephalosporin is not `info` then."""
    ceftriaxone = {"coding": [{"system": RXNORM, "code": "2193"}]}
    results = fold(submitted_from([unconfirmed_with_reaction("73442001"), order(ceftriaxone)]))

    (alert,) = drug_allergy_alerts(subject(results, PATIENT), "coded-order")
    assert alert.severity is not Severity.INFO


def test_given_an_allergy_whose_text_is_a_bare_code_then_critical_and_the_title_reads_it() -> None:
    allergen = {**allergy(SNOMED, "91936005"), "code": {"text": "91936005"}}
    results = fold(submitted_from([allergen, order({"text": "amoxicillin 500 mg capsule"})]))

    (alert,) = drug_allergy_alerts(subject(results, PATIENT), "coded-order")
    assert alert.severity is Severity.CRITICAL
    assert alert.title == (
        "amoxicillin 500 mg capsule conflicts with the recorded 91936005 (penicillins) allergy"
    )
