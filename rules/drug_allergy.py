"""Drug-allergy conflicts, in both directions: a new drug against recorded allergies and a new
allergy against active drugs. The knowledge layer judges each pair; this module turns its
verdict, the allergy's criticality, verification status, type and reaction history into an
alert a clinician can act on."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import product
from typing import ClassVar
from uuid import UUID

from projections.queries import active_allergies, active_medications
from projections.state import Kind, UserState, record_address
from projections.views import AllergyView, MedicationView
from rules.base import (
    Finding,
    Focus,
    RuleRef,
    evidence_of,
    finding_id,
    kind_to,
    says_kind,
    shared_purpose,
)
from rules.knowledge.model import (
    Coding,
    CrossReactivity,
    DrugKnowledge,
    DrugResolution,
    MatchLevel,
)
from schemas.alerts import DrugAllergyFinding, Evidence
from schemas.events import (
    AllergyType,
    Criticality,
    ReactionSeverity,
    VerificationStatus,
)
from schemas.events import (
    Coding as WireCoding,
)
from schemas.severe_reactions import life_threatening_reaction
from schemas.severity import Severity

RULE = RuleRef(
    id="drug-allergy-conflict",
    version=1,
    severity=Severity.CRITICAL,
    description=(
        "An active medication contains, belongs to the class of, or cross-reacts with a "
        "substance the subject has an active allergy or intolerance to; or the pair cannot be "
        "verified by the drug knowledge layer."
    ),
)

_ORDER = (Severity.INFO, Severity.WARNING, Severity.CRITICAL)
_BASE: dict[MatchLevel, Severity | None] = {
    MatchLevel.SAME_INGREDIENT: Severity.CRITICAL,
    MatchLevel.SAME_CLASS: Severity.CRITICAL,
    MatchLevel.PARTIAL: Severity.WARNING,
    MatchLevel.UNVERIFIED: Severity.WARNING,
    MatchLevel.LOW_RISK: Severity.INFO,
    MatchLevel.NONE: None,
}


_TITLES: dict[MatchLevel, str] = {
    MatchLevel.SAME_INGREDIENT: "{drug} contains the substance of the recorded {allergen}{kind}",
    MatchLevel.SAME_CLASS: "{drug} conflicts with the recorded {allergen}{kind}",
    MatchLevel.PARTIAL: "{drug} may cross-react with the recorded {allergen}{kind}",
    MatchLevel.LOW_RISK: "{drug} is related to the recorded {allergen}{kind} (low risk)",
    MatchLevel.UNVERIFIED: "Cannot verify {drug} against the recorded {allergen}{kind}",
    MatchLevel.NONE: "{drug} is unrelated to the recorded {allergen}{kind}",
}


_EVALUATE_FIRST: dict[MatchLevel, str] = {
    MatchLevel.PARTIAL: "{drug} may cross-react with the recorded {allergen}{kind}: evaluate first",
    MatchLevel.LOW_RISK: "{drug} is related to the recorded {allergen}{kind}: evaluate first",
}
"""Titles of a related drug whose severity a severe reaction raised because it needs a test or
an allergist's evaluation first (`test_first_after_severe_reaction`): not "low risk" then."""


def _shift(severity: Severity, steps: int) -> Severity:
    index = min(max(_ORDER.index(severity) + steps, 0), len(_ORDER) - 1)
    return _ORDER[index]


