"""Table-driven cross-reactivity judgements: tests/fixtures/knowledge/pairs.csv plus key cases."""

from __future__ import annotations

import pytest

from rules.knowledge.bundled import TOLERANCE_SOURCE, BundledKnowledge
from rules.knowledge.evaluation import Pair
from rules.knowledge.judge import STRENGTH
from rules.knowledge.model import Coding, MatchLevel
from tests.unit.knowledge.fixtures import pairs

RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"
NDC = "http://hl7.org/fhir/sid/ndc"
PENICILLIN_G = (Coding(RXNORM, "7980", "Penicillin G"),)
ZOSYN = (Coding(NDC, "0206-8862-02", "Zosyn (piperacillin/tazobactam) 4.5gm injection"),)
SMX_TMP = (Coding(RXNORM, "10831", "Sulfamethoxazole / Trimethoprim"),)


@pytest.mark.parametrize("pair", [pytest.param(p, id=p.description) for p in pairs()])
def test_pair_table(knowledge: BundledKnowledge, pair: Pair) -> None:
    verdict = knowledge.cross_reactivity(
        pair.allergen, pair.drug, pair.allergen_codes, pair.drug_codes
    )

    assert verdict.level is pair.expected, verdict.reason


def test_pair_table_is_broad_enough() -> None:
    table = pairs()

    assert len(table) >= 70
    assert {p.topic for p in table} >= {
        "penicillins",
        "cephalosporins",
        "carbapenems",
        "monobactams",
        "sulfonamides",
        "sulfates",
        "sulfites",
        "nsaids",
        "contrast",
        "opioids",
        "macrolides",
        "fluoroquinolones",
        "tetracyclines",
        "chinese",
        "coded",
        "unresolvable",
        "non_drug",
        "common_drugs",
    }
    assert {p.expected for p in table} == set(MatchLevel)


@pytest.mark.parametrize(
    ("allergen", "allergen_codes", "drug", "drug_codes", "level", "matched"),
    [
        pytest.param(
            "Penicillin G",
            PENICILLIN_G,
            "Zosyn",
            ZOSYN,
            MatchLevel.SAME_CLASS,
            ("piperacillin",),
            id="given a penicillin G allergy when Zosyn is prescribed then piperacillin matches "
            "by class",
        ),
        pytest.param(
            "Penicillin G",
            PENICILLIN_G,
            "ceftriaxone",
            (),
            MatchLevel.LOW_RISK,
            ("ceftriaxone",),
            id="given a penicillin G allergy when ceftriaxone is prescribed then it is low risk",
        ),
        pytest.param(
            "Penicillin G",
            PENICILLIN_G,
            "azithromycin",
            (),
            MatchLevel.NONE,
            (),
            id="given a penicillin G allergy when azithromycin is prescribed then nothing matches",
        ),
        pytest.param(
            "Sulfamethoxazole / Trimethoprim",
            SMX_TMP,
            "Amoxicillin 250 MG / Clavulanate 125 MG Oral Tablet",
            (),
            MatchLevel.NONE,
            (),
            id="given a co-trimoxazole allergy when amoxicillin/clavulanate is prescribed then "
            "nothing matches",
        ),
        pytest.param(
            "Sulfamethoxazole / Trimethoprim",
            SMX_TMP,
            "Naproxen sodium 220 MG Oral Tablet",
            (),
            MatchLevel.NONE,
            (),
            id="given a co-trimoxazole allergy when naproxen is prescribed then nothing matches",
        ),
        pytest.param(
            "Sulfamethoxazole / Trimethoprim",
            SMX_TMP,
            "ferrous sulfate 325 MG Oral Tablet",
            (),
            MatchLevel.NONE,
            (),
            id="given a co-trimoxazole allergy when ferrous sulfate is prescribed then the "
            "sulfa/sulfate myth does not alert",
        ),
        pytest.param(
            "Aspirin",
            (),
            "Ibuprofen 400 MG Oral Tablet [Ibu]",
            (),
            MatchLevel.SAME_CLASS,
            ("ibuprofen",),
            id="given an aspirin allergy when ibuprofen is prescribed then the COX-1 class alerts",
        ),
    ],
)
def test_key_clinical_cases(
    knowledge: BundledKnowledge,
    allergen: str,
    allergen_codes: tuple[Coding, ...],
    drug: str,
    drug_codes: tuple[Coding, ...],
    level: MatchLevel,
    matched: tuple[str, ...],
) -> None:
    verdict = knowledge.cross_reactivity(allergen, drug, allergen_codes, drug_codes)

    assert (verdict.level, verdict.matched) == (level, matched)
    assert verdict.reason
    assert verdict.source


