"""`DrugKnowledge` backed by the versioned data files shipped in `rules/knowledge/data/`.

The files are read once, at construction, through `importlib.resources`; afterwards every call
is a pure, deterministic lookup (no clock, randomness, network or environment).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import Final

from rules.knowledge.allergy_text import clauses, doubt_in, other_doubt_in, read_allergy_text
from rules.knowledge.judge import IDENTITY, NO_KNOWN_ALLERGY, STRENGTH, Judge, Verdict, is_class
from rules.knowledge.model import Coding, CrossReactivity, DrugResolution, MatchLevel
from rules.knowledge.normalise import folded_tokens, tokens
from rules.knowledge.recognise import (
    Recogniser,
    Recognition,
    spells_codes,
    with_written_coding,
)
from rules.knowledge.tables import ANY_DRUG, CLASS_PREFIX, KnowledgeTables, load_tables
from schemas.allergy_statements import statement_categories
from schemas.severe_reactions import (
    SCAR_SOURCE,
    life_threatening_reaction,
    severe_cutaneous_reaction,
)

VEHICLES: Final = frozenset({f"{CLASS_PREFIX}infusion_vehicles", f"{CLASS_PREFIX}excipients"})
"""The classes of the ingredients that carry or dilute the active drug (`DrugResolution.vehicles`):
the vehicles of an infusion, and excipients a product names for the allergen they carry (the
lactose carrier of a dry-powder inhaler)."""

UNRESOLVED_SOURCE = "unresolved input: no ingredient or class could be recognised"
PARTLY_RESOLVED_SOURCE = "partly resolved input: unrecognised words or codes"
MEDICATION: Final = "medication"
BIOLOGIC: Final = "biologic"
STATEMENT_SOURCE = "allergy record is a 'no known allergy' statement"
DOUBT_SOURCE = "allergy text: check the record by hand"
TOLERANCE_SOURCE = "allergy text: the record says the drug is tolerated"


@dataclass(frozen=True, slots=True)
class _Outcome:
    level: MatchLevel
    reason: str
    source: str
    matched: tuple[str, ...] = ()
    test_first_after_severe_reaction: bool = False


class BundledKnowledge:
    """Drug and allergen resolution and cross-reactivity judgement from bundled tables."""

    def __init__(self, tables: KnowledgeTables) -> None:
        self._tables = tables
        self._judge = Judge(tables)
        self._recogniser = Recogniser(
            tables.lexicon,
            tables.codes,
            tables.qualifiers,
            tables.misspellings,
            self._descriptive_classes,
            tables.brand_families,
            frozenset(name for name in tables.ambiguous if not tables.lexicon.get(name)),
            tables.leading,
            tables.inflected,
        )
        self._categories: Callable[[str], frozenset[str]] = cache(self._categories_of)

    @property
    def version(self) -> str:
        return self._tables.version

    def resolve(self, text: str, codes: tuple[Coding, ...] = ()) -> DrugResolution:
        recognition = self._recogniser.recognise(text, codes)
        concepts = recognition.concepts
        memberships = self._memberships(concepts)
        ingredients = tuple(c for c in concepts if not is_class(c))
        classes, groups = self._classes(concepts, memberships), self._groups(memberships)
        return DrugResolution(
            query=text,
            ingredients=ingredients,
            classes=classes,
            resolved=recognition.complete,
            therapeutic_groups=groups,
            vehicles=tuple(c for c in ingredients if self._is_vehicle(c)),
            site_specific_classes=tuple(sorted(memberships & self._tables.site_specific)),
            allergy_categories=tuple(
                sorted({found for concept in concepts for found in self._categories(concept)})
            ),
            labels=tuple((c, self._tables.classes[c].label) for c in classes)
            + tuple((g, self._tables.groups[g].label) for g in groups),
            unrecognised=recognition.unrecognised,
        )

    def cross_reactivity(
        self,
        allergen: str,
        drug: str,
        allergen_codes: tuple[Coding, ...] = (),
        drug_codes: tuple[Coding, ...] = (),
        reactions: tuple[str, ...] = (),
    ) -> CrossReactivity:
        allergen_codes = with_written_coding(allergen, allergen_codes)
        allergen_text, said_tolerated = read_allergy_text(
            "" if spells_codes(allergen, allergen_codes) else allergen
        )
        recognised = (
            Recognition(allergen_text, (NO_KNOWN_ALLERGY,), ())
            if not allergen_codes and statement_categories(allergen) is not None
            else self._recogniser.recognise(allergen_text, allergen_codes, every_item=True)
        )
        doubt, kept, negated = self._doubt(replace(recognised, query=allergen), allergen_text)
        if kept != allergen_text:
            recognised = self._recogniser.recognise(kept, allergen_codes, every_item=True)
            said_tolerated = ", ".join(filter(None, (said_tolerated, *negated)))
        allergy = replace(recognised, query=allergen)
        medicine = self._in_form(self._recogniser.recognise(drug, drug_codes), drug_codes)
        severe = severe_cutaneous_reaction(allergen, *reactions)
        side_effect = (
            None
            if severe is not None
            or doubt is not None
            or life_threatening_reaction(allergen, *reactions)
            else self._side_effect(allergy.concepts, (kept, *reactions))
        )
        outcome = (
            _Outcome(MatchLevel.UNVERIFIED, f"allergen '{allergen}' reads as {doubt}", DOUBT_SOURCE)
            if doubt is not None
            else self._outcome(allergy, medicine, said_tolerated, self._carried(kept), severe)
        )
        reason = outcome.reason
        if side_effect is not None and outcome.level is not MatchLevel.NONE:
            said = (
                f"the record says '{side_effect}'"
                if side_effect in _INTOLERANCE_WORDS
                else f"the recorded reaction ('{side_effect}') is a known side effect"
            )
            reason = f"{said}, not an allergic reaction: an intolerance; {reason}"
        return CrossReactivity(
            allergen=allergen,
            drug=drug,
            ingredients=medicine.concepts,
            matched=outcome.matched,
            level=outcome.level,
            reason=reason,
            source=outcome.source,
            test_first_after_severe_reaction=outcome.test_first_after_severe_reaction,
            severe_cutaneous_reaction=severe,
            side_effect=side_effect,
        )

    def _in_form(self, medicine: Recognition, codes: tuple[Coding, ...]) -> Recognition:
        """A drug named by its ingredient alone in a dose form whose every product carries an
        allergen (`product_forms.csv`: "progesterone 100 mg oral capsule", in peanut oil) with
        that allergen, as its brand is (Prometrium); a brand that says what it carries
        (Utrogestan: soya) or a drug named without its form is left as it was."""
        if len(medicine.concepts) != 1:
            return medicine
        forms = self._tables.product_forms.get(medicine.concepts[0], ())
        texts = (medicine.query, *(code.display for code in codes if code.display))
        written = [tokens(text) for text in texts]
        contains = sorted(
            {
                form.contains
                for form in forms
                if any(_names_any(words, form.forms) for words in written)
            }
        )
        if not contains:
            return medicine
        return replace(medicine, concepts=tuple(sorted({*medicine.concepts, *contains})))

    def _carried_by_product(
        self, verdict: Verdict, allergens: tuple[str, ...], medicine: Recognition
    ) -> Verdict:
        """The same ingredient as a food allergen the product carries as its vehicle or
        excipient (Prometrium, progesterone capsules: peanut oil) says so, citing the row
        between the allergen and the product's active ingredient when there is one (the
        product's label), instead of calling the allergen the drug itself."""
        concept = verdict.drug_concept
        if verdict.level is not MatchLevel.SAME_INGREDIENT or not self._judge.is_non_drug(concept):
            return verdict
        actives = [c for c in medicine.concepts if c != concept and not is_class(c)]
        if not actives or any(self._judge.is_non_drug(active) for active in actives):
            return verdict
        reason = (
            f"{medicine.query} contains {concept} as its vehicle or excipient, and {concept} is "
            f"the recorded allergen"
        )
        cited = [
            found
            for allergen in allergens
            for active in actives
            if (found := self._judge.judge(allergen, active)).explicit
            and found.level is not MatchLevel.NONE
        ]
        if not cited:
            return replace(verdict, reason=reason)
        return replace(
            verdict,
            reason=f"{reason}: {cited[0].reason}",
            source=f"{IDENTITY}; {cited[0].source}",
        )

    def _side_effect(self, allergens: tuple[str, ...], texts: tuple[str, ...]) -> str | None:
        """The reactions the allergy records in `texts` (its allergen text and its reactions'
        manifestations), when every one is a known side effect of one of its `allergens`
        (`side_effects.csv`: nausea of any drug, cough of an ACE inhibitor); None when they
        name no reaction, one that is not a side effect, or a word the tables do not know."""
        keys = {ANY_DRUG}.union(*(self._judge.keys(c) for c in allergens if c != NO_KNOWN_ALLERGY))
        named: list[str] = []
        for text in texts:
            terms, unknown = self._recogniser.terms(text)
            if unknown:
                return None
            for term in terms:
                if term not in self._tables.reactions:
                    continue
                if keys.isdisjoint(self._tables.side_effects.get(term, ())):
                    return None
                named.append(" ".join(term))
        return ", ".join(dict.fromkeys(named)) or None

    def _outcome(
        self,
        allergy: Recognition,
        medicine: Recognition,
        said_tolerated: str,
        carried: frozenset[str],
        severe: str | None,
    ) -> _Outcome:
        """Strongest verdict over all (allergen concept, drug concept) pairs, the `carried`
        vehicles left out as allergens, each ingredient the allergy text says is tolerated at
        most `low_risk`, and after the `severe` cutaneous adverse reaction the allergy records,
        every other related one in need of an allergist's evaluation first. A class said to be
        tolerated that holds the allergen itself ("amoxicillin - hives; tolerated penicillins")
        contradicts the record and clears nothing; the drug named itself, or a class apart from
        the allergen's ("penicillin allergy; tolerates cephalosporins"), is a tolerance."""
        failure = _unresolved(allergy, medicine)
        if failure is not None:
            return _Outcome(MatchLevel.UNVERIFIED, failure, UNRESOLVED_SOURCE)
        allergens = tuple(c for c in allergy.concepts if c != NO_KNOWN_ALLERGY)
        if not allergens:
            reason = f"'{allergy.query}' records that there is no known allergy"
            return _Outcome(MatchLevel.NONE, reason, STATEMENT_SOURCE)
        allergens = tuple(c for c in allergens if c not in carried) or allergens
        tolerated = self._tolerated(said_tolerated)
        strongest = {
            concept: self._carried_by_product(
                self._strongest(allergens, concept), allergens, medicine
            )
            for concept in medicine.concepts
        }
        culprits = frozenset(key for a in allergens for key in (a, *self._judge.keys(a)))
        verdicts = [
            _as_tolerated(verdict, said_tolerated)
            if concept in tolerated or tolerated & frozenset(self._judge.keys(concept)) - culprits
            else _after_severe_cutaneous_reaction(verdict, severe)
            for concept, verdict in strongest.items()
        ]
        top = max(verdicts, key=lambda verdict: verdict.rank)
        incomplete = _incomplete(allergy, medicine)
        # A part that cannot be read makes the pair `unverified`, unless the part that was read
        # already gives a stronger level, which stands (critical is not lowered to unverified's
        # warning); its reason then names the unread part too.
        if incomplete is not None and STRENGTH[top.level] < STRENGTH[MatchLevel.UNVERIFIED]:
            reason = f"{incomplete}; the recognised part gives {top.level.value}: {top.reason}"
            return _Outcome(MatchLevel.UNVERIFIED, reason, PARTLY_RESOLVED_SOURCE)
        reason = _all_reasons(verdicts) if top.level is MatchLevel.NONE else top.reason
        if incomplete is not None:
            reason = (
                f"{reason}; part of the record could not be read, check it by hand: {incomplete}"
            )
        test_first = any(
            verdict.test_first_after_severe_reaction
            for verdict in verdicts
            if verdict.level is top.level
        )
        matched = _matched(verdicts, top.level)
        return _Outcome(top.level, reason, top.source, matched, test_first)

    def _doubt(
        self, allergy: Recognition, allergen_text: str
    ) -> tuple[str | None, str, tuple[str, ...]]:
        """What makes the allergy text more than the name of the patient's allergen, the part
        that names allergens (without the clauses a negation governs) and those clauses. A "no
        known allergy" statement alone is what it says; a text that names nothing is doubted as
        a whole ("no reaction to penicillin")."""
        if allergy.concepts == (NO_KNOWN_ALLERGY,):
            return None, allergen_text, ()
        if not allergy.concepts:
            return doubt_in(allergy.query), allergen_text, ()
        kept, negation, negated = self._unnegated(allergen_text)
        return negation or other_doubt_in(kept), kept, negated

    def _unnegated(self, allergen_text: str) -> tuple[str, str | None, tuple[str, ...]]:
        """The allergen part without its negated clauses, the negation that governs the whole
        record if one does, and the negations' clauses. A negated clause that names no substance
        ("(false)", "(historical, tolerated since)", "(none)", "skin test negative" after the
        allergen's clause) negates the allergy it follows, and so does a text whose every
        naming clause is negated. A negated clause that names a substance ("no allergy to
        cephalosporins", "patch test to furosemide negative"), a negative result that names
        something else ("HIV negative"), one an exception follows ("denies allergies other
        than penicillin") and a "no known allergy" statement that opens the text ("NKDA
        (penicillin - rash)", "Allergies: none known. Penicillin - hives", "No other known
        allergies. Sulfa - rash") govern only themselves: what a negation names is not an
        allergen, and is read as tolerated (`_as_tolerated`)."""
        parts = clauses(allergen_text)
        negated = [part for part in parts if part.doubt is not None]
        if not negated:
            return allergen_text, None, ()
        kept = "; ".join(part.text for part in parts if part.doubt is None)
        texts = tuple(part.text.strip() for part in negated if part.negation)
        for part in negated:
            found, unknown = self._recogniser.parse(part.text)
            own = set(unknown).difference(folded_tokens(part.cue)) if part.result else set()
            own.update(concept for concept in found if concept != NO_KNOWN_ALLERGY)
            heading = part is parts[0] and (NO_KNOWN_ALLERGY in found or part.heading)
            if not own and not heading and not part.excepted:
                return kept, part.doubt, texts
        named, _ = self._recogniser.parse(kept)
        if not [concept for concept in named if concept != NO_KNOWN_ALLERGY]:
            return kept, negated[0].doubt, texts
        return kept, None, texts

    def _carried(self, allergen_text: str) -> frozenset[str]:
        """The vehicles and excipients the allergy text names only as part of a product: a
        product recorded as the allergen is an allergy to its active ingredients, not to the
        lactose of "Advair Diskus" or the saline of "ceftriaxone in sodium chloride"; a
        vehicle that is a list item of its own ("milk; lactose") is an allergen."""
        carried: set[str] = set()
        alone: set[str] = set()
        for concepts in self._recogniser.item_concepts(allergen_text):
            vehicles = {concept for concept in concepts if self._is_vehicle(concept)}
            (carried if len(vehicles) < len(concepts) else alone).update(vehicles)
        return frozenset(carried - alone)

    def _categories_of(self, concept: str) -> frozenset[str]:
        """The FHIR allergy categories of a concept: those of its classes, plus medication
        unless it is a non-drug allergen or a food or environmental class (none for the "no
        known allergy" statement)."""
        if concept == NO_KNOWN_ALLERGY:
            return frozenset()
        mapped = self._tables.allergy_categories
        found = {mapped[key] for key in self._class_ids(concept) if key in mapped}
        if not self._judge.is_non_drug(concept) and found <= {BIOLOGIC}:
            found.add(MEDICATION)
        return frozenset(found)

    def _class_ids(self, concept: str) -> frozenset[str]:
        return frozenset(
            key.removeprefix(CLASS_PREFIX) for key in self._judge.keys(concept) if is_class(key)
        )

    def _descriptive_classes(self, concept: str) -> frozenset[str]:
        """The classes of `concept` without a `shared_level`: their word after its name only
        describes it (see `Recogniser`)."""
        classes = self._tables.classes
        return frozenset(c for c in self._class_ids(concept) if classes[c].shared_level is None)

    def _is_vehicle(self, concept: str) -> bool:
        return not VEHICLES.isdisjoint(self._judge.keys(concept))

    def _tolerated(self, said: str) -> frozenset[str]:
        """The concepts an allergy text says are tolerated."""
        return frozenset(self._recogniser.recognise(said, ()).concepts) if said else frozenset()

    def _strongest(self, allergens: tuple[str, ...], drug_concept: str) -> Verdict:
        verdicts = (self._judge.judge(allergen, drug_concept) for allergen in allergens)
        return max(verdicts, key=lambda verdict: verdict.rank)

    def _memberships(self, concepts: tuple[str, ...]) -> frozenset[str]:
        """Every class the concepts are, or belong to, up to the roots."""
        return frozenset(key for concept in concepts for key in self._class_ids(concept))

    def _classes(self, concepts: tuple[str, ...], memberships: frozenset[str]) -> tuple[str, ...]:
        """Classes named directly, plus every class with a `shared_level` a concept is in."""
        named = {c.removeprefix(CLASS_PREFIX) for c in concepts if is_class(c)}
        shared = {c for c in memberships if self._tables.classes[c].shared_level is not None}
        return tuple(sorted(named | shared))

    def _groups(self, memberships: frozenset[str]) -> tuple[str, ...]:
        """The therapeutic groups holding a class (or a parent of a class) of a concept."""
        return tuple(
            sorted(
                group.group_id
                for group in self._tables.groups.values()
                if memberships.intersection(group.classes)
            )
        )