def severity_for(
    level: MatchLevel,
    allergy: AllergyView,
    test_first_after_severe_reaction: bool = False,
    severe_cutaneous_reaction: bool = False,
    side_effect: bool = False,
) -> Severity | None:
    """CDS Hooks severity of a pair, or None when it is not worth an alert.

    High criticality or a severe past reaction raises a partial cross-reactivity to critical;
    an unconfirmed low-criticality record lowers one step unless it records a severe reaction
    (the reaction outweighs the assessment); an intolerance (not immune-mediated)
    lowers one step. Low-risk relations stay `info` whatever the history, except where the
    knowledge says a severe reaction calls for a test first (a dissimilar cephalosporin after
    cephalosporin anaphylaxis): `warning` then, for an allergy with a severe history. A severe
    cutaneous adverse reaction the allergy records (SJS, TEN, DRESS, AGEP, in its text or its
    reactions) is a severe reaction whatever severity it was given, and an immune-mediated one
    even in a record typed as an intolerance; so is a reaction whose manifestation names
    anaphylaxis ("Anaphylaxis", "anaphylactic shock", SNOMED CT 39579001), angioedema or one of
    their signs ("throat swelling", "hypotension") whatever severity it was given (or none), and
    an allergy whose own text names one ("amoxicillin - anaphylaxis", "lisinopril angioedema"):
    a record typed as an intolerance that records one is not lowered either.
    A record that does not say its type is an intolerance when every reaction it records is a
    known `side_effect` of its substance ("codeine - nausea"); a record typed as an allergy
    stays one.
    """
    base = _BASE[level]
    if base is None:
        return None
    life_threatening = life_threatening_reaction(allergy.substance) is not None or any(
        life_threatening_reaction(reaction.manifestation) is not None
        for reaction in allergy.reactions
    )
    severe_reaction = (
        severe_cutaneous_reaction
        or life_threatening
        or any(reaction.severity is ReactionSeverity.SEVERE for reaction in allergy.reactions)
    )
    severe_history = allergy.criticality is Criticality.HIGH or severe_reaction
    immune_mediated = severe_cutaneous_reaction or life_threatening
    allergic = not _intolerance(allergy, side_effect) or immune_mediated
    if level is MatchLevel.LOW_RISK:
        test_first = test_first_after_severe_reaction and severe_history and allergic
        return Severity.WARNING if test_first else base
    steps = 1 if severe_history and level is MatchLevel.PARTIAL else 0
    unconfirmed = allergy.verification_status is VerificationStatus.UNCONFIRMED
    if unconfirmed and allergy.criticality is Criticality.LOW and not severe_reaction:
        steps -= 1
    if not allergic:
        steps -= 1
    return _shift(base, steps)


def _intolerance(allergy: AllergyView, side_effect: bool) -> bool:
    """The record is of an intolerance: typed so, or untyped with only side effects recorded."""
    if allergy.allergy_type is None:
        return side_effect
    return allergy.allergy_type is AllergyType.INTOLERANCE


def _codes(codes: tuple[WireCoding, ...]) -> tuple[Coding, ...]:
    return tuple(Coding(code.system, code.code, code.display) for code in codes)


def _read_as(resolution: DrugResolution) -> str | None:
    """The ingredients a drug or allergen was read as, else its classes ("penicillins"), for a
    title; None when it was read as nothing."""
    names = resolution.ingredients or tuple(name.replace("_", " ") for name in resolution.classes)
    return ", ".join(names) or None


Verdicts = Callable[
    [str, str, tuple[Coding, ...], tuple[Coding, ...], tuple[str, ...]], CrossReactivity
]


