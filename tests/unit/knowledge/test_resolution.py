"""Normalisation: names, brands, codes, salts, strengths, dose forms and Chinese names."""

from __future__ import annotations

import pytest

from rules.knowledge.bundled import BundledKnowledge
from rules.knowledge.model import Coding, MatchLevel
from tests.processes import outputs_under_hash_seeds
from tests.unit.knowledge.fixtures import (
    common_allergies,
    common_prescriptions,
    synthea_module_codings,
)

RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"
NDC = "http://hl7.org/fhir/sid/ndc"
SNOMED = "http://snomed.info/sct"


@pytest.mark.parametrize(
    ("text", "ingredients"),
    [
        pytest.param(
            "Amoxicillin 250 MG / Clavulanate 125 MG Oral Tablet",
            ("amoxicillin", "clavulanate"),
            id="given an RxNorm-style combination when resolved then both ingredients",
        ),
        pytest.param(
            "PENICILLIN G", ("penicillin g",), id="given upper case when resolved then the name"
        ),
        pytest.param(
            "penicillin-g", ("penicillin g",), id="given a hyphen when resolved then the name"
        ),
        pytest.param(
            "  Penicillin   G!!  ",
            ("penicillin g",),
            id="given stray spaces and punctuation when resolved then the name",
        ),
        pytest.param(
            "Zosyn 4.5 g",
            ("piperacillin", "tazobactam"),
            id="given a brand with a strength when resolved then its ingredients",
        ),
        pytest.param(
            "Penicillin V Potassium 500 MG Oral Tablet",
            ("penicillin v",),
            id="given a potassium salt when resolved then the salt is dropped",
        ),
        pytest.param(
            "Ceftriaxone sodium 500mg powder for injection solution vial (product)",
            ("ceftriaxone",),
            id="given a sodium salt, glued strength and dose form when resolved then the name",
        ),
        pytest.param(
            "24 HR Metformin hydrochloride 500 MG Extended Release Oral Tablet",
            ("metformin",),
            id="given an extended-release hydrochloride when resolved then the name",
        ),
        pytest.param(
            "ferrous sulfate 325 MG Oral Tablet",
            ("ferrous sulfate",),
            id="given ferrous sulfate when resolved then sulfate is part of the name, not a salt",
        ),
        pytest.param(
            "Morphine sulfate 10 mg/mL injection",
            ("morphine",),
            id="given morphine sulfate when resolved then sulfate is a salt",
        ),
        pytest.param(
            "sulfamethoxazole/trimethoprim 800/160",
            ("sulfamethoxazole", "trimethoprim"),
            id="given a slash combination when resolved then both ingredients",
        ),
        pytest.param(
            "Bactrim DS",
            ("sulfamethoxazole", "trimethoprim"),
            id="given Bactrim then co-trimoxazole",
        ),
        pytest.param(
            "Tylenol PM",
            ("acetaminophen", "diphenhydramine"),
            id="given a multi-word brand when resolved then its ingredients",
        ),
        pytest.param(
            "Paracétamol", ("acetaminophen",), id="given an accented synonym then acetaminophen"
        ),
        pytest.param(
            "Clinimix 4.25/10 sulfite-free (4.25% Amino Acid in 10% Dextrose) Injection, 1000ml",
            ("amino acids", "glucose"),
            id="given 'sulfite-free' when resolved then sulfite is negated",
        ),
        pytest.param(
            "阿莫西林克拉维酸钾片",
            ("amoxicillin", "clavulanate"),
            id="given a Chinese combination tablet when resolved then both ingredients",
        ),
        pytest.param(
            "注射用头孢曲松钠",
            ("ceftriaxone",),
            id="given a Chinese injection with a salt when resolved then ceftriaxone",
        ),
        pytest.param(
            "\uff21\uff33\uff30\uff29\uff32\uff29\uff2e\u3000\uff18\uff11\uff4d\uff47",
            ("aspirin",),
            id="given full-width characters when resolved then aspirin",
        ),
        pytest.param(
            "Rocephin", ("ceftriaxone",), id="given a derived brand name then its ingredient"
        ),
        pytest.param(
            "Tylenol #3",
            ("acetaminophen", "codeine"),
            id="given a numbered Tylenol when resolved then the codeine is not lost",
        ),
        pytest.param(
            "Tylenol with Codeine No. 3 tablet",
            ("acetaminophen", "codeine"),
            id="given 'No. 3' after a codeine product when resolved then it is complete",
        ),
        pytest.param(
            "Advil PM caplet",
            ("diphenhydramine", "ibuprofen"),
            id="given a PM brand when resolved then the antihistamine is not lost",
        ),
        pytest.param(
            "Claritin-D 12 hour",
            ("loratadine", "pseudoephedrine"),
            id="given a -D brand when resolved then the decongestant is not lost",
        ),
        pytest.param(
            "Mucinex DM",
            ("dextromethorphan", "guaifenesin"),
            id="given a DM brand when resolved then both ingredients",
        ),
    ],
)
def test_text_resolves_to_ingredients(
    knowledge: BundledKnowledge, text: str, ingredients: tuple[str, ...]
) -> None:
    resolution = knowledge.resolve(text)

    assert resolution.ingredients == ingredients
    assert resolution.resolved


