"""Where a prescription acts: the whole body, or one local site (skin, eye, airways...).

Read from the prescription's route (FHIR `dosageInstruction.route` text such as "Oral Route",
"Ophthalmic route (qualifier value)") and, without a route, from the words of the drug's name
("... Topical Ointment", "... 0.05 MG/ACTUAT", "eye drops"). A route word wins over a dose-form
word ("ophthalmic ointment" acts on the eye). Oral, parenteral, sublingual, transdermal and
rectal use count as systemic (a paracetamol suppository is absorbed); a patch says nothing by
itself (fentanyl acts systemically, a lidocaine patch locally). Nothing recognised, or words of
two sites: the site is unknown, and callers must not assume two prescriptions act apart.
Chinese route and dose-form words (口服, 吸入, 外用, 滴眼液, 阴道栓...) are read the same way, as
character sequences (Chinese text has no word breaks).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from rules.knowledge.normalise import tokens


class Site(StrEnum):
    SYSTEMIC = "systemic"
    SKIN = "skin"
    EYE = "eye"
    EAR = "ear"
    NOSE = "nose"
    AIRWAYS = "airways"
    VAGINA = "vagina"


ROUTE_WORDS: Final[dict[str, Site]] = {
    "oral": Site.SYSTEMIC,
    "orally": Site.SYSTEMIC,
    "po": Site.SYSTEMIC,
    "intravenous": Site.SYSTEMIC,
    "iv": Site.SYSTEMIC,
    "intramuscular": Site.SYSTEMIC,
    "im": Site.SYSTEMIC,
    "subcutaneous": Site.SYSTEMIC,
    "sc": Site.SYSTEMIC,
    "sq": Site.SYSTEMIC,
    "sublingual": Site.SYSTEMIC,
    "buccal": Site.SYSTEMIC,
    "transdermal": Site.SYSTEMIC,
    "rectal": Site.SYSTEMIC,
    "topical": Site.SKIN,
    "cutaneous": Site.SKIN,
    "dermal": Site.SKIN,
    "ophthalmic": Site.EYE,
    "ocular": Site.EYE,
    "otic": Site.EAR,
    "auricular": Site.EAR,
    "nasal": Site.NOSE,
    "intranasal": Site.NOSE,
    "inhalation": Site.AIRWAYS,
    "inhaled": Site.AIRWAYS,
    "respiratory": Site.AIRWAYS,
    "vaginal": Site.VAGINA,
}

DOSE_FORM_WORDS: Final[dict[str, Site]] = {
    "tablet": Site.SYSTEMIC,
    "capsule": Site.SYSTEMIC,
    "injection": Site.SYSTEMIC,
    "injectable": Site.SYSTEMIC,
    "suppository": Site.SYSTEMIC,
    "cream": Site.SKIN,
    "ointment": Site.SKIN,
    "lotion": Site.SKIN,
    "shampoo": Site.SKIN,
    "eye": Site.EYE,
    "ear": Site.EAR,
    "inhaler": Site.AIRWAYS,
    "actuat": Site.AIRWAYS,
    "actuation": Site.AIRWAYS,
    "nebulizer": Site.AIRWAYS,
    "nebuliser": Site.AIRWAYS,
    "pessary": Site.VAGINA,
}


CHINESE_ROUTE_WORDS: Final[dict[str, Site]] = {
    "口服": Site.SYSTEMIC,
    "静脉": Site.SYSTEMIC,
    "静滴": Site.SYSTEMIC,
    "肌注": Site.SYSTEMIC,
    "肌内": Site.SYSTEMIC,
    "皮下": Site.SYSTEMIC,
    "舌下": Site.SYSTEMIC,
    "含服": Site.SYSTEMIC,
    "直肠": Site.SYSTEMIC,
    "透皮": Site.SYSTEMIC,
    "外用": Site.SKIN,
    "皮肤": Site.SKIN,
    "滴眼": Site.EYE,
    "眼用": Site.EYE,
    "滴耳": Site.EAR,
    "滴鼻": Site.NOSE,
    "鼻喷": Site.NOSE,
    "鼻用": Site.NOSE,
    "吸入": Site.AIRWAYS,
    "雾化": Site.AIRWAYS,
    "阴道": Site.VAGINA,
}

CHINESE_DOSE_FORM_WORDS: Final[dict[str, Site]] = {
    "片": Site.SYSTEMIC,
    "胶囊": Site.SYSTEMIC,
    "注射": Site.SYSTEMIC,
    "口服液": Site.SYSTEMIC,
    "颗粒": Site.SYSTEMIC,
    "栓": Site.SYSTEMIC,
    "软膏": Site.SKIN,
    "乳膏": Site.SKIN,
    "凝胶": Site.SKIN,
    "洗剂": Site.SKIN,
    "搽剂": Site.SKIN,
    "眼膏": Site.EYE,
    "滴眼液": Site.EYE,
    "滴耳液": Site.EAR,
    "喷雾剂": Site.NOSE,
    "气雾剂": Site.AIRWAYS,
    "粉雾剂": Site.AIRWAYS,
}
CHINESE_SILENT_FORMS: Final = ("贴片", "贴剂", "含片")
"""Patches and lozenges say nothing by themselves (and must not be read as tablets, 片)."""


def site_of(route: str | None, drug: str) -> Site | None:
    """The site a prescription acts on, or None when neither its route nor its name says."""
    for text, words, chinese in (
        (route or "", ROUTE_WORDS, CHINESE_ROUTE_WORDS),
        (drug, ROUTE_WORDS, CHINESE_ROUTE_WORDS),
        (drug, DOSE_FORM_WORDS, CHINESE_DOSE_FORM_WORDS),
    ):
        found = {words[word] for word in tokens(text) if word in words}
        unsilenced = _unsilenced(text)
        found.update(site for phrase, site in chinese.items() if phrase in unsilenced)
        if len(found) == 1:
            return found.pop()
        if found:
            return None
    return None


def act_apart(first: Site | None, second: Site | None) -> bool:
    """Whether two prescriptions surely act on different sites, one of them local (oral
    prednisone and an inhaled corticosteroid; nystatin by mouth and on the skin)."""
    return first is not None and second is not None and first != second


def _unsilenced(text: str) -> str:
    for form in CHINESE_SILENT_FORMS:
        text = text.replace(form, " ")
    return text
