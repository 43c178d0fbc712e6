"""The drug knowledge interface that rules depend on.

Any backend (the bundled data files, or a production RxNorm/MED-RT service) implements
`DrugKnowledge`. Rules never look at drug names themselves: they ask the knowledge layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class MatchLevel(StrEnum):
    """How an allergen and a drug relate, from strongest to none.

    `unverified` means the allergen or the drug could not be resolved: it is never a silent
    "no conflict".
    """

    SAME_INGREDIENT = "same_ingredient"
    SAME_CLASS = "same_class"
    PARTIAL = "partial"
    LOW_RISK = "low_risk"
    NONE = "none"
    UNVERIFIED = "unverified"


@dataclass(frozen=True, slots=True)
class Coding:
    """A code from a terminology (RxNorm, NDC, SNOMED CT, ATC...)."""

    system: str
    code: str
    display: str | None = None


@dataclass(frozen=True, slots=True)
class DrugResolution:
    """What a drug (or allergen) text/codes resolve to."""

    query: str
    ingredients: tuple[str, ...]
    classes: tuple[str, ...]
    resolved: bool
    therapeutic_groups: tuple[str, ...] = ()
    """Groups of classes whose drugs duplicate one another's therapy (anticoagulants); they
    say nothing about allergic cross-reactivity. A backend without such data leaves them empty."""
    vehicles: tuple[str, ...] = ()
    """The ingredients that carry or dilute the active drug (dextrose, sodium chloride in an
    infusion): two prescriptions sharing only these do not duplicate a therapy. A backend
    without such data leaves them empty."""
    site_specific_classes: tuple[str, ...] = ()
    """The drug's classes whose local forms act where applied (corticosteroids, nystatin): two
    prescriptions of such a class at different sites do not duplicate a therapy. A backend
    without such data leaves them empty (every pair at two sites is then judged as usual)."""
    allergy_categories: tuple[str, ...] = ()
    """The FHIR AllergyIntolerance categories its substances fall in ("food", "medication",
    "environment", "biologic"), for an allergy recorded without one. A backend without such
    data leaves them empty (the category is then unknown)."""
    labels: tuple[tuple[str, str], ...] = ()
    """A readable name for each of its classes and therapeutic groups (id, label: e.g.
    `propionic_acid_nsaids`, "propionic acid NSAIDs"), for the text of an alert. A backend
    without them leaves them empty (the ids are shown)."""
    unrecognised: tuple[str, ...] = ()
    """The words of the text it could not read, in order (strengths, dose forms and other
    words it knows to ignore left out): two texts it cannot resolve that leave the same words
    unread name the same unknown medicine. A backend that does not read words leaves them
    empty."""

    def label(self, concept: str) -> str:
        """The readable name of one of its classes or groups (the id itself if it has none)."""
        return next((label for known, label in self.labels if known == concept), concept)

    @property
    def unread_medicine(self) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """What names an unknown medicine whatever its strength or form: the ingredients it
        does read and the words it does not; None when it leaves no word unread."""
        if not self.unrecognised:
            return None
        return tuple(sorted(self.ingredients)), self.unrecognised

    @property
    def active_ingredients(self) -> tuple[str, ...]:
        """Its ingredients but the vehicles (two infusions in dextrose share no medicine)."""
        return tuple(name for name in self.ingredients if name not in self.vehicles)


@dataclass(frozen=True, slots=True)
class CrossReactivity:
    """The knowledge layer's verdict for one (allergen, drug) pair."""

    allergen: str
    drug: str
    ingredients: tuple[str, ...]
    matched: tuple[str, ...]
    level: MatchLevel
    reason: str
    source: str
    test_first_after_severe_reaction: bool = False
    """The drug needs a test or an evaluation first after a severe reaction to the allergen,
    although the relation is otherwise `low_risk` or `partial`: the source advises a test dose
    or skin test (a cephalosporin with dissimilar side chains after cephalosporin
    anaphylaxis), or the allergy records a severe cutaneous adverse reaction
    (`severe_cutaneous_reaction`). Rules raise the severity then."""
    severe_cutaneous_reaction: str | None = None
    """The severe cutaneous adverse reaction (SJS, TEN, DRESS, AGEP) the allergy's text or
    reactions name, as written, or None: after one, a `low_risk` or `partial` drug needs an
    allergist's evaluation first (its reason says so) and rules judge the allergy as one with
    a severe reaction. A backend that does not read reactions leaves it None."""
    side_effect: str | None = None
    """The reactions the allergy records, as read ("nausea"; "cough" of an ACE inhibitor),
    when every one is a known side effect of its substance rather than an allergic reaction:
    an intolerance, which rules and check-drug judge one step lower for a record that does not
    say its type (never dropped). None when it records no reaction, one that is not a side
    effect, or words that cannot be read. A backend that does not read reactions leaves it
    None."""


class DrugKnowledge(Protocol):
    """Resolves drugs and allergens and judges cross-reactivity. Pure and deterministic."""

    @property
    def version(self) -> str:
        """Identifies the data release, so an alert can say which knowledge judged it."""
        ...

    def resolve(self, text: str, codes: tuple[Coding, ...] = ()) -> DrugResolution:
        """Normalise a drug or allergen name/brand/code to ingredients and classes."""
        ...

    def cross_reactivity(
        self,
        allergen: str,
        drug: str,
        allergen_codes: tuple[Coding, ...] = (),
        drug_codes: tuple[Coding, ...] = (),
        reactions: tuple[str, ...] = (),
    ) -> CrossReactivity:
        """Judge whether giving `drug` to someone allergic to `allergen` is a risk; `reactions`
        are the allergy's recorded reactions (their manifestations, "Stevens-Johnson
        syndrome"), read like the reaction words of the allergen text."""
        ...