def test_combination_product_reports_every_ingredient_and_the_strongest_match(
    knowledge: BundledKnowledge,
) -> None:
    verdict = knowledge.cross_reactivity("Penicillin G", "Zosyn", PENICILLIN_G, ZOSYN)

    assert verdict.ingredients == ("piperacillin", "tazobactam")
    assert verdict.matched == ("piperacillin",)
    assert verdict.source == "class membership: penicillins"


@pytest.mark.parametrize(
    ("allergen", "drug", "source_fragment"),
    [
        pytest.param(
            "amoxicillin",
            "amoxicillin",
            "ingredient identity",
            id="given an amoxicillin allergy when amoxicillin is prescribed then identity is cited",
        ),
        pytest.param(
            "amoxicillin",
            "cefadroxil",
            "Romano",
            id="given an amoxicillin allergy when cefadroxil is prescribed then Romano is cited",
        ),
        pytest.param(
            "sulfa",
            "furosemide",
            "Strom",
            id="given a sulfa allergy when furosemide is prescribed then Strom 2003 is cited",
        ),
        pytest.param(
            "sulfa",
            "zonisamide",
            "ZONEGRAN",
            id="given a sulfa allergy when zonisamide is prescribed then its label is cited",
        ),
        pytest.param(
            "sulfa",
            "mafenide",
            "SULFAMYLON",
            id="given a sulfa allergy when mafenide is applied then its label is cited",
        ),
        pytest.param(
            "shellfish",
            "iohexol",
            "Schabelman",
            id="given a shellfish allergy when iohexol is given then Schabelman 2010 is cited",
        ),
        pytest.param(
            "penicillins",
            "piperacillin",
            "class membership: penicillins",
            id="given a penicillin class allergy when piperacillin is prescribed then the class "
            "is cited",
        ),
    ],
)
def test_sources_are_cited(
    knowledge: BundledKnowledge, allergen: str, drug: str, source_fragment: str
) -> None:
    assert source_fragment in knowledge.cross_reactivity(allergen, drug).source


@pytest.mark.parametrize(
    ("allergen", "drug", "failed_side"),
    [
        pytest.param(
            "xyzzy",
            "amoxicillin",
            "allergen 'xyzzy'",
            id="given a gibberish allergen when checked then the allergen side is named",
        ),
        pytest.param(
            "penicillin",
            "qwertyuiop",
            "drug 'qwertyuiop'",
            id="given a gibberish drug when checked then the drug side is named",
        ),
        pytest.param(
            "penicillin",
            "Amoxil / frobnicillin",
            "",
            id="given a partly known alerting drug when checked then the alert is not weakened",
        ),
    ],
)
def test_unresolved_inputs_are_never_silent(
    knowledge: BundledKnowledge, allergen: str, drug: str, failed_side: str
) -> None:
    verdict = knowledge.cross_reactivity(allergen, drug)

    assert verdict.level is not MatchLevel.NONE
    assert failed_side in verdict.reason


@pytest.mark.parametrize("drug", ["5 mg", "tablet", "X"])
def test_a_drug_text_of_only_noise_words_says_why_it_could_not_be_resolved(
    knowledge: BundledKnowledge, drug: str
) -> None:
    """With no unrecognised word to name, the reason said only "could not be resolved"."""
    verdict = knowledge.cross_reactivity("penicillin", drug)

    assert verdict.level is MatchLevel.UNVERIFIED
    assert verdict.reason == (
        f"drug '{drug}' could not be resolved (it names no substance: every word reads as a"
        " strength, unit, dose form or other noise word)"
    )


@pytest.mark.parametrize("drug", ["Midol", "Dimetapp", "Unisom"])
def test_a_name_of_several_products_is_unverified_and_named_in_the_reason(
    knowledge: BundledKnowledge, drug: str
) -> None:
    """Names read as no concept on purpose (noise category `ambiguous`) were dropped as noise:
    the reason named no word."""
    verdict = knowledge.cross_reactivity("aspirin", drug)

    assert verdict.level is MatchLevel.UNVERIFIED
    assert verdict.reason == (
        f"drug '{drug}' could not be resolved (unrecognised: {drug.lower()} (names several"
        " products or substances: name the one meant))"
    )