@pytest.mark.parametrize(
    ("text", "classes"),
    [
        pytest.param("penicillins", ("penicillins",), id="given 'penicillins' then the class"),
        pytest.param("sulfa drugs", ("sulfonamide_antibiotics",), id="given 'sulfa drugs'"),
        pytest.param("NSAIDs", ("nsaids",), id="given 'NSAIDs' then the NSAID class"),
        pytest.param("cephalosporins", ("cephalosporins",), id="given 'cephalosporins'"),
        pytest.param("青霉素类", ("penicillins",), id="given 青霉素类 then the penicillin class"),
        pytest.param("头孢类", ("cephalosporins",), id="given 头孢类 then the cephalosporin class"),
        pytest.param("磺胺类", ("sulfonamide_antibiotics",), id="given 磺胺类 then sulfonamides"),
        pytest.param("contrast", ("contrast_media",), id="given 'contrast' then contrast media"),
        pytest.param("ACE inhibitor", ("ace_inhibitors",), id="given a class name in the singular"),
        pytest.param("Statin", ("statins",), id="given a label's one-word parenthesis"),
        pytest.param(
            "Aminoglycoside antibiotics", ("aminoglycosides",), id="given a class and a filler"
        ),
        pytest.param("beta blockers", ("beta_blockers",), id="given a class label as words"),
    ],
)
def test_class_words_resolve_to_classes_without_ingredients(
    knowledge: BundledKnowledge, text: str, classes: tuple[str, ...]
) -> None:
    resolution = knowledge.resolve(text)

    assert resolution.ingredients == ()
    assert resolution.classes == classes
    assert resolution.resolved


@pytest.mark.parametrize(
    ("text", "classes"),
    [
        pytest.param(
            "Moderna COVID-19 vaccine",
            ("covid_19_mrna_vaccines",),
            id="given a brand then its class word: the brand",
        ),
        pytest.param(
            "Lantus insulin", ("basal_insulins",), id="given an insulin then 'insulin': the insulin"
        ),
        pytest.param(
            "COVID-19 vaccine (Moderna)",
            ("covid_19_mrna_vaccines", "covid_19_vaccines"),
            id="given the class word first then the class as well",
        ),
        pytest.param(
            "Lantus, insulin",
            ("basal_insulins", "insulins"),
            id="given the class word as the next item then the class as well",
        ),
    ],
)
def test_a_class_word_right_after_a_member_describes_it(
    knowledge: BundledKnowledge, text: str, classes: tuple[str, ...]
) -> None:
    """ "Moderna COVID-19 vaccine" names the Moderna vaccine, not every COVID-19 vaccine; a class
    word before the name, or apart from it, still names the class."""
    resolution = knowledge.resolve(text)

    assert resolution.resolved
    assert len(resolution.ingredients) == 1
    assert resolution.classes == classes