_INTOLERANCE_WORDS: Final = frozenset({"intolerance", "intolerant"})
"""Reaction words that name the record's type rather than a reaction ("statin intolerance")."""


@cache
def load_bundled_knowledge() -> BundledKnowledge:
    """The bundled knowledge, loaded and verified once per process."""
    return BundledKnowledge(load_tables())


_TOLERABLE: Final = frozenset({MatchLevel.SAME_CLASS, MatchLevel.PARTIAL})
"""Match levels a documented tolerance lowers to `low_risk`."""


def _as_tolerated(verdict: Verdict, said: str) -> Verdict:
    """A class or cross-reactivity match of an ingredient the allergy text itself says is
    tolerated ("penicillin allergy; tolerates cephalexin", "codeine - itching; morphine OK") is
    `low_risk`: documented tolerance outweighs the class rule. Not an identity with the
    allergen: a contradiction in the record stays as strong as it was. A drug tolerated needs
    no test first after a severe reaction."""
    if verdict.level not in _TOLERABLE:
        return replace(verdict, test_first_after_severe_reaction=False)
    reason = (
        f"the allergy record says {verdict.drug_concept} is tolerated ('{said}'); by class alone "
        f"it would be {verdict.level.value}: {verdict.reason}"
    )
    return replace(
        verdict,
        level=MatchLevel.LOW_RISK,
        reason=reason,
        source=TOLERANCE_SOURCE,
        test_first_after_severe_reaction=False,
    )