def test_partly_recognised_drug_without_conflict_is_unverified(
    knowledge: BundledKnowledge,
) -> None:
    verdict = knowledge.cross_reactivity("penicillin", "azithromycin / frobnicate")

    assert verdict.level is MatchLevel.UNVERIFIED
    assert "frobnicate" in verdict.reason
    assert verdict.ingredients == ("azithromycin",)


@pytest.mark.parametrize(
    ("allergen", "drug", "level", "unread"),
    [
        pytest.param(
            "Pen, sulfa",
            "Bactrim",
            MatchLevel.SAME_CLASS,
            "allergen 'Pen, sulfa' was only partly recognised (unrecognised: pen)",
            id="given an unread item beside a conflicting one then the conflict stands, the item named",
        ),
        pytest.param(
            "Pen/Sulfa",
            "sulfamethoxazole",
            MatchLevel.SAME_CLASS,
            "(unrecognised: pen)",
            id="given an unread item after a slash then the conflict stands, the item named",
        ),
        pytest.param(
            "Pen, sulfa",
            "amoxicillin",
            MatchLevel.UNVERIFIED,
            "allergen 'Pen, sulfa' was only partly recognised (unrecognised: pen)",
            id="given an unread item and no conflict in the rest then unverified",
        ),
        pytest.param(
            "penicillin",
            "Amoxil / frobnicillin",
            MatchLevel.SAME_CLASS,
            "drug 'Amoxil / frobnicillin' was only partly recognised (unrecognised: frobnicillin)",
            id="given a drug read in part that conflicts then the conflict stands, the word named",
        ),
        pytest.param(
            "peanut, frobnicate",
            "dimercaprol",
            MatchLevel.PARTIAL,
            "(unrecognised: frobnicate)",
            id="given an unread item beside a partial match then partial stands, the item named",
        ),
    ],
)
def test_a_part_of_the_record_that_cannot_be_read_is_named_whatever_the_level(
    knowledge: BundledKnowledge, allergen: str, drug: str, level: MatchLevel, unread: str
) -> None:
    verdict = knowledge.cross_reactivity(allergen, drug)

    assert verdict.level is level
    assert unread in verdict.reason
    if level is not MatchLevel.UNVERIFIED:
        assert "part of the record could not be read, check it by hand" in verdict.reason


def test_no_known_allergy_statement_is_not_an_allergen(knowledge: BundledKnowledge) -> None:
    nkda = (Coding("http://snomed.info/sct", "409137002"),)

    verdict = knowledge.cross_reactivity("NKDA", "Zosyn", nkda, ZOSYN)

    assert verdict.level is MatchLevel.NONE
    assert "no known allergy" in verdict.reason


@pytest.mark.parametrize(
    ("allergen", "said"),
    [
        pytest.param(
            "not allergic to penicillin",
            "a negation ('not allergic')",
            id="given not allergic to X then a negation",
        ),
        pytest.param(
            "No known penicillin allergy (situation)",
            "a negation ('no')",
            id="given a SNOMED no-known-X-allergy display then a negation",
        ),
        pytest.param(
            "penicillin allergy de-labelled after challenge",
            "a negation ('de-labelled')",
            id="given a delabelled allergy then a negation",
        ),
        pytest.param(
            "NKDA to penicillin",
            "a negation ('nkda')",
            id="given a no-known-allergy statement naming an allergen then a negation",
        ),
        pytest.param(
            "family history of penicillin allergy",
            "another person's allergy ('family history')",
            id="given a family history then another person's allergy",
        ),
    ],
)
def test_an_allergy_text_that_negates_or_is_not_the_patients_is_unverified_not_critical(
    knowledge: BundledKnowledge, allergen: str, said: str
) -> None:
    verdict = knowledge.cross_reactivity(allergen, "amoxicillin")

    assert verdict.level is MatchLevel.UNVERIFIED
    assert verdict.reason == f"allergen '{allergen}' reads as {said}"
    assert knowledge.cross_reactivity(
        allergen.replace("penicillin", "sulfa"), "amoxicillin"
    ).level is (MatchLevel.UNVERIFIED)


