"""The severe cutaneous adverse reaction (SCAR) an allergy records, in its text ("penicillin -
SJS", "amoxicillin DRESS") or in its reactions' manifestations, and the anaphylaxis a reaction's
manifestation names. Pure.

After Stevens-Johnson syndrome, toxic epidermal necrolysis, drug reaction with eosinophilia and
systemic symptoms (DRESS, also called drug-induced hypersensitivity syndrome) or acute
generalised exanthematous pustulosis (AGEP), the culprit is never given again and a drug
related to it (of its class or of a cross-reactive class: another beta-lactam after a
penicillin) needs an allergist's evaluation first: the low-risk and side-chain guidance and the
graded challenge or test dose it relies on do not apply (Khan DA et al., Drug allergy: a 2022
practice parameter update, J Allergy Clin Immunol 2022;150:1333-93, sections on severe
cutaneous adverse reactions).

Anaphylaxis (anaphylactic shock, SNOMED CT 39579001, or an anaphylactoid reaction) is a severe
reaction by definition, whatever severity a record gives it: a systemic reaction that can kill
(Shaker MS et al., Anaphylaxis - a 2020 practice parameter update, J Allergy Clin Immunol
2020;145:1082-123; it is what makes an allergy of high criticality in FHIR's
AllergyIntolerance). So is angioedema, a swelling that can close the airway: after angioedema
on an ACE inhibitor, sacubitril/valsartan is contraindicated and another ACE inhibitor is not
given (ENTRESTO US prescribing information; Khan DA et al. 2022, above). Records often name
neither but the signs ("tongue swelling", "throat closing", "hypotension", "呼吸困难"): they
count the same. `life_threatening_reaction` finds any of them in a reaction's manifestation or
an allergy's text.

A reaction coded only names them by their SNOMED CT codes: Stevens-Johnson syndrome 73442001,
toxic epidermal necrolysis 23067006.

"TEN" is read in capitals, or as an item of its own ("penicillin - ten", "SJS/TEN"), never as
the number ("rash ten days after"); "SCAR" in capitals only. A reaction the text denies ("no
SJS", "not DRESS", "SJS ruled out") is not recorded.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

SCAR_SOURCE: Final = (
    "Khan DA, Banerji A, Blumenthal KG, et al. Drug allergy: a 2022 practice parameter update."
    " J Allergy Clin Immunol 2022;150(6):1333-1393 (severe cutaneous adverse reactions: no"
    " re-exposure to the culprit; related drugs only after an allergist's evaluation)"
)

_NAMED: Final = re.compile(
    r"\bsjs\b|\bstevens?[\s-]*johnsons?(?:'?s)?(?:\s+syndrome)?\b"
    r"|\btoxic\s+epidermal\s+necroly[sz]is\b|\blyell'?s?\b"
    r"|\bdress\b|\bdrug\s+(?:reaction|rash)\s+with\s+eosinophilia\b|\bdihs\b"
    r"|\bdrug[\s-]+induced\s+hypersensitivity\s+syndrome\b|\bagep\b"
    r"|\bacute\s+generali[sz]ed\s+exanthematous\s+pustulosis\b"
    r"|\b73442001\b|\b23067006\b"
    r"|\bsevere\s+cutaneous\s+adverse\s+(?:drug\s+)?reactions?\b"
    r"|(?:^|(?<=[-:(,;/|]))\s*ten\s*(?=$|[-),;/.|])"
    r"|史蒂文斯|史-?约综合征|中毒性表皮坏死|表皮坏死松解|药物超敏反应综合征"
    r"|伴嗜酸性粒细胞增多和系统症状的药物反应|急性泛发性发疹性脓疱病",
    re.IGNORECASE,
)
_CAPITALS: Final = re.compile(r"\b(?:TEN|SCAR)\b")
_DENIED: Final = re.compile(
    r"(?:\b(?:no|not|non|without|denies|denied|r/o|ruled\s+out|rule\s+out|negative\s+for)"
    r"|无|否认|排除)[\s-]*$",
    re.IGNORECASE,
)
_DENIED_AFTER: Final = re.compile(
    r"\s*(?:was\s+|is\s+)?(?:ruled\s+out|excluded|unlikely|negative)\b", re.IGNORECASE
)


def severe_cutaneous_reaction(*texts: str) -> str | None:
    """The first severe cutaneous adverse reaction the texts name, as written ("SJS",
    "Stevens-Johnson syndrome", "DRESS"), or None when they name none."""
    for text in texts:
        written = unicodedata.normalize("NFKC", text)
        found = sorted(
            (match for pattern in (_NAMED, _CAPITALS) for match in pattern.finditer(written)),
            key=lambda match: match.start(),
        )
        for match in found:
            denied_before = _DENIED.search(written, 0, match.start()) is not None
            if not denied_before and _DENIED_AFTER.match(written, match.end()) is None:
                return match.group().strip()
    return None


_SWELLING_SITE: Final = r"(?:tongue|lips?|mouth|face|facial|throat|airways?|uvula|laryn(?:x|geal))"
_LIFE_THREATENING: Final = re.compile(
    r"\banaphyla(?:xis|xes|ctic|ctoid)\w*|\b39579001\b|过敏性休克|严重过敏反应"
    r"|\bangio-?o?edema\w*|\bquincke'?s?\b|血管性水肿|血管神经性水肿"
    rf"|\b{_SWELLING_SITE}\s+(?:swelling|swollen|swelled|o?edema)\b"
    rf"|\bswollen\s+{_SWELLING_SITE}\b"
    rf"|\bswell(?:ing|ed)?\s+(?:of\s+|in\s+)?(?:the\s+|his\s+|her\s+|their\s+)?{_SWELLING_SITE}\b"
    r"|\bthroat\s+(?:clos(?:ing|ed|ure)|tight(?:ness|ening)?|constrict\w*)"
    r"|\bclos(?:ing|ure)\s+(?:of\s+)?(?:the\s+|his\s+|her\s+)?throat\b"
    r"|\blaryngo-?spasm\b|\bbroncho-?spasm\b|\bstridor\b|\bwheez\w*"
    r"|\bhypotensi(?:on|ve)\b|\b(?:drop|fall)\s+in\s+blood\s+pressure\b|\bshock\b"
    r"|\bcirculatory\s+collapse\b|\b(?:difficulty|trouble)\s+breathing\b"
    r"|\b(?:could\s*n[o']?t|can'?t|cannot|unable\s+to)\s+breathe\b"
    r"|\brespiratory\s+(?:distress|arrest|compromise|failure)\b|\bintubat\w*"
    r"|喉头?水肿|喉头?痉挛|支气管痉挛|呼吸困难|低血压|休克|舌头?肿|嘴?唇肿|面部肿",
    re.IGNORECASE,
)
"""Anaphylaxis and angioedema by name, and the signs that make a reaction one whatever it is
called: swelling of the tongue, lips, face or throat (angioedema); the airway closing (throat
tightness, laryngeal oedema, laryngospasm, stridor); bronchospasm or wheezing; hypotension or
shock; breathing difficulty, respiratory distress, intubation (Shaker MS et al. 2020, above:
after exposure to a known allergen, hypotension, bronchospasm or laryngeal involvement alone is
anaphylaxis)."""
_ANSWERED_NO: Final = re.compile(r"\s*[:=]\s*(?:no|n|none|false|negative)\b", re.IGNORECASE)
"""A field about the reaction answered no ("Anaphylaxis: No")."""


def life_threatening_reaction(*manifestations: str) -> str | None:
    """The first manifestation that names anaphylaxis ("Anaphylaxis", "anaphylactic shock",
    "39579001"), angioedema ("angioedema", "angio-oedema", "Quincke's oedema") or one of their
    signs ("lip swelling", "throat tightness", "bronchospasm", "hypotension"), as written, or
    None when none does; a denied one ("no anaphylaxis", "angioedema ruled out", "Anaphylaxis:
    No", "no difficulty breathing") is not."""
    for manifestation in manifestations:
        written = unicodedata.normalize("NFKC", manifestation)
        for match in _LIFE_THREATENING.finditer(written):
            denied_before = _DENIED.search(written, 0, match.start()) is not None
            denied_after = any(
                pattern.match(written, match.end()) is not None
                for pattern in (_DENIED_AFTER, _ANSWERED_NO)
            )
            if not denied_before and not denied_after:
                return written.strip()
    return None