_GIVEN_WITH_CARE: Final = frozenset({MatchLevel.LOW_RISK, MatchLevel.PARTIAL})
"""Match levels that let a related drug be given, with care or a test first."""


def _after_severe_cutaneous_reaction(verdict: Verdict, severe: str | None) -> Verdict:
    """A related drug (`low_risk` or `partial`) after the `severe` cutaneous adverse reaction
    the allergy records: it needs an allergist's evaluation first, whatever its usual risk
    (`test_first_after_severe_reaction`), and the reason says so. The same ingredient or class
    is already the strongest level, and an unrelated drug (`none`) stays unrelated."""
    if severe is None or verdict.level not in _GIVEN_WITH_CARE:
        return verdict
    reason = (
        f"the allergy records a severe cutaneous adverse reaction ('{severe}'): the culprit is "
        f"not given again and a related drug needs an allergist's evaluation first, whatever its "
        f"usual risk; without the severe reaction it would be judged: {verdict.reason}"
    )
    return replace(
        verdict,
        reason=reason,
        source=f"{verdict.source}; {SCAR_SOURCE}",
        test_first_after_severe_reaction=True,
    )


def _matched(verdicts: list[Verdict], level: MatchLevel) -> tuple[str, ...]:
    """The drug concepts that produced the winning level (none for a `none` verdict)."""
    if level is MatchLevel.NONE:
        return ()
    return tuple(sorted(verdict.drug_concept for verdict in verdicts if verdict.level is level))