@pytest.mark.parametrize(
    ("text", "ingredient"),
    [
        pytest.param("shellfish", "shellfish", id="given shellfish then a non-drug allergen"),
        pytest.param("Peanuts", "peanut", id="given peanuts then peanut"),
        pytest.param("Latex (substance)", "latex", id="given latex then latex"),
        pytest.param("Grass pollen (substance)", "grass pollen", id="given grass pollen"),
        pytest.param("cat dander", "animal dander", id="given cat dander then animal dander"),
        pytest.param("Mould", "mold", id="given the British spelling then mold"),
        pytest.param("Bee venom (substance)", "bee venom", id="given bee venom"),
        pytest.param("House dust mite (organism)", "house dust mite", id="given dust mites"),
        pytest.param("iodine", "iodine", id="given iodine then iodine"),
    ],
)
def test_non_drug_allergens_resolve(
    knowledge: BundledKnowledge, text: str, ingredient: str
) -> None:
    resolution = knowledge.resolve(text)

    assert resolution.ingredients == (ingredient,)
    assert resolution.resolved


@pytest.mark.parametrize(
    ("codes", "ingredients"),
    [
        pytest.param(
            (Coding(RXNORM, "7980"),),
            ("penicillin g",),
            id="given RxNorm 7980 then penicillin G",
        ),
        pytest.param(
            (Coding("urn:oid:2.16.840.1.113883.6.88", "7980"),),
            ("penicillin g",),
            id="given the RxNorm OID as system then penicillin G",
        ),
        pytest.param(
            (Coding(RXNORM, "10831"),),
            ("sulfamethoxazole", "trimethoprim"),
            id="given the RxNorm multi-ingredient code 10831 then both ingredients",
        ),
        pytest.param(
            (Coding(NDC, "0206-8862-02"),),
            ("piperacillin", "tazobactam"),
            id="given the Zosyn NDC then piperacillin and tazobactam",
        ),
        pytest.param(
            (Coding(NDC, "00206886202"),),
            ("piperacillin", "tazobactam"),
            id="given the same NDC as 11 digits then the same ingredients",
        ),
        pytest.param(
            (Coding(SNOMED, "735029006"),),
            ("shellfish",),
            id="given the SNOMED shellfish substance then shellfish",
        ),
        pytest.param(
            (Coding("http://example.org/unknown", "1"), Coding(RXNORM, "1191")),
            ("aspirin",),
            id="given an unknown coding beside a known one then the known one wins",
        ),
    ],
)
def test_codes_resolve_without_text(
    knowledge: BundledKnowledge, codes: tuple[Coding, ...], ingredients: tuple[str, ...]
) -> None:
    resolution = knowledge.resolve("", codes)

    assert resolution.ingredients == ingredients
    assert resolution.resolved


@pytest.mark.parametrize(
    ("text", "ingredients"),
    [
        pytest.param("rxnorm:723", ("amoxicillin",), id="given rxnorm:723"),
        pytest.param("RxNorm 723", ("amoxicillin",), id="given RxNorm 723"),
        pytest.param("RXCUI 723", ("amoxicillin",), id="given RXCUI 723"),
        pytest.param("rxnorm|723", ("amoxicillin",), id="given rxnorm|723"),
        pytest.param("RxCUI: 7980", ("penicillin g",), id="given RxCUI: 7980"),
        pytest.param(
            "NDC 0206-8862-02", ("piperacillin", "tazobactam"), id="given an NDC with hyphens"
        ),
    ],
)
def test_a_text_that_is_only_a_code_resolves_as_the_code(
    knowledge: BundledKnowledge, text: str, ingredients: tuple[str, ...]
) -> None:
    resolution = knowledge.resolve(text)

    assert (resolution.ingredients, resolution.resolved) == (ingredients, True)


