"""A tiny table-driven DrugKnowledge for rule tests that must not depend on the bundled data."""

from __future__ import annotations

from dataclasses import dataclass

from rules.knowledge.model import Coding, CrossReactivity, DrugResolution, MatchLevel

_INGREDIENTS = {
    "amoxicillin": ("amoxicillin",),
    "amoxicillin/clavulanate": ("amoxicillin", "clavulanate"),
    "penicillin": ("penicillin g",),
    "ibuprofen": ("ibuprofen",),
    "naproxen": ("naproxen",),
    "ceftriaxone": ("ceftriaxone",),
    "metformin": ("metformin",),
    "furosemide": ("furosemide",),
    "aspirin": ("aspirin",),
    "sulfamethoxazole": ("sulfamethoxazole",),
}
_CLASSES = {
    "amoxicillin": ("penicillins",),
    "penicillin g": ("penicillins",),
    "ibuprofen": ("nsaids",),
    "naproxen": ("nsaids",),
    "aspirin": ("nsaids",),
    "ceftriaxone": ("cephalosporins",),
    "metformin": ("biguanides",),
    "furosemide": ("loop diuretics",),
    "sulfamethoxazole": ("sulfonamide antibiotics",),
    "clavulanate": (),
}


@dataclass(frozen=True)
class TableKnowledge:
    version: str = "test-table-1"

    def resolve(self, text: str, codes: tuple[Coding, ...] = ()) -> DrugResolution:
        ingredients = _INGREDIENTS.get(text.strip().lower())
        if ingredients is None:
            return DrugResolution(text, (), (), resolved=False)
        classes = tuple(sorted({c for i in ingredients for c in _CLASSES[i]}))
        return DrugResolution(text, ingredients, classes, resolved=True)

    def cross_reactivity(
        self,
        allergen: str,
        drug: str,
        allergen_codes: tuple[Coding, ...] = (),
        drug_codes: tuple[Coding, ...] = (),
        reactions: tuple[str, ...] = (),
    ) -> CrossReactivity:
        a, d = self.resolve(allergen), self.resolve(drug)
        if not (a.resolved and d.resolved):
            return CrossReactivity(
                allergen, drug, d.ingredients, (), MatchLevel.UNVERIFIED, "unknown", "test"
            )
        same = tuple(sorted(set(a.ingredients) & set(d.ingredients)))
        if same:
            return CrossReactivity(
                allergen, drug, d.ingredients, same, MatchLevel.SAME_INGREDIENT, "same", "test"
            )
        if set(a.classes) & set(d.classes):
            return CrossReactivity(
                allergen, drug, d.ingredients, d.ingredients, MatchLevel.SAME_CLASS, "class", "test"
            )
        return CrossReactivity(
            allergen, drug, d.ingredients, (), MatchLevel.NONE, "unrelated", "test"
        )