@pytest.mark.parametrize(
    "allergen",
    [
        pytest.param("penicillin allergy - childhood, unclear reaction", id="given unclear"),
        pytest.param("penicillin - hives at the moment of reaction", id="given moment"),
        pytest.param("penicillin - sonographer noted allergic rash", id="given sonographer"),
    ],
)
def test_a_word_that_begins_with_a_relatives_name_is_not_another_persons_allergy(
    knowledge: BundledKnowledge, allergen: str
) -> None:
    """ "Unclear" begins with "uncle", "moment" with "mom", "sonographer" with "son": none names a relative, so
    the allergy stays the patient's (it read as another person's, `unverified`)."""
    verdict = knowledge.cross_reactivity(allergen, "amoxicillin")

    assert verdict.level is MatchLevel.SAME_CLASS


@pytest.mark.parametrize(
    ("allergen", "not_an_allergen"),
    [
        pytest.param("Penicillin - hives, treated with Benadryl", "Benadryl", id="given treated"),
        pytest.param("amoxicillin rash requiring prednisone", "prednisone", id="given requiring"),
        pytest.param(
            "penicillin allergy; tolerates cephalexin", "cephalexin", id="given tolerated"
        ),
        pytest.param("Tolerated codeine. Morphine itch", "codeine", id="given sentence start"),
        pytest.param(
            "penicillin - hives; no reaction to cephalexin", "cephalexin", id="given no reaction to"
        ),
        pytest.param("bee stings - anaphylaxis - EpiPen", "epinephrine", id="given an epipen"),
        pytest.param("Shellfish; Jext prescribed", "adrenaline", id="given a prescribed jext"),
        pytest.param("latex (carries an Epi-Pen)", "EpiPen", id="given a carried epi-pen"),
        pytest.param(
            "amoxicillin: anaphylaxis, adrenaline administered", "epinephrine", id="given given"
        ),
        pytest.param(
            "contrast - premedicate with prednisone", "prednisone", id="given a premedication"
        ),
        pytest.param(
            "contrast (premedication: prednisone, Benadryl)", "Benadryl", id="given a parenthesis"
        ),
        pytest.param("sulfa, switched to doxycycline", "doxycycline", id="given a replacement"),
        pytest.param("codeine (nausea) - ok with tramadol", "tramadol", id="given ok with"),
        pytest.param("Penicillin - hives, tx w/ Benadryl", "Benadryl", id="given tx w/"),
        pytest.param("Contrast - hives; premed w/ prednisone", "prednisone", id="given premed w/"),
        pytest.param(
            "PCN allergy - has had Keflex without problems", "cephalexin", id="given no problems"
        ),
        pytest.param(
            "PCN - hives; allergist cleared for cephalosporins", "cephalexin", id="given cleared"
        ),
        pytest.param("codeine - itching; tramadol OK", "tramadol", id="given a drug then ok"),
        pytest.param(
            "sulfa - rash. Doxycycline tolerated", "doxycycline", id="given then tolerated"
        ),
        pytest.param("contrast - needs prednisone prep", "prednisone", id="given needs"),
    ],
)
def test_a_drug_that_treated_the_reaction_or_is_tolerated_is_not_read_as_the_allergen(
    knowledge: BundledKnowledge, allergen: str, not_an_allergen: str
) -> None:
    verdict = knowledge.cross_reactivity(allergen, not_an_allergen)

    assert verdict.level is not MatchLevel.SAME_INGREDIENT
    assert verdict.level is not MatchLevel.UNVERIFIED


@pytest.mark.parametrize(
    ("allergen", "drug"),
    [
        ("amoxicillin - hives; tolerated penicillins", "ampicillin"),
        ("cephalexin - anaphylaxis; tolerated cephalosporins", "cefadroxil"),
        ("ampicillin anaphylaxis; tolerated beta-lactams", "amoxicillin"),
        ("ibuprofen - anaphylaxis; tolerates NSAIDs", "naproxen"),
        ("sulfamethoxazole rash; tolerated sulfonamide antibiotics", "sulfadiazine"),
    ],
)
def test_a_class_said_to_be_tolerated_that_holds_the_allergen_clears_nothing(
    knowledge: BundledKnowledge, allergen: str, drug: str
) -> None:
    """The record contradicts itself (the allergen is of the class it says is tolerated):
    the class rule stands, never lowered to low_risk by the contradiction."""
    verdict = knowledge.cross_reactivity(allergen, drug)

    assert verdict.level is MatchLevel.SAME_CLASS
    assert verdict.source != TOLERANCE_SOURCE