@pytest.mark.parametrize(
    ("text", "ingredients", "classes"),
    [
        pytest.param("308182", ("amoxicillin",), (), id="given an RxNorm clinical drug code"),
        pytest.param("8339", ("piperacillin",), (), id="given a four-digit RxNorm code"),
        pytest.param(
            " 91936005 ", (), ("penicillins",), id="given a SNOMED CT allergy finding code"
        ),
        pytest.param("716186003", (), ("no_known_allergy",), id="given a SNOMED CT statement"),
    ],
)
def test_a_text_that_is_only_a_number_one_system_lists_resolves_as_that_code(
    knowledge: BundledKnowledge,
    text: str,
    ingredients: tuple[str, ...],
    classes: tuple[str, ...],
) -> None:
    resolution = knowledge.resolve(text)

    assert resolution.ingredients == ingredients
    assert set(classes) <= set(resolution.classes)
    assert resolution.resolved


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("723", id="given three digits then never a code (a strength)"),
        pytest.param("99999999", id="given a number no system lists"),
    ],
)
def test_a_number_that_is_no_listed_code_stays_unverified(
    knowledge: BundledKnowledge, text: str
) -> None:
    verdict = knowledge.cross_reactivity(text, "amoxicillin")

    assert verdict.level is MatchLevel.UNVERIFIED


@pytest.mark.parametrize(
    ("traditional", "simplified"),
    [
        pytest.param("青黴素過敏", "青霉素过敏", id="given penicillin allergy"),
        pytest.param("對頭孢類過敏", "对头孢类过敏", id="given cephalosporins"),
        pytest.param("卡馬西平", "卡马西平", id="given carbamazepine"),
        pytest.param("無藥物過敏史", "无药物过敏史", id="given no drug allergy"),
        pytest.param("複方磺胺甲噁唑", "复方磺胺甲噁唑", id="given co-trimoxazole"),
    ],
)
def test_traditional_chinese_reads_as_the_simplified_name(
    knowledge: BundledKnowledge, traditional: str, simplified: str
) -> None:
    by_traditional = knowledge.resolve(traditional)
    by_simplified = knowledge.resolve(simplified)

    assert (by_traditional.ingredients, by_traditional.classes) == (
        by_simplified.ingredients,
        by_simplified.classes,
    )
    assert by_traditional.resolved
    assert by_traditional.ingredients or by_traditional.classes


@pytest.mark.parametrize(
    ("text", "unrecognised"),
    [
        pytest.param(
            "rxnorm:99999999",
            "http://www.nlm.nih.gov/research/umls/rxnorm|99999999",
            id="given an unknown written code then the code is named",
        ),
        pytest.param(
            "rxnorm 723 tablets please", "rxnorm", id="given more than a code then read as words"
        ),
    ],
)
def test_a_written_code_that_resolves_nothing_stays_unverified_naming_it(
    knowledge: BundledKnowledge, text: str, unrecognised: str
) -> None:
    verdict = knowledge.cross_reactivity("penicillin", text)

    assert verdict.level is MatchLevel.UNVERIFIED
    assert unrecognised in verdict.reason


def test_unknown_code_falls_back_to_text(knowledge: BundledKnowledge) -> None:
    resolution = knowledge.resolve("Amoxicillin 500 MG", (Coding(RXNORM, "999999999"),))

    assert resolution.ingredients == ("amoxicillin",)
    assert resolution.resolved


@pytest.mark.parametrize(
    ("text", "codes", "ingredients", "resolved"),
    [
        pytest.param(
            "Home med #3",
            (Coding(RXNORM, "999999991", "amoxicillin 500 MG Oral Capsule"),),
            ("amoxicillin",),
            True,
            id="given text naming nothing then an unknown code's display names the drug",
        ),
        pytest.param(
            "",
            (Coding(SNOMED, "999999992"), Coding(RXNORM, "999999993", "Naproxen sodium 220 MG")),
            ("naproxen",),
            True,
            id="given no text then the coding with a display names it",
        ),
        pytest.param(
            "Home med #3",
            (Coding(RXNORM, "999999994", "ibuprofen xyzzy"),),
            ("ibuprofen",),
            False,
            id="given a display read in part then what it names, not resolved",
        ),
        pytest.param(
            "Cefalexin 500 MG",
            (Coding(RXNORM, "999999995", "amoxicillin 500 MG Oral Capsule"),),
            ("amoxicillin", "cephalexin"),
            True,
            id="given text and an unknown code's display naming other drugs then both are read",
        ),
        pytest.param(
            "Amoxicillin 250mg caps",
            (Coding(RXNORM, "999999996", "amoxicillin 500 MG Oral Capsule"),),
            ("amoxicillin",),
            True,
            id="given text and an unknown code's display naming one drug then it is read once",
        ),
        pytest.param(
            "Home med #3",
            (Coding(RXNORM, "999999996", "xyzzy"),),
            (),
            False,
            id="given a display naming nothing either then unresolved",
        ),
    ],
)
def test_unknown_codes_displays_are_read_when_the_text_names_nothing_or_another_drug(
    knowledge: BundledKnowledge,
    text: str,
    codes: tuple[Coding, ...],
    ingredients: tuple[str, ...],
    resolved: bool,
) -> None:
    resolution = knowledge.resolve(text, codes)

    assert resolution.ingredients == ingredients
    assert resolution.resolved is resolved


