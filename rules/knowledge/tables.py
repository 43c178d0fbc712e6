"""Loads and validates the versioned data files shipped in `rules/knowledge/data/`.

Concept ids are ingredient names ("amoxicillin") or class ids prefixed with `class:`
("class:penicillins"). Every reference in the files is checked at load time, and every file
must match the SHA-256 recorded in `manifest.json`, so an edited table cannot ship without a new
manifest (and hence a visible version change).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Final

from rules.knowledge.errors import KnowledgeDataError
from rules.knowledge.model import Coding, MatchLevel
from rules.knowledge.normalise import fold, normalise_code, tokens
from rules.knowledge.side_chains import SideChainTable, side_chain_table

CLASS_PREFIX = "class:"
DATA_PACKAGE = "rules.knowledge"
MANIFEST = "manifest.json"
SYSTEMS: Mapping[str, str] = {
    "http://www.nlm.nih.gov/research/umls/rxnorm": "rxnorm",
    "urn:oid:2.16.840.1.113883.6.88": "rxnorm",
    "rxnorm": "rxnorm",
    "rxcui": "rxnorm",
    "http://hl7.org/fhir/sid/ndc": "ndc",
    "urn:oid:2.16.840.1.113883.6.69": "ndc",
    "ndc": "ndc",
    "http://snomed.info/sct": "snomed",
    "urn:oid:2.16.840.1.113883.6.96": "snomed",
    "snomed": "snomed",
    "snomed-ct": "snomed",
    "http://hl7.org/fhir/sid/cvx": "cvx",
    "urn:oid:2.16.840.1.113883.12.292": "cvx",
    "cvx": "cvx",
}


def system_key(system: str) -> str:
    """A code system as `SYSTEMS` knows it: folded to lower case, without surrounding white
    space or a trailing slash (`http://snomed.info/sct/`, as some producers write it, is SNOMED
    CT), `https` read as `http` (the canonical URIs are `http`, some producers write `https`),
    and a SNOMED CT edition URI (`http://snomed.info/sct/731000124108`, which FHIR puts in
    `version`, not `system`) read as SNOMED CT."""
    key = _HTTPS.sub("http://", fold(system).strip().rstrip("/"))
    return SNOMED_URI if _SNOMED_EDITION.match(key) else key


SNOMED_URI: Final = "http://snomed.info/sct"
_HTTPS: Final = re.compile(r"^https://")
_SNOMED_EDITION: Final = re.compile(r"^http://snomed\.info/sct/\d+(?:/version/\d+)?$")


SYSTEM_URIS: Mapping[str, str] = {
    "rxnorm": "http://www.nlm.nih.gov/research/umls/rxnorm",
    "ndc": "http://hl7.org/fhir/sid/ndc",
    "snomed": "http://snomed.info/sct",
    "cvx": "http://hl7.org/fhir/sid/cvx",
}


def parse_coding(text: str) -> Coding:
    """A coding written `system|code` or `system|code|display`: `system` a short name (rxnorm,
    ndc, snomed, cvx, or another spelling `SYSTEMS` knows) or a code system URI
    (`http://snomed.info/sct|91936005|Allergy to penicillin`); with a short name, also
    `system:code` (`rxnorm:723`). A URI keeps its own colons (`urn:oid:...|723`)."""
    system, separator, rest = (part.strip() for part in text.partition("|"))
    if not separator:
        system, separator, rest = (part.strip() for part in text.partition(":"))
        if SYSTEMS.get(system_key(system)) not in SYSTEM_URIS:
            separator = ""
    code, _, display = (part.strip() for part in rest.partition("|"))
    short_name = SYSTEMS.get(system_key(system))
    uri = SYSTEM_URIS.get(short_name or "")
    if uri is None and ":" in system:
        uri = system
    if not separator or not code or uri is None:
        short_names = ", ".join(SYSTEM_URIS)
        raise ValueError(
            f"{text!r} is not system|code[|display] or system:code (system: {short_names}, "
            "or a code system URI before a |)"
        )
    return Coding(uri, code, display or None)


_WRITTEN_CODE: Final = re.compile(
    r"(?P<system>rxnorm|rxcui|ndc|snomed(?:[\s-]+ct)?|cvx)\s*(?:[:|#=]\s*|\s+)"
    r"(?P<code>\d(?:[\d-]*\d)?)"
)


def written_coding(text: str) -> Coding | None:
    """The coding a text spells when it is nothing but a code of a known system written as
    people write one in free text ("rxnorm:723", "RxNorm 723", "RXCUI 723", "rxnorm|723",
    "NDC 0206-8862-02"); None for any other text."""
    found = _WRITTEN_CODE.fullmatch(fold(text).strip())
    if found is None:
        return None
    short_name = SYSTEMS[re.sub(r"[\s-]+", "-", found["system"])]
    return Coding(SYSTEM_URIS[short_name], found["code"])


CROSS_REACTIVITY_LEVELS = frozenset(
    {
        MatchLevel.SAME_CLASS,
        MatchLevel.PARTIAL,
        MatchLevel.LOW_RISK,
        MatchLevel.NONE,
    }
)


@dataclass(frozen=True, slots=True)
class DrugClass:
    class_id: str
    label: str
    parent: str | None
    shared_level: MatchLevel | None


@dataclass(frozen=True, slots=True)
class Ingredient:
    name: str
    kind: str
    classes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CrossReactivityRow:
    allergen: str
    drug: str
    level: MatchLevel
    reason: str
    source: str


@dataclass(frozen=True, slots=True)
class TherapeuticGroup:
    """Classes whose drugs duplicate one another's therapy (two anticoagulants, an ACE
    inhibitor with an angiotensin receptor blocker) without sharing a class."""

    group_id: str
    label: str
    classes: tuple[str, ...]
    source: str


@dataclass(frozen=True, slots=True)
class ProductForm:
    """A dose form of an ingredient whose every marketed product carries an allergen as its
    vehicle or excipient (progesterone capsules: peanut oil)."""

    ingredient: str
    forms: frozenset[str]
    contains: str
    source: str


@dataclass(frozen=True)
class KnowledgeTables:
    version: str
    classes: Mapping[str, DrugClass]
    groups: Mapping[str, TherapeuticGroup]
    ingredients: Mapping[str, Ingredient]
    lexicon: Mapping[tuple[str, ...], tuple[str, ...]]
    codes: Mapping[tuple[str, str], tuple[str, ...]]
    rows: tuple[CrossReactivityRow, ...]
    site_specific: frozenset[str] = frozenset()
    """Classes whose local forms act where applied (`site_specific_classes.csv`)."""
    qualifiers: frozenset[tuple[str, ...]] = frozenset()
    """Noise words of category `qualifier` ("pen", "dye", "antibiotics"): noise next to a
    name ("insulin pen"), an unrecognised item of a list when alone ("Pen, sulfa")."""
    allergy_categories: Mapping[str, str] = field(default_factory=dict)
    """Class id -> the FHIR allergy category of its substances (`allergy_categories.csv`)."""
    side_chains: SideChainTable = field(default_factory=lambda: SideChainTable({}, {}))
    """The cephalosporins' side chains and what sharing them implies (`side_chains.csv`,
    `side_chain_levels.csv`)."""
    reactions: frozenset[tuple[str, ...]] = frozenset()
    """The reaction words of `noise_words.csv` (category `reaction`: "nausea", "hives")."""
    side_effects: Mapping[tuple[str, ...], frozenset[str]] = field(default_factory=dict)
    """Reaction word -> the concepts it is a known side effect of, `ANY_DRUG` for any
    (`side_effects.csv`)."""
    product_forms: Mapping[str, tuple[ProductForm, ...]] = field(default_factory=dict)
    """Ingredient -> the dose forms whose every product carries an allergen
    (`product_forms.csv`)."""
    misspellings: frozenset[tuple[str, ...]] = frozenset()
    """The terms of kind `misspelling` ("asprin"): read, never offered as a suggestion."""
    ambiguous: frozenset[tuple[str, ...]] = frozenset()
    """The noise words of category `ambiguous` ("Midol", "Dimetapp", "vitamin B"): names of
    several products or substances, read as no concept on purpose."""
    brand_families: frozenset[tuple[str, ...]] = frozenset()
    """The terms of kind `brand_family` ("Bengay", 泰诺): a brand whose products differ in
    composition, read as the ingredients every one of them contains, never as a complete
    name (the product must be named)."""
    inflected: frozenset[str] = frozenset()
    """One-word generic and class names (ingredients, class words, curated synonyms; not
    brands): the names another language's or the plural form of which is read as them
    (`Recogniser`: "Lamotrigin", "pénicillines")."""
    leading: Mapping[tuple[str, ...], tuple[str, ...]] = field(default_factory=dict)
    """The terms of kind `leading` ("Td": tetanus and diphtheria toxoids), whose words mean
    something else inside a name (TD, the transdermal route): read only at the start of a
    list item that names nothing else, never in the lexicon."""


def load_tables() -> KnowledgeTables:
    """Read, verify and index every bundled data file."""
    version, digests = read_manifest()
    texts = {name: _verified_text(name, digest) for name, digest in digests.items()}
    classes, ingredients, known = core_tables(texts)
    reactions = noise_words(texts, REACTION)
    return KnowledgeTables(
        version=version,
        classes=classes,
        groups=_groups(_records(texts["therapeutic_groups.csv"]), classes),
        ingredients=ingredients,
        lexicon=build_lexicon(texts, ingredients, known, classes=classes),
        codes=_codes(texts, known),
        rows=_rows(_records(texts["cross_reactivity.csv"]), known),
        site_specific=_site_specific(_records(texts["site_specific_classes.csv"]), classes),
        qualifiers=noise_words(texts, QUALIFIER),
        allergy_categories=_allergy_categories(_records(texts["allergy_categories.csv"]), classes),
        side_chains=side_chain_table(
            _records(texts["side_chains.csv"]),
            _records(texts["side_chain_levels.csv"]),
            frozenset(ingredients),
        ),
        reactions=reactions,
        side_effects=_side_effects(_records(texts["side_effects.csv"]), reactions, known),
        product_forms=_product_forms(_records(texts["product_forms.csv"]), texts, ingredients),
        misspellings=_terms_of_kind(texts, MISSPELLING),
        brand_families=_terms_of_kind(texts, BRAND_FAMILY),
        ambiguous=noise_words(texts, AMBIGUOUS),
        leading=dict(_terms(texts["terms.csv"], known, "term", LEADING)),
        inflected=_generic_names(texts, ingredients, classes),
    )


MISSPELLING: Final = "misspelling"
BRAND_FAMILY: Final = "brand_family"
LEADING: Final = "leading"
SYNONYM: Final = "synonym"
CLASS_WORD: Final = "class_word"


def _generic_names(
    texts: Mapping[str, str],
    ingredients: Mapping[str, Ingredient],
    classes: Mapping[str, DrugClass],
) -> frozenset[str]:
    """The one-word ingredient names, class words and curated synonyms and class words."""
    names = [tokens(name) for name in ingredients]
    names.extend(words for words, _ in class_words(classes))
    names.extend(_terms_of_kind(texts, SYNONYM) | _terms_of_kind(texts, CLASS_WORD))
    return frozenset(words[0] for words in names if len(words) == 1)


def _terms_of_kind(texts: Mapping[str, str], kind: str) -> frozenset[tuple[str, ...]]:
    """The terms of `terms.csv` of one kind, as token tuples."""
    return frozenset(
        tokens(record["term"]) for record in _records(texts["terms.csv"]) if record["kind"] == kind
    )


QUALIFIER: Final = "qualifier"
AMBIGUOUS: Final = "ambiguous"
REACTION: Final = "reaction"
ANY_DRUG: Final = "*"


def noise_words(texts: Mapping[str, str], category: str) -> frozenset[tuple[str, ...]]:
    """The noise words of one category: `qualifier` (words that qualify a name and mean
    something of their own alone), `reaction` ("nausea", "red man syndrome", "hives")."""
    return frozenset(
        tokens(record["word"])
        for record in _records(texts["noise_words.csv"])
        if record["category"] == category
    )


def _side_effects(
    records: Iterable[dict[str, str]],
    reactions: frozenset[tuple[str, ...]],
    known: frozenset[str],
) -> dict[tuple[str, ...], frozenset[str]]:
    found: dict[tuple[str, ...], set[str]] = {}
    for record in records:
        reaction, concept = tokens(record["reaction"]), record["concept"]
        if reaction not in reactions or not record["source"]:
            raise KnowledgeDataError(
                f"side effect {record['reaction']}: needs a reaction word of noise_words.csv"
                " and a source"
            )
        if concept != ANY_DRUG:
            _checked((concept,), known, f"side effect {record['reaction']}")
        found.setdefault(reaction, set()).add(concept)
    return {reaction: frozenset(concepts) for reaction, concepts in found.items()}


def _product_forms(
    records: Iterable[dict[str, str]],
    texts: Mapping[str, str],
    ingredients: Mapping[str, Ingredient],
) -> dict[str, tuple[ProductForm, ...]]:
    noise = {record["word"] for record in _records(texts["noise_words.csv"])}
    found: dict[str, list[ProductForm]] = {}
    for record in records:
        forms = frozenset(_split(record["forms"]))
        where = f"product form {record['ingredient']}/{record['contains']}"
        if not forms or not forms <= noise or not record["source"]:
            raise KnowledgeDataError(f"{where}: needs dose-form noise words and a source")
        if record["ingredient"] not in ingredients or record["contains"] not in ingredients:
            raise KnowledgeDataError(f"{where}: needs two known ingredients")
        form = ProductForm(record["ingredient"], forms, record["contains"], record["source"])
        found.setdefault(form.ingredient, []).append(form)
    return {ingredient: tuple(forms) for ingredient, forms in found.items()}


def core_tables(
    texts: Mapping[str, str],
) -> tuple[dict[str, DrugClass], dict[str, Ingredient], frozenset[str]]:
    """Classes, ingredients and the set of every valid concept id."""
    classes = _classes(_records(texts["classes.csv"]))
    ingredients = _ingredients(_records(texts["ingredients.csv"]), classes)
    known = frozenset(ingredients) | {CLASS_PREFIX + class_id for class_id in classes}
    return classes, ingredients, known


def file_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def data_text(name: str) -> str:
    try:
        return (files(DATA_PACKAGE) / "data" / name).read_text(encoding="utf-8")
    except FileNotFoundError as missing:
        raise KnowledgeDataError(f"bundled data file {name} is missing") from missing


def read_manifest() -> tuple[str, dict[str, str]]:
    """The release name ("uac-bundled-2026.11") and the SHA-256 of every data file."""
    manifest = json.loads(data_text(MANIFEST))
    try:
        version = f"{manifest['name']}-{manifest['release']}"
        digests = {str(name): str(digest) for name, digest in manifest["files"].items()}
    except (KeyError, TypeError, AttributeError) as malformed:
        raise KnowledgeDataError("manifest.json needs name, release and files") from malformed
    return version, digests


def _verified_text(name: str, digest: str) -> str:
    text = data_text(name)
    if file_digest(text) != digest:
        raise KnowledgeDataError(f"{name} does not match its SHA-256 in manifest.json")
    return text


def _records(text: str) -> Iterator[dict[str, str]]:
    lines = (line for line in io.StringIO(text) if not line.startswith("#"))
    yield from csv.DictReader(lines)


def _split(cell: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in cell.split(";") if part.strip())


def _classes(records: Iterable[dict[str, str]]) -> dict[str, DrugClass]:
    classes = {
        record["class_id"]: DrugClass(
            class_id=record["class_id"],
            label=record["label"],
            parent=record["parent"] or None,
            shared_level=MatchLevel(record["shared_level"]) if record["shared_level"] else None,
        )
        for record in records
    }
    for drug_class in classes.values():
        if drug_class.parent is not None and drug_class.parent not in classes:
            raise KnowledgeDataError(f"class {drug_class.class_id}: unknown parent")
    return classes


def _groups(
    records: Iterable[dict[str, str]], classes: Mapping[str, DrugClass]
) -> dict[str, TherapeuticGroup]:
    groups: dict[str, TherapeuticGroup] = {}
    for record in records:
        group = TherapeuticGroup(
            record["group_id"], record["label"], _split(record["classes"]), record["source"]
        )
        unknown = [c for c in group.classes if c not in classes]
        if unknown or not group.classes or not group.source or group.group_id in groups:
            raise KnowledgeDataError(
                f"therapeutic group {group.group_id}: needs known classes, a source and a"
                f" unique id (unknown classes: {unknown})"
            )
        groups[group.group_id] = group
    return groups


def _site_specific(
    records: Iterable[dict[str, str]], classes: Mapping[str, DrugClass]
) -> frozenset[str]:
    found: set[str] = set()
    for record in records:
        class_id = record["class_id"]
        if class_id not in classes or not record["reason"] or not record["source"]:
            raise KnowledgeDataError(
                f"site-specific class {class_id}: needs a known class, a reason and a source"
            )
        found.add(class_id)
    return frozenset(found)


ALLERGY_CATEGORIES: Final = frozenset({"food", "medication", "environment", "biologic"})
"""The FHIR AllergyIntolerance categories."""


def _allergy_categories(
    records: Iterable[dict[str, str]], classes: Mapping[str, DrugClass]
) -> dict[str, str]:
    found: dict[str, str] = {}
    for record in records:
        class_id, category = record["class_id"], record["category"]
        if class_id not in classes or category not in ALLERGY_CATEGORIES or not record["source"]:
            raise KnowledgeDataError(
                f"allergy category of class {class_id}: needs a known class, one of "
                f"{', '.join(sorted(ALLERGY_CATEGORIES))} and a source"
            )
        found[class_id] = category
    return found


def _ingredients(
    records: Iterable[dict[str, str]], classes: Mapping[str, DrugClass]
) -> dict[str, Ingredient]:
    ingredients: dict[str, Ingredient] = {}
    for record in records:
        ingredient = Ingredient(record["ingredient"], record["kind"], _split(record["classes"]))
        if ingredient.name in ingredients:
            raise KnowledgeDataError(f"ingredient {ingredient.name}: listed twice")
        unknown = [c for c in ingredient.classes if c not in classes]
        if unknown:
            raise KnowledgeDataError(f"ingredient {ingredient.name}: unknown classes {unknown}")
        ingredients[ingredient.name] = ingredient
    return ingredients


def _checked(concepts: tuple[str, ...], known: frozenset[str], where: str) -> tuple[str, ...]:
    unknown = [concept for concept in concepts if concept not in known]
    if unknown:
        raise KnowledgeDataError(f"{where}: unknown concepts {unknown}")
    return concepts


def build_lexicon(
    texts: Mapping[str, str],
    ingredients: Mapping[str, Ingredient],
    known: frozenset[str],
    *,
    with_derived: bool = True,
    classes: Mapping[str, DrugClass] | None = None,
) -> dict[tuple[str, ...], tuple[str, ...]]:
    """Token sequence -> concepts; noise words map to no concept.

    Precedence, lowest first: class names (`class_words`), derived synonyms, noise words,
    ingredient names, curated terms. Terms of kind `leading` are read apart (`Recogniser`).
    """
    leading = {term for term, _ in _terms(texts["terms.csv"], known, "term", LEADING)}
    lexicon: dict[tuple[str, ...], tuple[str, ...]] = dict(class_words(classes or {}))
    if with_derived:
        lexicon.update(_terms(texts["derived_terms.csv"], known, "derived term"))
    for record in _records(texts["noise_words.csv"]):
        lexicon[tokens(record["word"])] = ()
    for name in ingredients:
        lexicon[tokens(name)] = (name,)
    lexicon.update(
        (term, concepts)
        for term, concepts in _terms(texts["terms.csv"], known, "term")
        if term not in leading
    )
    lexicon.pop((), None)
    return lexicon


def class_words(
    classes: Mapping[str, DrugClass],
) -> Iterator[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Each class with a `shared_level` (a pharmacological class whose members are curated,
    not a loose grouping such as "anticonvulsants": a class word for a grouping that misses a
    member would judge that member `none` instead of `unverified`) under its id and its label
    as words ("loop diuretics", "beta blockers"), its label without parentheses, and a
    closing one-word parenthesis ("statins"), each also with its last word in the singular ("ACE
    inhibitor", "aminoglycoside"), so that an allergy recorded as a class name resolves to
    the class. Every other table takes precedence."""
    for class_id, drug_class in classes.items():
        if drug_class.shared_level is None:
            continue
        names = {class_id.replace("_", " "), _PARENTHESIS.sub("", drug_class.label)}
        names.update(_ONE_WORD_ASIDE.findall(drug_class.label))
        for name in names:
            words = tokens(name)
            for form in (words, _singular(words)):
                if form:
                    yield form, (CLASS_PREFIX + class_id,)