def test_a_class_apart_from_the_allergen_said_to_be_tolerated_is_a_tolerance(
    knowledge: BundledKnowledge,
) -> None:
    """Amoxicillin and cefalexin share a side chain (partial by class alone)."""
    verdict = knowledge.cross_reactivity("amoxicillin rash; tolerates cephalosporins", "cefalexin")

    assert verdict.level is MatchLevel.LOW_RISK
    assert verdict.source == TOLERANCE_SOURCE


@pytest.mark.parametrize(
    ("allergen", "tolerated", "classmate"),
    [
        ("Codeine - itching; morphine OK", "morphine", "hydromorphone"),
        ("amoxicillin rash; tolerates cephalexin", "cephalexin", "cefadroxil"),
        ("aspirin - asthma (can take ibuprofen)", "Motrin", "naproxen"),
        ("sulfa - rash. Bactrim tolerated", "Bactrim DS", "sulfadiazine"),
    ],
)
def test_a_drug_the_allergy_record_says_is_tolerated_is_low_risk_not_its_classmates(
    knowledge: BundledKnowledge, allergen: str, tolerated: str, classmate: str
) -> None:
    """Documented tolerance of the drug itself outweighs the class rule; it says nothing about
    the rest of the class."""
    documented = knowledge.cross_reactivity(allergen, tolerated)
    by_class = knowledge.cross_reactivity(allergen, classmate)

    assert documented.level is MatchLevel.LOW_RISK
    assert documented.source == TOLERANCE_SOURCE
    assert "tolerated" in documented.reason
    assert by_class.level in {MatchLevel.SAME_CLASS, MatchLevel.PARTIAL}


@pytest.mark.parametrize(
    ("allergen", "drug", "at_least"),
    [
        pytest.param(
            "Codeine - vomiting; ok with morphine but not hydromorphone (hives)",
            "hydromorphone",
            MatchLevel.SAME_CLASS,
            id="a tolerance clause ends at but",
        ),
        pytest.param(
            "Amoxicillin - hives; tolerated cefdinir but cephalexin caused rash",
            "cephalexin",
            MatchLevel.PARTIAL,
            id="the drug after but is not tolerated",
        ),
        pytest.param(
            "Codeine - N/V; tolerated Augmentin x5 days then hives",
            "Augmentin",
            MatchLevel.SAME_CLASS,
            id="tolerated then a reaction is an allergy",
        ),
        pytest.param(
            "Penicillin; changed to cephalexin which caused hives",
            "cephalexin",
            MatchLevel.PARTIAL,
            id="a replacement that reacted is an allergy",
        ),
        pytest.param(
            "Penicillin (hives - treated with Benadryl) Sulfa (SJS)",
            "Bactrim",
            MatchLevel.SAME_CLASS,
            id="a treatment clause ends at its parenthesis",
        ),
        pytest.param(
            "Amoxicillin - rash treated with Benadryl and Sulfa - hives",
            "Bactrim DS",
            MatchLevel.SAME_CLASS,
            id="a treatment clause ends at the and of the next item",
        ),
        pytest.param(
            "Latex; needed intubation for anaphylaxis to rocuronium",
            "rocuronium",
            MatchLevel.SAME_INGREDIENT,
            id="a treatment clause ends where the cause comes back",
        ),
    ],
)
def test_a_treatment_or_tolerance_clause_never_swallows_an_allergen(
    knowledge: BundledKnowledge, allergen: str, drug: str, at_least: MatchLevel
) -> None:
    verdict = knowledge.cross_reactivity(allergen, drug)

    assert STRENGTH[verdict.level] >= STRENGTH[at_least], verdict.reason


@pytest.mark.parametrize(
    "allergen",
    [
        "Dad has PCN allergy",
        "Brother - PCN allergy",
        "Sibling with penicillin allergy",
        "penicillin (mom's, not patient's)",
        "Penicillin allergy in family",
        "passed amoxicillin challenge 2023",
        "graded challenge to amoxicillin passed",
        "Grandma - anaphylaxis to penicillin",
        "Penicillin (historical, tolerated since)",
    ],
)
def test_another_persons_allergy_or_a_passed_challenge_is_unverified(
    knowledge: BundledKnowledge, allergen: str
) -> None:
    assert knowledge.cross_reactivity(allergen, "amoxicillin").level is MatchLevel.UNVERIFIED