def test_an_allergy_coded_by_an_unknown_code_is_judged_by_its_display(
    knowledge: BundledKnowledge,
) -> None:
    allergy = (Coding(SNOMED, "999999997", "Allergy to penicillin"),)

    judged = knowledge.cross_reactivity("Drug allergy - see chart", "amoxicillin", allergy)

    assert judged.level is MatchLevel.SAME_CLASS


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("xyzzy", id="given gibberish then unresolved"),
        pytest.param("", id="given empty text then unresolved"),
        pytest.param("500 mg oral tablet", id="given only a strength and form then unresolved"),
        pytest.param("火星药", id="given unknown Chinese characters then unresolved"),
        pytest.param("MS 2 mg IV", id="given MS (morphine or magnesium sulfate) then unresolved"),
    ],
)
def test_unknown_text_is_unresolved(knowledge: BundledKnowledge, text: str) -> None:
    resolution = knowledge.resolve(text)

    assert not resolution.resolved
    assert resolution.ingredients == ()


@pytest.mark.parametrize(
    ("text", "ingredients"),
    [
        ("MTX 15 mg weekly", ("methotrexate",)),
        ("NTG 0.4 mg SL", ("nitroglycerin",)),
        ("GTN spray", ("nitroglycerin",)),
        ("MgSO4 2 g IV", ("magnesium sulfate",)),
        ("MSO4 2 mg IV", ("morphine",)),
        ("FeSO4 325 mg", ("ferrous sulfate",)),
        ("NaHCO3 650 mg", ("sodium bicarbonate",)),
        ("6-MP 50 mg", ("mercaptopurine",)),
        ("HCQ 200 mg", ("hydroxychloroquine",)),
        ("amox-clav 875", ("amoxicillin", "clavulanate")),
        ("clarithromycin 500 mg PO BD x7/7", ("clarithromycin",)),
        ("doxycycline 100mg OD x5/7", ("doxycycline",)),
        ("levofloxacin 500 mg PO OD x7d", ("levofloxacin",)),
        ("vancomycin 1g IV q12h (trough 15-20)", ("vancomycin",)),
        ("gentamicin 5mg/kg IV OD as per nomogram", ("gentamicin",)),
        ("levetiracetam 500mg BD PO, titrate weekly", ("levetiracetam",)),
        ("cefazolin 2g IV at induction", ("cefazolin",)),
        ("gliclazide 80mg BD with meals", ("gliclazide",)),
        ("Fluarix Tetra 0.5ml IM single dose", ("influenza vaccine", "polysorbate 80")),
    ],
)
def test_common_order_abbreviations_resolve(
    knowledge: BundledKnowledge, text: str, ingredients: tuple[str, ...]
) -> None:
    resolution = knowledge.resolve(text)

    assert resolution.resolved
    assert resolution.ingredients == ingredients


@pytest.mark.parametrize(
    ("allergy", "drug", "level"),
    [
        ("sulfa", "FeSO4 325 mg", MatchLevel.NONE),
        ("sulfa drugs", "MgSO4 2 g IV", MatchLevel.NONE),
        ("morphine", "MSO4 2 mg IV", MatchLevel.SAME_INGREDIENT),
        ("penicillin", "amox-clav 875", MatchLevel.SAME_CLASS),
    ],
)
def test_abbreviated_orders_are_judged_like_their_names(
    knowledge: BundledKnowledge, allergy: str, drug: str, level: MatchLevel
) -> None:
    assert knowledge.cross_reactivity(allergy, drug).level is level


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("Bayer Aspirin PM", id="given an unlisted PM variant of a brand"),
        pytest.param("Benadryl-D", id="given an unlisted -D variant of a brand"),
        pytest.param("Diovan Plus 160/12.5", id="given an unlisted Plus variant of a brand"),
        pytest.param("aspirin plus C", id="given plus naming an ingredient no term knows"),
    ],
)
def test_a_suffix_that_adds_an_ingredient_leaves_an_unlisted_brand_unresolved(
    knowledge: BundledKnowledge, text: str
) -> None:
    resolution = knowledge.resolve(text)

    assert resolution.ingredients
    assert not resolution.resolved


