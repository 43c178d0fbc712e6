"""Therapeutic duplication across classes: two anticoagulants, an ACE inhibitor with an
angiotensin receptor blocker, or two opioids of different chemical classes are a duplicate
therapy; sharing a group never implies that an allergy to one drug reaches the other. A
basal-bolus insulin regimen, or two infusions sharing only their vehicle, duplicate nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest

from projections.state import initial_state, replay
from rules.engine import default_rules, evaluate
from rules.knowledge import tables
from rules.knowledge.bundled import BundledKnowledge
from rules.knowledge.errors import KnowledgeDataError
from rules.knowledge.model import MatchLevel
from rules.knowledge.tables import file_digest, load_tables
from schemas.alerts import Alert, AlertStatus
from schemas.severity import Severity
from tests.factories import make_event


def prescribed(knowledge: BundledKnowledge, *drugs: str, stop_first: bool = False) -> list[Alert]:
    """Alerts from prescribing `drugs` one day apart to one patient (then stopping the first)."""
    rules = default_rules(knowledge)
    state, alerts = initial_state("clinic-a", "patient-1"), []
    events = [
        make_event(
            "MedicationPrescribed",
            f"rx-{day}",
            at=timedelta(days=day),
            payload={"prescription_id": f"rx-{day}", "drug": drug},
        )
        for day, drug in enumerate(drugs)
    ]
    if stop_first:
        stop = make_event(
            "MedicationStopped",
            "stop",
            at=timedelta(days=len(drugs)),
            payload={"prescription_id": "rx-0"},
        )
        events.append(stop)
    for event in events:
        after = replay([event], state)
        alerts += evaluate(rules, state, after, event)
        state = after
    return alerts


GROUP_LABELS = {
    "anticoagulants": "anticoagulants",
    "renin_angiotensin_blockers": "renin-angiotensin system blockers (ACE inhibitors, "
    "angiotensin II receptor blockers)",
    "opioid_analgesics": "opioid analgesics (every chemical class)",
    "p2y12_inhibitors": "P2Y12 receptor inhibitors (thienopyridines and the reversible "
    "inhibitors ticagrelor and cangrelor)",
}
"""The readable names the alert text gives the groups (the ids stay in `duplicate_therapy`)."""


@pytest.mark.parametrize(
    ("first", "second", "group"),
    [
        pytest.param("warfarin 5 mg", "Eliquis", "anticoagulants", id="VKA and DOAC"),
        pytest.param("enoxaparin", "rivaroxaban", "anticoagulants", id="heparin and DOAC"),
        pytest.param("lisinopril", "losartan", "renin_angiotensin_blockers", id="ACEi and ARB"),
        pytest.param("morphine", "fentanyl patch", "opioid_analgesics", id="two opioid classes"),
        pytest.param("tramadol 50 mg", "oxycodone", "opioid_analgesics", id="tramadol and opiate"),
        pytest.param("methadone", "hydromorphone", "opioid_analgesics", id="methadone and opiate"),
        pytest.param(
            "clopidogrel 75 mg", "Brilinta", "p2y12_inhibitors", id="two P2Y12 inhibitors"
        ),
        pytest.param("ticagrelor", "Kengreal", "p2y12_inhibitors", id="ticagrelor and cangrelor"),
    ],
)
def test_given_two_drugs_of_one_group_but_no_shared_class_then_a_duplicate_therapy_warning(
    knowledge: BundledKnowledge, first: str, second: str, group: str
) -> None:
    (alert,) = prescribed(knowledge, first, second)

    assert (alert.rule_id, alert.status, alert.severity) == (
        "duplicate-therapy",
        AlertStatus.RAISED,
        Severity.WARNING,
    )
    assert alert.detail.endswith(f"share the therapeutic group {GROUP_LABELS[group]}")
    finding = alert.duplicate_therapy
    assert finding is not None
    assert (finding.prescription_ids, finding.drugs) == (("rx-0", "rx-1"), (first, second))
    assert (finding.shared_by, finding.shared) == ("therapeutic group", (group,))
    assert finding.knowledge_version == knowledge.version


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param("aspirin", "clopidogrel", id="dual antiplatelet therapy"),
        pytest.param("aspirin 81 mg", "ticagrelor", id="dual antiplatelet therapy, ticagrelor"),
        pytest.param("dipyridamole", "prasugrel", id="antiplatelets outside the P2Y12 group"),
        pytest.param("warfarin", "lisinopril", id="different groups"),
        pytest.param("metformin", "losartan", id="one drug outside every group"),
        pytest.param("morphine", "naloxone", id="opioid with its antagonist (rescue kit)"),
        pytest.param("Lantus SoloStar", "Novolog FlexPen", id="basal-bolus insulin regimen"),
        pytest.param(
            "Dopamine / Dextrose 5% injection",
            "Vancomycin 1 g in Dextrose 5% 250 mL",
            id="two infusions sharing only their dextrose vehicle",
        ),
        pytest.param(
            "Ceftriaxone 1 g in sodium chloride 0.9% 100 mL",
            "Sodium Chloride 0.9% 1000 mL",
            id="a drug in saline and a saline infusion",
        ),
        pytest.param(
            "Incruse Ellipta",
            "Flovent Diskus",
            id="two inhalers sharing only their lactose carrier",
        ),
        pytest.param(
            "Depo-Provera CI 150 mg/mL",
            "Kenalog-40 injection",
            id="two injections sharing only their polysorbate 80 excipient",
        ),
        pytest.param(
            "Depo-Medrol 40 mg/mL injection",
            "MiraLAX 17 g powder",
            id="PEG 3350 as one product's excipient and the other's active laxative",
        ),
    ],
)
def test_given_drugs_of_different_groups_then_no_duplicate_therapy(
    knowledge: BundledKnowledge, first: str, second: str
) -> None:
    assert prescribed(knowledge, first, second) == []


def test_given_one_of_the_two_stopped_then_the_group_alert_resolves(
    knowledge: BundledKnowledge,
) -> None:
    raised, resolved = prescribed(knowledge, "warfarin", "apixaban", stop_first=True)

    assert (raised.status, resolved.status) == (AlertStatus.RAISED, AlertStatus.RESOLVED)
    assert resolved.alert_id == raised.alert_id


@pytest.mark.parametrize(
    ("first", "second", "shared"),
    [
        pytest.param(
            "Lantus",
            "Levemir",
            "the class basal (intermediate- and long-acting) insulins",
            id="two basal insulins",
        ),
        pytest.param(
            "Humalog",
            "Novolog",
            "the class prandial (rapid- and short-acting) insulins",
            id="two prandial",
        ),
        pytest.param(
            "Dopamine / Dextrose 5% injection",
            "Dopamine 400 mg in Dextrose 5% 250 mL",
            "the ingredient dopamine",
            id="two infusions of one drug in one vehicle",
        ),
    ],
)
def test_given_two_insulins_of_one_kind_or_two_infusions_of_one_drug_then_a_duplicate(
    knowledge: BundledKnowledge, first: str, second: str, shared: str
) -> None:
    (alert,) = prescribed(knowledge, first, second)

    assert alert.detail.endswith(f"share {shared}")


def test_given_two_forms_of_a_drug_the_knowledge_cannot_read_then_a_possible_duplicate(
    knowledge: BundledKnowledge,
) -> None:
    """Not recognised is never a silent "no duplicate": the same unread name in two strengths
    or forms is flagged for a check by hand."""
    (alert,) = prescribed(knowledge, "Zyxoral 10mg", "Zyxoral 20 mg oral tablet")
    assert alert.severity is Severity.WARNING
    assert alert.title.startswith("Possible duplicate therapy (not recognised)")
    assert alert.duplicate_therapy is not None
    assert (alert.duplicate_therapy.shared_by, alert.duplicate_therapy.shared) == (
        "unrecognised name",
        ("zyxoral",),
    )


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param("Zyxoral 10mg", "Quetrabol 10mg", id="two different unread names"),
        pytest.param("Zyxoral 10mg", "Zyxoral/amoxicillin", id="one with an ingredient more"),
    ],
)
def test_given_unread_names_that_differ_then_no_duplicate(
    knowledge: BundledKnowledge, first: str, second: str
) -> None:
    assert prescribed(knowledge, first, second) == []


def test_an_allergy_to_one_insulin_still_warns_of_another_kind(
    knowledge: BundledKnowledge,
) -> None:
    verdict = knowledge.cross_reactivity("insulin glargine", "Humalog")

    assert verdict.level is MatchLevel.PARTIAL


def test_given_a_shared_class_then_the_alert_names_the_class_not_the_group(
    knowledge: BundledKnowledge,
) -> None:
    (alert,) = prescribed(knowledge, "apixaban", "rivaroxaban")

    assert alert.detail.endswith(
        "share the classes direct oral anticoagulants (factor Xa and thrombin inhibitors);"
        " direct factor Xa inhibitors"
    )
    assert alert.duplicate_therapy is not None
    assert alert.duplicate_therapy.shared == ("direct_oral_anticoagulants", "factor_xa_inhibitors")


def test_a_shared_group_implies_no_allergic_cross_reactivity(
    knowledge: BundledKnowledge,
) -> None:
    verdict = knowledge.cross_reactivity("warfarin", "apixaban")

    assert verdict.level is MatchLevel.NONE


def test_resolution_names_the_groups_of_each_drug(knowledge: BundledKnowledge) -> None:
    assert knowledge.resolve("Coumadin").therapeutic_groups == ("anticoagulants",)
    assert knowledge.resolve("lisinopril/hydrochlorothiazide").therapeutic_groups == (
        "renin_angiotensin_blockers",
    )
    assert knowledge.resolve("ibuprofen").therapeutic_groups == ()
    assert knowledge.resolve("Effient").therapeutic_groups == ("p2y12_inhibitors",)


def test_two_p2y12_inhibitors_of_one_class_share_the_class_and_the_others_only_the_group(
    knowledge: BundledKnowledge,
) -> None:
    (same_class,) = prescribed(knowledge, "clopidogrel", "prasugrel")
    assert same_class.detail.endswith("share the class thienopyridine P2Y12 inhibitors")
    assert knowledge.cross_reactivity("clopidogrel", "ticagrelor").level is MatchLevel.NONE


def load_edited(monkeypatch: pytest.MonkeyPatch, name: str, old: str, new: str) -> None:
    """Load the tables with `old` replaced by `new` in data file `name` (manifest matching)."""
    original_text, original_manifest = tables.data_text, tables.read_manifest

    def edited(file: str) -> str:
        text = original_text(file)
        return text.replace(old, new) if file == name else text

    def manifest() -> tuple[str, dict[str, str]]:
        version, digests = original_manifest()
        return version, {file: file_digest(edited(file)) for file in digests}

    monkeypatch.setattr(tables, "data_text", edited)
    monkeypatch.setattr(tables, "read_manifest", manifest)
    load_tables()


def test_a_group_naming_an_unknown_class_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(KnowledgeDataError, match=r"anticoagulants.*heparinoids"):
        load_edited(monkeypatch, "therapeutic_groups.csv", "heparins", "heparinoids")


def test_a_site_specific_entry_naming_an_unknown_class_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(KnowledgeDataError, match=r"site-specific class polyenes"):
        load_edited(
            monkeypatch, "site_specific_classes.csv", "\npolyene_antifungals,", "\npolyenes,"
        )


def test_resolution_names_the_locally_acting_classes(knowledge: BundledKnowledge) -> None:
    assert knowledge.resolve("prednisone").site_specific_classes == ("corticosteroids",)
    assert knowledge.resolve("diclofenac gel").site_specific_classes == ()