def test_only_the_ingredient_that_matched_needs_to_be_documented_as_tolerated(
    knowledge: BundledKnowledge,
) -> None:
    verdict = knowledge.cross_reactivity("Codeine - rash, hydrocodone fine", "Norco 5/325")

    assert verdict.level is MatchLevel.LOW_RISK
    assert verdict.source == TOLERANCE_SOURCE


def test_a_record_that_calls_the_allergen_itself_tolerated_still_flags_it(
    knowledge: BundledKnowledge,
) -> None:
    verdict = knowledge.cross_reactivity("amoxicillin rash; tolerated amoxicillin", "amoxicillin")

    assert verdict.level is MatchLevel.SAME_INGREDIENT


def test_epinephrine_named_as_an_allergen_without_a_rescue_cue_is_the_allergen(
    knowledge: BundledKnowledge,
) -> None:
    verdict = knowledge.cross_reactivity("sulfites; epinephrine", "epinephrine")

    assert verdict.level is MatchLevel.SAME_INGREDIENT


def test_an_allergy_text_naming_only_the_rescue_is_unverified_with_that_reason(
    knowledge: BundledKnowledge,
) -> None:
    verdict = knowledge.cross_reactivity("carries an EpiPen", "epinephrine")

    assert verdict.level is MatchLevel.UNVERIFIED
    assert "a rescue treatment, not an allergen" in verdict.reason


@pytest.mark.parametrize(
    "allergen",
    [
        "penicillin - rash after the first dose",
        "penicillin: hives years ago as a child",
        "penicillin - swelling of lips and tongue, hospitalized",
        "penicillin - anaphylaxis (ICU, intubated)",
        "penicillin - severe stomach pain and headache",
        "penicillin - hair loss, passed out, body aches",
    ],
)
def test_the_narrative_of_a_reaction_note_leaves_the_allergy_readable(
    knowledge: BundledKnowledge, allergen: str
) -> None:
    """Times, body sites and care settings name no drug: an unrelated drug is `none`, not the
    `unverified` of an allergy text with words nobody recognised."""
    assert knowledge.cross_reactivity(allergen, "azithromycin").level is MatchLevel.NONE
    assert knowledge.cross_reactivity(allergen, "amoxicillin").level is MatchLevel.SAME_CLASS


@pytest.mark.parametrize(
    "allergen",
    ["codeine not tolerated", "unable to tolerate codeine", "didn't tolerate codeine"],
)
def test_a_drug_the_patient_cannot_tolerate_is_the_allergen(
    knowledge: BundledKnowledge, allergen: str
) -> None:
    assert knowledge.cross_reactivity(allergen, "codeine").level is MatchLevel.SAME_INGREDIENT


def test_a_text_naming_only_tolerated_drugs_is_unverified_and_quoted_whole(
    knowledge: BundledKnowledge,
) -> None:
    verdict = knowledge.cross_reactivity("tolerated amoxicillin", "amoxicillin")

    assert verdict.level is MatchLevel.UNVERIFIED
    assert verdict.allergen == "tolerated amoxicillin"
    assert "'tolerated amoxicillin'" in verdict.reason