@pytest.mark.parametrize(
    ("text", "ingredients", "unrecognised"),
    [
        pytest.param(
            "Bengay",
            ("menthol",),
            "bengay (a brand whose products differ in composition: name the product)",
            id="given Bengay then its menthol and the brand unread",
        ),
        pytest.param(
            "泰诺",
            ("acetaminophen",),
            "泰诺 (a brand whose products differ in composition: name the product)",
            id="given 泰诺 then its paracetamol and the brand unread",
        ),
        pytest.param(
            "Bengay menthol",
            ("menthol",),
            "bengay (a brand whose products differ in composition: name the product)",
            id="given Bengay then a name all its products carry then the brand unread",
        ),
        pytest.param(
            "Vicks",
            (),
            "vicks (a brand whose products differ in composition: name the product)",
            id="given Vicks, whose products share nothing, then nothing and the brand unread",
        ),
    ],
)
def test_a_brand_whose_products_differ_reads_their_common_ingredients_but_not_the_product(
    knowledge: BundledKnowledge, text: str, ingredients: tuple[str, ...], unrecognised: str
) -> None:
    """Bengay Vanishing Scent is menthol alone, Bengay Ultra Strength adds methyl salicylate
    and camphor; 泰诺林 is paracetamol alone, 泰诺 酚麻美敏 adds three more: the brand names no
    one product, so an allergy to an ingredient some of them carry is `unverified`."""
    resolution = knowledge.resolve(text)

    assert (resolution.ingredients, resolution.resolved) == (ingredients, False)
    assert resolution.unrecognised == (unrecognised,)
    assert knowledge.cross_reactivity("methyl salicylate", "Bengay").level is (
        MatchLevel.UNVERIFIED
    )


@pytest.mark.parametrize(
    ("text", "ingredients"),
    [
        pytest.param(
            "Bengay Ultra Strength",
            ("camphor", "menthol", "methyl salicylate"),
            id="given a Bengay product then its own ingredients",
        ),
        pytest.param("泰诺林", ("acetaminophen",), id="given 泰诺林 then paracetamol alone"),
        pytest.param(
            "泰诺酚麻美敏片",
            ("acetaminophen", "chlorpheniramine", "dextromethorphan", "pseudoephedrine"),
            id="given 泰诺 酚麻美敏 then its four ingredients",
        ),
        pytest.param(
            "Vicks NyQuil",
            ("acetaminophen", "dextromethorphan", "doxylamine"),
            id="given a brand family then a product name then the product",
        ),
        pytest.param(
            "Vicks VapoRub",
            ("camphor", "eucalyptus oil", "menthol"),
            id="given Vicks VapoRub then its three ingredients",
        ),
    ],
)
def test_a_product_of_a_brand_family_resolves_completely(
    knowledge: BundledKnowledge, text: str, ingredients: tuple[str, ...]
) -> None:
    resolution = knowledge.resolve(text)

    assert (resolution.ingredients, resolution.resolved) == (ingredients, True)


@pytest.mark.parametrize(
    ("text", "ingredients"),
    [
        pytest.param(
            "amoxicillin plus clavulanate",
            ("amoxicillin", "clavulanate"),
            id="given plus between two names then both",
        ),
        pytest.param(
            "Nurofen Plus", ("codeine", "ibuprofen"), id="given a Plus brand that is a term"
        ),
    ],
)
def test_plus_joining_names_or_naming_a_known_product_resolves(
    knowledge: BundledKnowledge, text: str, ingredients: tuple[str, ...]
) -> None:
    resolution = knowledge.resolve(text)

    assert (resolution.ingredients, resolution.resolved) == (ingredients, True)