def _all_reasons(verdicts: list[Verdict]) -> str:
    """Why none of a combination's ingredients conflicts: one reason per ingredient."""
    return "; ".join(dict.fromkeys(verdict.reason for verdict in verdicts))


NOTHING_NAMED: Final = (
    " (it names no substance: every word reads as a strength, unit, dose form or other noise word)"
)


def _unresolved(allergy: Recognition, medicine: Recognition) -> str | None:
    """Why the pair cannot be judged at all, naming the side(s) that failed, and saying so
    when the side has no unrecognised word to name ("5 mg", "tablet")."""
    failed = [
        f"{side} '{recognition.query}' could not be resolved"
        f"{_unrecognised(recognition) or NOTHING_NAMED}"
        for side, recognition in (("allergen", allergy), ("drug", medicine))
        if not recognition.concepts
    ]
    return "; ".join(failed) or None


def _incomplete(allergy: Recognition, medicine: Recognition) -> str | None:
    partial = [
        f"{side} '{recognition.query}' was only partly recognised{_unrecognised(recognition)}"
        for side, recognition in (("allergen", allergy), ("drug", medicine))
        if recognition.unrecognised
    ]
    return "; ".join(partial) or None


def _unrecognised(recognition: Recognition) -> str:
    if not recognition.unrecognised:
        return ""
    offered = dict(recognition.suggestions)
    words = [
        f"{word} (did you mean {' or '.join(offered[word])}?)" if word in offered else word
        for word in dict.fromkeys(recognition.unrecognised)
    ]
    return f" (unrecognised: {', '.join(words)})"


def _names_any(words: tuple[str, ...], names: frozenset[str]) -> bool:
    """Whether the words hold any of the names as consecutive words (a Chinese name is one
    word per character: 黄体酮胶囊 holds 胶囊)."""
    for name in names:
        wanted = tokens(name)
        size = len(wanted)
        if size and any(words[at : at + size] == wanted for at in range(len(words) - size + 1)):
            return True
    return False