@pytest.mark.parametrize(
    ("allergen", "drug", "level"),
    [
        pytest.param(
            "penicillin allergy; no allergy to cephalosporins",
            "amoxicillin",
            MatchLevel.SAME_CLASS,
            id="a negated clause naming another drug",
        ),
        pytest.param(
            "penicillin - rash; HIV negative",
            "amoxicillin",
            MatchLevel.SAME_CLASS,
            id="a negative result of something else",
        ),
        pytest.param(
            "penicillin anaphylaxis; passed cefalexin challenge 2022",
            "Augmentin",
            MatchLevel.SAME_CLASS,
            id="a passed challenge of another drug",
        ),
        pytest.param(
            "amoxicillin rash; ceftriaxone excluded by challenge",
            "amoxicillin 250mg",
            MatchLevel.SAME_INGREDIENT,
            id="another drug excluded",
        ),
        pytest.param(
            "sulfa - SJS (patch test to furosemide negative)",
            "co-trimoxazole",
            MatchLevel.SAME_CLASS,
            id="a negative test in a parenthesis",
        ),
        pytest.param(
            "denies allergies other than penicillin",
            "amoxicillin",
            MatchLevel.SAME_CLASS,
            id="a denial with an exception",
        ),
        pytest.param(
            "NKDA except codeine (vomiting)",
            "codeine phosphate 30mg",
            MatchLevel.SAME_INGREDIENT,
            id="no known allergy but one",
        ),
        pytest.param(
            "NO PENICILLINS - anaphylaxis",
            "amoxicillin",
            MatchLevel.SAME_CLASS,
            id="a shouted no before a reaction",
        ),
        pytest.param(
            "NIL penicillins (anaphylaxis)",
            "Augmentin 625",
            MatchLevel.SAME_CLASS,
            id="a shouted nil before a parenthesised reaction",
        ),
        pytest.param(
            "NO PENICILLIN BASED ANTIBIOTICS - anaphylaxis",
            "amoxicillin",
            MatchLevel.SAME_CLASS,
            id="a shouted no before four words and a reaction",
        ),
    ],
)
def test_a_negation_governs_its_clause_not_the_allergy_recorded_beside_it(
    knowledge: BundledKnowledge, allergen: str, drug: str, level: MatchLevel
) -> None:
    """A negation, a negative test or a passed challenge in one clause of an allergy text
    leaves the allergy another clause records as strong as it is (it was `unverified`)."""
    verdict = knowledge.cross_reactivity(allergen, drug)

    assert verdict.level is level, verdict.reason


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "allergen",
    [
        pytest.param("no " + "a" * 600, id="a 600-letter word after no"),
        pytest.param("no " + "a-" * 300, id="a 600-character hyphenated word after no"),
        pytest.param(
            "NO " + "x" * 2000 + " - rash", id="a 2,000-letter word shouted before a reaction"
        ),
    ],
)
def test_given_a_long_unknown_word_after_a_leading_no_then_it_is_judged_unverified(
    knowledge: BundledKnowledge, allergen: str
) -> None:
    """Reading a shouted warning ("NO PENICILLINS - anaphylaxis") tried every way of cutting a
    word into four: a 300-letter word after "no" took 11 s (600 letters about 90 s, 300 times
    "a-" 50 s), so one producer's text could stall the partition it came on. Words are now split
    at spaces only."""
    assert knowledge.cross_reactivity(allergen, "amoxicillin").level is MatchLevel.UNVERIFIED


@pytest.mark.parametrize(
    ("allergen", "cue"),
    [
        ("Penicillin allergy: No", "no"),
        ("Allergy to penicillin: No", "no"),
        ("Allergic to penicillin = No", "no"),
        ("Penicillin: NO", "no"),
        ("Penicillin allergy? No", "no"),
        ("penicillin allergy - N", "n"),
        ("penicillin allergy (false)", "false"),
        ("penicillin allergy: none", "none"),
        ("penicillin allergy (none)", "none"),
        ("penicillin - not a true allergy", "not a true allergy"),
        ("penicillin - not true allergy (vomiting only)", "not true allergy"),
        ("penicillin allergy outgrown", "outgrown"),
        ("penicillin allergy resolved", "allergy resolved"),
        (
            "previously labelled penicillin allergic - now tolerates amoxicillin",
            "previously labelled",
        ),
        ("penicillin (skin test negative)", "negative"),
        ("Penicillin (historical, tolerated since)", "tolerated since"),
        ("No penicillin", "no"),
        ("No penicillin allergy", "no"),
    ],
)
def test_a_field_answered_no_or_a_record_that_it_is_no_allergy_is_unverified(
    knowledge: BundledKnowledge, allergen: str, cue: str
) -> None:
    """The record negates the allergy it names (a structured answer, 'not a true allergy', a
    negative test of the allergen): someone has to read it, it is no critical alert."""
    verdict = knowledge.cross_reactivity(allergen, "co-amoxiclav 625mg")

    assert verdict.level is MatchLevel.UNVERIFIED
    assert verdict.reason == f"allergen '{allergen}' reads as a negation ({cue!r})"


@pytest.mark.parametrize(
    "allergen",
    ["penicillin allergy: yes", "Penicillin: YES - anaphylaxis", "Penicillin allergy? Yes (hives)"],
)
def test_a_field_answered_yes_is_the_allergy(knowledge: BundledKnowledge, allergen: str) -> None:
    assert knowledge.cross_reactivity(allergen, "amoxicillin").level is MatchLevel.SAME_CLASS
    assert knowledge.cross_reactivity(allergen, "azithromycin").level is MatchLevel.NONE