@pytest.mark.parametrize(
    ("text", "ingredients", "unrecognised"),
    [
        pytest.param("Pen, sulfa", (), "pen", id="given pen alone in a list item"),
        pytest.param("Pen + codeine", ("codeine",), "pen", id="given pen alone before a +"),
        pytest.param(
            "penicillin; vaccines", (), "vaccines", id="given vaccines alone in a list item"
        ),
        pytest.param(
            "insulin glargine 100 unit/mL pen",
            ("insulin glargine",),
            None,
            id="given pen qualifying a name then noise",
        ),
    ],
)
def test_a_qualifier_is_noise_beside_a_name_and_unrecognised_alone(
    knowledge: BundledKnowledge, text: str, ingredients: tuple[str, ...], unrecognised: str | None
) -> None:
    resolution = knowledge.resolve(text)

    assert resolution.ingredients == ingredients
    assert resolution.resolved is (unrecognised is None)
    if unrecognised is not None:
        reason = knowledge.cross_reactivity(text, "vancomycin").reason
        assert f"unrecognised: {unrecognised}" in reason


def test_a_loose_grouping_is_no_class_word_so_its_members_are_never_judged_none(
    knowledge: BundledKnowledge,
) -> None:
    verdict = knowledge.cross_reactivity("Anticonvulsants", "phenytoin")

    assert verdict.level is MatchLevel.UNVERIFIED


def test_partly_known_text_keeps_what_it_found_but_is_not_resolved(
    knowledge: BundledKnowledge,
) -> None:
    resolution = knowledge.resolve("amoxicillin with frobnium")

    assert resolution.ingredients == ("amoxicillin",)
    assert not resolution.resolved


def test_classes_hold_only_classes_that_imply_a_relation(knowledge: BundledKnowledge) -> None:
    resolution = knowledge.resolve("Amoxicillin 500 MG Oral Tablet")

    assert resolution.classes == ("aminopenicillins", "penicillins")


def test_frequently_prescribed_drugs_resolve(knowledge: BundledKnowledge) -> None:
    names = common_prescriptions()

    unresolved = [name for name in names if not knowledge.resolve(name).resolved]

    assert len(names) >= 180
    assert unresolved == []


def test_commonly_recorded_allergies_resolve(knowledge: BundledKnowledge) -> None:
    entries = common_allergies()

    unresolved = [entry for entry in entries if not knowledge.resolve(entry).resolved]

    assert len(entries) >= 100
    assert unresolved == []


SYSTEM_URIS_BY_NAME = {"rxnorm": RXNORM, "snomed": SNOMED}


def test_synthea_module_codings_resolve_by_coding_and_by_code_alone(
    knowledge: BundledKnowledge,
) -> None:
    rows = synthea_module_codings()

    codings = [
        Coding(SYSTEM_URIS_BY_NAME[row["system"]], row["code"], row["display"]) for row in rows
    ]
    unresolved = [c for c in codings if not knowledge.resolve("", (c,)).resolved]
    unresolved_codes = [
        c.code for c in codings if not knowledge.resolve("", (Coding(c.system, c.code),)).resolved
    ]

    assert len(rows) >= 430
    assert unresolved == []
    assert unresolved_codes == []


@pytest.mark.parametrize(
    ("display", "ingredients"),
    [
        pytest.param(
            "Breath-Actuated 120 ACTUAT beclomethasone dipropionate 0.04 MG/ACTUAT Metered Dose"
            " Inhaler [Qvar]",
            ("beclomethasone",),
            id="given a breath-actuated inhaler",
        ),
        pytest.param(
            "enalapril maleate 1 MG/ML Oral Solution [Epaned]", ("enalapril",), id="given Epaned"
        ),
        pytest.param(
            "lisinopril 1 MG/ML Oral Solution [Qbrelis]", ("lisinopril",), id="given Qbrelis"
        ),
    ],
)
def test_synthea_displays_that_were_unverified_resolve(
    knowledge: BundledKnowledge, display: str, ingredients: tuple[str, ...]
) -> None:
    resolution = knowledge.resolve(display)

    assert resolution.resolved
    assert resolution.ingredients == ingredients