_PARENTHESIS: Final = re.compile(r"\s*\([^)]*\)")
_ONE_WORD_ASIDE: Final = re.compile(r"\(([\w-]+)\)$")
"""A label's closing parenthesis of one word, another name of the class: "(statins)"."""


def _singular(words: tuple[str, ...]) -> tuple[str, ...]:
    """The words with the last one in the singular, or () when it is not a plain plural."""
    if not words or not words[-1].endswith("s") or words[-1].endswith(("ss", "us", "is")):
        return ()
    return (*words[:-1], words[-1][:-1])


def _terms(
    text: str, known: frozenset[str], where: str, kind: str | None = None
) -> Iterator[tuple[tuple[str, ...], tuple[str, ...]]]:
    """The terms of a table (of one kind only, when `kind` is given) and their concepts."""
    for record in _records(text):
        if kind is not None and record["kind"] != kind:
            continue
        concepts = _checked(_split(record["concepts"]), known, f"{where} {record['term']}")
        yield tokens(record["term"]), concepts


def _codes(
    texts: Mapping[str, str], known: frozenset[str]
) -> dict[tuple[str, str], tuple[str, ...]]:
    codes: dict[tuple[str, str], tuple[str, ...]] = {}
    for record in _records(texts["ingredients.csv"]):
        for rxcui in _split(record["rxnorm"]):
            codes[("rxnorm", normalise_code("rxnorm", rxcui))] = (record["ingredient"],)
    for record in _records(texts["codes.csv"]):
        system = record["system"]
        where = f"code {system}|{record['code']}"
        codes[(system, normalise_code(system, record["code"]))] = _checked(
            _split(record["concepts"]), known, where
        )
    return codes


def _rows(
    records: Iterable[dict[str, str]], known: frozenset[str]
) -> tuple[CrossReactivityRow, ...]:
    rows = []
    for record in records:
        row = CrossReactivityRow(
            allergen=record["allergen"],
            drug=record["drug"],
            level=MatchLevel(record["level"]),
            reason=record["reason"],
            source=record["source"],
        )
        _checked((row.allergen, row.drug), known, f"cross-reactivity row {row.allergen}")
        if row.level not in CROSS_REACTIVITY_LEVELS or not row.source:
            raise KnowledgeDataError(f"cross-reactivity row {row.allergen}/{row.drug}: bad row")
        rows.append(row)
    return tuple(rows)
