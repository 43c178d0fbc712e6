"""Where a prescription acts, and duplicate therapy across sites: oral prednisone with an
inhaled corticosteroid is a treatment plan (corticosteroids act where applied), topical
diclofenac with oral ibuprofen is still a duplicate (a topical NSAID adds to an oral one)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from projections.state import initial_state, replay
from rules.administration import Site, act_apart, site_of
from rules.engine import default_rules, evaluate
from rules.knowledge.bundled import load_bundled_knowledge
from schemas.alerts import Alert
from schemas.events import Event
from tests.factories import make_event

DAY = timedelta(days=1)


@pytest.mark.parametrize(
    ("route", "drug", "site"),
    [
        pytest.param("Oral Route (qualifier value)", "prednisone", Site.SYSTEMIC, id="oral route"),
        pytest.param("Intravenous", "Dopamine 400mg in 500mL D5W", Site.SYSTEMIC, id="iv"),
        pytest.param("Topical (qualifier value)", "hydrocortisone", Site.SKIN, id="topical"),
        pytest.param("Ophthalmic route (qualifier value)", "timolol", Site.EYE, id="eye route"),
        pytest.param("Vaginal Route", "clotrimazole", Site.VAGINA, id="vaginal route"),
        pytest.param(None, "Nystatin 100UNT/MG Topical Ointment", Site.SKIN, id="topical name"),
        pytest.param(None, "Mometasone Furoate 0.05mg/Actuat", Site.AIRWAYS, id="per actuation"),
        pytest.param(None, "fluticasone nasal spray", Site.NOSE, id="nasal spray"),
        pytest.param(None, "erythromycin ophthalmic ointment", Site.EYE, id="route beats form"),
        pytest.param(None, "clotrimazole vaginal cream", Site.VAGINA, id="vaginal cream"),
        pytest.param(None, "Paracetamol 240mg suppository", Site.SYSTEMIC, id="suppository"),
        pytest.param(None, "Prednisone 5mg tablet (Product)", Site.SYSTEMIC, id="tablet"),
        pytest.param("Oral Route", "Nystatin ointment", Site.SYSTEMIC, id="route beats name"),
        pytest.param("口服", "泼尼松", Site.SYSTEMIC, id="chinese oral route"),
        pytest.param(None, "泼尼松片", Site.SYSTEMIC, id="chinese tablet"),
        pytest.param(None, "布地奈德混悬液 雾化吸入", Site.AIRWAYS, id="chinese nebulised"),
        pytest.param(None, "氢化可的松乳膏", Site.SKIN, id="chinese cream"),
        pytest.param(None, "红霉素眼膏", Site.EYE, id="chinese eye ointment"),
        pytest.param(None, "糠酸莫米松鼻喷雾剂", Site.NOSE, id="chinese nasal spray"),
        pytest.param(None, "硝酸咪康唑阴道栓", Site.VAGINA, id="chinese route beats form"),
        pytest.param(None, "芬太尼透皮贴剂", Site.SYSTEMIC, id="chinese transdermal"),
    ],
)
def test_the_site_comes_from_the_route_then_the_name(
    route: str | None, drug: str, site: Site
) -> None:
    assert site_of(route, drug) is site


@pytest.mark.parametrize(
    ("route", "drug"),
    [
        pytest.param(None, "ibuprofen", id="no route and no form"),
        pytest.param(None, "lidocaine 5% patch", id="a patch says nothing"),
        pytest.param("Intra-articular route", "Kenalog", id="an unknown route and no form"),
        pytest.param(None, "hydrocortisone oral and topical", id="words of two sites"),
        pytest.param(None, "利多卡因贴片", id="a chinese patch is not a tablet"),
        pytest.param(None, "西地碘含片", id="a chinese lozenge says nothing"),
    ],
)
def test_without_a_clear_word_the_site_is_unknown(route: str | None, drug: str) -> None:
    assert site_of(route, drug) is None


def test_only_two_known_and_different_sites_act_apart() -> None:
    assert act_apart(Site.SYSTEMIC, Site.AIRWAYS)
    assert not act_apart(Site.SYSTEMIC, Site.SYSTEMIC)
    assert not act_apart(None, Site.SKIN)


def rx(name: str, drug: str, route: str | None = None, day: float = 1) -> Event:
    payload = {"prescription_id": name, "drug": drug, "route": route}
    return make_event("MedicationPrescribed", name, at=day * DAY, payload=payload)


def duplicates(*events: Event) -> list[Alert]:
    """The duplicate-therapy alerts of prescribing `events` in order, with the bundled data."""
    rules = default_rules(load_bundled_knowledge())
    state, alerts = initial_state("clinic-a", "patient-1"), []
    for event in events:
        after = replay([event], state)
        alerts += evaluate(rules, state, after, event)
        state = after
    return [alert for alert in alerts if alert.rule_id == "duplicate-therapy"]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(
            rx("rx-1", "Prednisone 5mg tablet (Product)"),
            rx("rx-2", "Mometasone Furoate 0.05mg/Actuat", day=2),
            id="oral and inhaled corticosteroids",
        ),
        pytest.param(
            rx("rx-1", "Nystatin 100,000 units/ml oral suspension"),
            rx("rx-2", "Nystatin 100UNT/MG Topical Ointment", day=2),
            id="one antifungal by mouth and on the skin",
        ),
        pytest.param(
            rx("rx-1", "hydrocortisone 1% cream", "Topical (qualifier value)"),
            rx("rx-2", "hydrocortisone 1% rectal", day=2),
            id="one drug on the skin and rectally",
        ),
        pytest.param(
            rx("rx-1", "醋酸泼尼松片"),
            rx("rx-2", "布地奈德吸入剂", day=2),
            id="chinese oral and inhaled corticosteroids",
        ),
    ],
)
def test_given_the_same_class_at_two_sites_then_no_duplicate_therapy(
    first: Event, second: Event
) -> None:
    assert duplicates(first, second) == []


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(
            rx("rx-1", "ibuprofen 400 mg tablet", "Oral Route"),
            rx("rx-2", "naproxen", day=2),
            id="a known site and an unknown one",
        ),
        pytest.param(
            rx("rx-1", "Paracetamol 240mg suppository"),
            rx("rx-2", "Tylenol PM", "Oral Route", day=2),
            id="acetaminophen rectally and by mouth",
        ),
        pytest.param(
            rx("rx-1", "betamethasone cream", "Topical"),
            rx("rx-2", "clobetasol ointment", day=2),
            id="two corticosteroids on the skin",
        ),
        pytest.param(
            rx("rx-1", "diclofenac 1% gel", "Topical"),
            rx("rx-2", "ibuprofen 400 mg tablet", "Oral Route", day=2),
            id="a topical NSAID adds to an oral one",
        ),
        pytest.param(
            rx("rx-1", "timolol 0.5% eye drops", "Ophthalmic route"),
            rx("rx-2", "metoprolol 50 mg tablet", day=2),
            id="beta-blocker eye drops add to an oral beta blocker",
        ),
        pytest.param(
            rx("rx-1", "双氯芬酸钠凝胶"),
            rx("rx-2", "布洛芬片", day=2),
            id="a chinese topical NSAID adds to an oral one",
        ),
    ],
)
def test_given_the_same_site_an_unknown_one_or_a_systemically_acting_class_then_a_duplicate(
    first: Event, second: Event
) -> None:
    assert len(duplicates(first, second)) == 1