@pytest.mark.parametrize(
    ("text", "ingredients", "classes"),
    [
        pytest.param("Zoloft 50 mg", ("sertraline",), ("ssris",), id="given an SSRI brand"),
        pytest.param(
            "Eliquis",
            ("apixaban",),
            ("direct_oral_anticoagulants", "factor_xa_inhibitors"),
            id="given a DOAC",
        ),
        pytest.param(
            "Flomax 0.4 mg",
            ("tamsulosin",),
            ("alpha1_blockers",),
            id="given tamsulosin then an alpha blocker",
        ),
        pytest.param("lithium 300 mg", ("lithium carbonate",), (), id="given lithium"),
    ],
)
def test_common_drugs_resolve_to_their_classes(
    knowledge: BundledKnowledge, text: str, ingredients: tuple[str, ...], classes: tuple[str, ...]
) -> None:
    resolution = knowledge.resolve(text)

    assert resolution.ingredients == ingredients
    assert resolution.classes == classes


@pytest.mark.parametrize(
    ("text", "misspelt", "offered"),
    [
        pytest.param("amoxicilln 500 mg", "amoxicilln", "amoxicillin", id="given amoxicilln"),
        pytest.param("Ibuprofan", "ibuprofan", "ibuprofen", id="given ibuprofan"),
        pytest.param("cephalexn capsule", "cephalexn", "cephalexin", id="given cephalexn"),
    ],
)
def test_a_misspelt_drug_stays_unverified_and_the_reason_offers_the_closest_name(
    knowledge: BundledKnowledge, text: str, misspelt: str, offered: str
) -> None:
    verdict = knowledge.cross_reactivity("penicillin", text)

    assert verdict.level is MatchLevel.UNVERIFIED
    assert verdict.ingredients == ()
    assert f"{misspelt} (did you mean {offered}" in verdict.reason


def test_gibberish_gets_no_suggestion(knowledge: BundledKnowledge) -> None:
    verdict = knowledge.cross_reactivity("penicillin", "flurbleglorp")

    assert "did you mean" not in verdict.reason


def test_suggestions_are_the_same_in_every_process() -> None:
    script = (
        "from rules.knowledge.bundled import load_bundled_knowledge as k;"
        "print(k().cross_reactivity('aspirn', 'amoxicilln / ibuprofan').reason)"
    )
    reasons = outputs_under_hash_seeds(script, (1, 2, 3))

    assert len(reasons) == 1
    assert "did you mean aspirin" in reasons.pop()


@pytest.mark.parametrize(
    ("text", "ingredient"),
    [("asprin", "aspirin"), ("codiene", "codeine"), ("amoxacillin 500 mg", "amoxicillin")],
)
def test_a_listed_misspelling_is_read_as_its_drug(
    knowledge: BundledKnowledge, text: str, ingredient: str
) -> None:
    assert knowledge.resolve(text).ingredients == (ingredient,)


def test_a_listed_misspelling_is_never_offered_as_a_suggestion(
    knowledge: BundledKnowledge,
) -> None:
    reason = knowledge.cross_reactivity("penicillin", "ibuprofan").reason

    assert "(did you mean ibuprofen?)" in reason


@pytest.mark.parametrize(
    ("text", "ingredients"),
    [
        pytest.param("amoxi\u200bcillin 500 mg", ("amoxicillin",), id="a zero-width space"),
        pytest.param("amoxi\u00adcillin", ("amoxicillin",), id="a soft hyphen"),
        pytest.param("\u200eibuprofen\u200f", ("ibuprofen",), id="direction marks"),
        pytest.param("\ufeffnaproxen", ("naproxen",), id="a byte order mark"),
    ],
)
def test_invisible_characters_inside_a_name_do_not_hide_it(
    knowledge: BundledKnowledge, text: str, ingredients: tuple[str, ...]
) -> None:
    """A name pasted with a zero-width space inside was unverified: a critical alert became a
    warning whose title still read "amoxicillin" on screen."""
    resolution = knowledge.resolve(text)
    assert (resolution.ingredients, resolution.resolved) == (ingredients, True)