def test_a_drug_a_negated_clause_names_is_read_as_tolerated_not_its_classmates(
    knowledge: BundledKnowledge,
) -> None:
    named = knowledge.cross_reactivity("penicillin (not allergic to amoxicillin)", "amoxicillin")
    classmate = knowledge.cross_reactivity(
        "penicillin (not allergic to amoxicillin)", "flucloxacillin"
    )

    assert named.level is MatchLevel.LOW_RISK
    assert named.source == TOLERANCE_SOURCE
    assert classmate.level is MatchLevel.SAME_CLASS


def test_a_codeine_record_that_says_it_is_no_allergy_does_not_flag_morphine(
    knowledge: BundledKnowledge,
) -> None:
    verdict = knowledge.cross_reactivity("codeine - not an allergy, just nausea", "morphine")

    assert verdict.level is MatchLevel.UNVERIFIED
    assert "a negation ('not an allergy')" in verdict.reason


@pytest.mark.parametrize(
    ("allergen", "drug", "level"),
    [
        pytest.param(
            "cow's milk protein allergy", "Advair Diskus 250/50", MatchLevel.PARTIAL, id="Diskus"
        ),
        pytest.param("milk allergy", "Relvar Ellipta", MatchLevel.PARTIAL, id="Ellipta"),
        pytest.param("milk allergy", "Solu-Medrol 40 mg", MatchLevel.PARTIAL, id="Solu-Medrol 40"),
        pytest.param("milk allergy", "Solu-Medrol 125 mg", MatchLevel.NONE, id="no lactose"),
        pytest.param("milk allergy", "Advair HFA", MatchLevel.NONE, id="a metered-dose inhaler"),
        pytest.param("lactose", "Flovent Diskus", MatchLevel.SAME_INGREDIENT, id="lactose"),
        pytest.param(
            "milk; lactose", "Relvar Ellipta", MatchLevel.SAME_INGREDIENT, id="lactose listed"
        ),
        pytest.param(
            "Advair Diskus - oral thrush", "Anoro Ellipta", MatchLevel.NONE, id="a DPI recorded"
        ),
        pytest.param(
            "ceftriaxone 1 g in sodium chloride 0.9% - rash",
            "Sodium Chloride 0.9% 1000 mL",
            MatchLevel.NONE,
            id="a drug in saline recorded",
        ),
    ],
)
def test_a_lactose_carrier_is_judged_against_milk_protein_not_as_the_product_allergen(
    knowledge: BundledKnowledge, allergen: str, drug: str, level: MatchLevel
) -> None:
    """The lactose of dry-powder inhalers and of Solu-Medrol 40 mg carries milk protein
    (`partial`, from their labels); a product recorded as the allergen is an allergy to its
    active ingredients, not to the carrier every other inhaler shares."""
    assert knowledge.cross_reactivity(allergen, drug).level is level


@pytest.mark.parametrize(
    "allergen", ["lactose intolerance", "Lactose intolerant", "intolerant to lactose"]
)
@pytest.mark.parametrize(
    "drug", ["Advair Diskus 250/50", "Solu-Medrol 40 mg", "amoxicillin 500mg capsules"]
)
def test_lactose_intolerance_is_no_allergy_and_raises_no_critical_alert(
    knowledge: BundledKnowledge, allergen: str, drug: str
) -> None:
    verdict = knowledge.cross_reactivity(allergen, drug)

    assert verdict.level is MatchLevel.UNVERIFIED
    assert "an intolerance of the milk sugar, not an allergy" in verdict.reason


def test_aspirin_and_diflunisal_conflict_by_cox_1_inhibition_not_as_acetylated_salicylates(
    knowledge: BundledKnowledge,
) -> None:
    """Diflunisal is a difluorophenyl derivative of salicylic acid, not acetylated: what the two
    share, and what drives aspirin-exacerbated disease, is strong COX-1 inhibition."""
    verdict = knowledge.cross_reactivity("aspirin", "diflunisal")

    assert verdict.level is MatchLevel.SAME_CLASS
    assert "COX-1 inhibition" in verdict.reason
    assert "acetylated" not in verdict.reason