@dataclass
class DrugAllergyRule:
    knowledge: DrugKnowledge
    ref: RuleRef = RULE
    watches: ClassVar[frozenset[Kind]] = frozenset({Kind.ALLERGY, Kind.MEDICATION})
    _verdicts: Verdicts = field(init=False, repr=False)

    _names: Callable[[str, tuple[WireCoding, ...]], str] = field(init=False, repr=False)
    _resolved: Callable[[str], DrugResolution] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._verdicts = lru_cache(maxsize=65536)(self.knowledge.cross_reactivity)
        self._names = lru_cache(maxsize=65536)(self._name)
        self._resolved = lru_cache(maxsize=65536)(self.knowledge.resolve)

    def _name(self, text: str, codes: tuple[WireCoding, ...]) -> str:
        """How a title names a drug or an allergen: its text, and when the text names nothing the
        knowledge reads ("Home med #3"), the display it was judged by, "Home med #3
        (amoxicillin 500 MG Oral Capsule)"; with no display either (a record coded only, whose
        text is its bare code), what the codes were read as, "308182 (amoxicillin)", "91936005
        (penicillins)". A text without a letter names nothing to a reader, even when the
        knowledge reads it as the code it is ("91936005")."""
        named = self.knowledge.resolve(text)
        if (named.ingredients or named.classes) and any(char.isalpha() for char in text):
            return text
        display = next((code.display for code in codes if code.display), None)
        if display is None:
            read = self.knowledge.resolve(text, _codes(codes)) if codes else named
            display = _read_as(read)
        return text if display is None or display == text else f"{text} ({display})"

    def _with_culprit(self, drug: str, verdict: CrossReactivity) -> str:
        """The drug's name in a title, with the ingredients that matched when the name does
        not say them ("Study kit (ibuprofen), which contains amoxicillin,"): an inbox must
        not show ibuprofen conflicting with a penicillin allergy."""
        said = set(self._resolved(drug).ingredients)
        unsaid = [ingredient for ingredient in verdict.matched if ingredient not in said]
        return f"{drug}, which contains {', '.join(unsaid)}," if unsaid else drug

    def findings(self, state: UserState, focus: Focus) -> Mapping[UUID, Finding]:
        found: dict[UUID, Finding] = {}
        for allergy, medication in _pairs(
            active_allergies(state), active_medications(state), focus
        ):
            purpose = shared_purpose(allergy.record, medication.prescribed)
            finding = None if purpose is None else self._finding(allergy, medication, purpose)
            if finding is not None:
                found[finding_id(state, finding)] = finding
        return found

    def verdict(self, allergy: AllergyView, medication: MedicationView) -> CrossReactivity:
        return self._verdicts(
            allergy.substance,
            medication.drug,
            _codes(allergy.codes),
            _codes(medication.codes),
            tuple(reaction.manifestation for reaction in allergy.reactions),
        )

    def _finding(
        self, allergy: AllergyView, medication: MedicationView, purpose: str
    ) -> Finding | None:
        verdict = self.verdict(allergy, medication)
        side_effect = verdict.side_effect is not None
        severity = severity_for(
            verdict.level,
            allergy,
            verdict.test_first_after_severe_reaction,
            severe_cutaneous_reaction=verdict.severe_cutaneous_reaction is not None,
            side_effect=side_effect,
        )
        if severity is None:
            return None
        kind = "intolerance" if _intolerance(allergy, side_effect) else "allergy"
        raised = verdict.test_first_after_severe_reaction and severity is not _BASE[verdict.level]
        titles = _EVALUATE_FIRST if raised else _TITLES
        allergen = self._names(allergy.substance, allergy.codes)
        title = titles.get(verdict.level, _TITLES[verdict.level]).format(
            drug=self._with_culprit(self._names(medication.drug, medication.codes), verdict),
            allergen=allergen,
            kind="" if says_kind(kind, allergen) else f" {kind}",
        )
        detail = f"{verdict.level.value}: {verdict.reason} (source: {verdict.source})"
        return Finding(
            rule=RULE,
            cause=(f"allergy:{allergy.allergy_id}", f"medication:{medication.prescription_id}"),
            severity=severity,
            title=title,
            detail=detail,
            evidence=_evidence(allergy, medication, kind),
            purpose=purpose,
            drug_allergy=DrugAllergyFinding(
                allergy_id=allergy.allergy_id,
                allergen=allergy.substance,
                prescription_id=medication.prescription_id,
                drug=medication.drug,
                ingredients=verdict.ingredients,
                matched=verdict.matched,
                level=verdict.level.value,
                reason=verdict.reason,
                source=verdict.source,
                knowledge_version=self.knowledge.version,
            ),
        )


def _pairs(
    allergies: list[AllergyView], medications: list[MedicationView], focus: Focus
) -> Iterator[tuple[AllergyView, MedicationView]]:
    """Every (allergy, medication) pair with at least one side in focus: each focused allergy
    against every medication, then every other allergy against each focused medication, so a
    subject with many allergies and prescriptions is checked in time proportional to their
    number on each event, not to their product."""
    if focus is None:
        yield from product(allergies, medications)
        return
    focused_allergies = [a for a in allergies if _address(a) in focus]
    focused_medications = [
        m
        for m in medications
        if record_address(Kind.MEDICATION, m.prescription_id, m.prescribed) in focus
    ]
    yield from product(focused_allergies, medications)
    others = [a for a in allergies if _address(a) not in focus]
    yield from product(others, focused_medications)


def _evidence(allergy: AllergyView, medication: MedicationView, kind: str) -> tuple[Evidence, ...]:
    evidence = [
        evidence_of(allergy.record, allergy.allergy_id, "allergy", kind_to(kind, allergy.substance))
    ]
    if allergy.last_change.id != allergy.record.id:
        status = allergy.verification_status.value
        evidence.append(
            evidence_of(allergy.last_change, allergy.allergy_id, "allergy_status", status)
        )
    evidence.append(
        evidence_of(
            medication.prescribed,
            medication.prescription_id,
            "medication",
            f"prescribed {medication.drug}",
        )
    )
    return tuple(evidence)


def _address(allergy: AllergyView) -> tuple[Kind, str]:
    return record_address(Kind.ALLERGY, allergy.allergy_id, allergy.record)
