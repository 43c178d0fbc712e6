"""What an allergy text says besides the substance it names: a negation, another person's
allergy, or drugs that are not the allergen (what treated the reaction, what the patient
tolerates). Pure.

The recogniser reads names, so "not allergic to penicillin", "penicillin allergy ruled out" or
"mother allergic to penicillin" name penicillin without recording an allergy of the patient.
Judged as an allergy, such a text raises a false critical alert; judged as no allergy, a
heuristic would decide that an alert is silenced. It is neither: the judgement is `unverified`
and names the cue, for someone to read the record.

"Penicillin - hives, treated with Benadryl", "contrast - premedicate with prednisone", "sulfa,
switched to nitrofurantoin" or "penicillin allergy, tolerated cephalexin" name drugs that are
not allergens: judged as allergens, the first flags every later Benadryl order as the allergen
itself. The clause from such a cue to the end of its list item or sentence is
not read as allergens; "not tolerated" and "unable to tolerate" are no such cue (they record
an intolerance).

The emergency epinephrine a patient with anaphylaxis carries is named without a cue as often
as with one ("bee stings - anaphylaxis - EpiPen", "peanuts (carries Auvi-Q)"): read as an
allergen, it flags the rescue drug itself as a critical same-ingredient conflict. An
epinephrine auto-injector named in an allergy text, and "epinephrine given" or "adrenaline
administered", are a rescue treatment, never an allergen; epinephrine named otherwise
("sulfites; epinephrine") still is.

A negation governs its clause (`clauses`: split at ";", ".", "|", a line break or a
parenthesis, and before an exception such as "other than", "except" or "but"), not the whole
text: in "penicillin allergy; no allergy to cephalosporins", "penicillin - rash; HIV negative"
or "sulfa - SJS (patch test to furosemide negative)" the first clause still records the
allergy. A structured field answered no ("Penicillin allergy: No", "Allergic to penicillin =
No", "penicillin allergy - N", "(false)", ": none"; not a field about the allergy answered
no, "Verified: no", "Anaphylaxis: No") and a record that says the reaction is not an
allergy ("not a true allergy", "outgrown", "allergy resolved", "previously labelled") are
negations. A leading "no" or "nil" followed by a substance and then a reaction ("NO PENICILLINS
- anaphylaxis", "NIL penicillins (anaphylaxis)") is the shouted warning of a drug chart, not a
negation: the record is the allergy. Lactose intolerance, an intolerance of the milk sugar, is
no allergy either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Final

from rules.knowledge.normalise import fold

_NEGATION: Final = re.compile(
    r"\b(?:not|never|no longer)\s+allergic\b"
    r"|\b(?:not|never)\s+(?:an?\s+)?(?:(?:true|real|genuine|actual|proven)\s+)?allerg(?:y|ies)\b"
    r"|^\W*(?:nkda|nka|denies|denied)\b"
    r"|\bno\s+(?:reaction|reactions|allergy|allergies)\b"
    r"|\b(?:ruled\s+out|excluded|de-?labell?ed|removed|refuted|disproven|in\s+error)\b"
    r"|\boutgr(?:own|ew)\b"
    r"|\ballerg(?:y|ies|ic)\s+(?:has\s+|have\s+|was\s+|now\s+)?(?:resolved|lapsed)\b"
    r"|\b(?:previously|formerly|wrongly|incorrectly|mistakenly)\s+(?:labell?ed|listed|recorded)\b"
    r"|(?:^|(?<=[:=?(])|\s-)\s*(?:no|n|none(?:\s+known)?|nil|false|denied)[\s.!)]*$"
    r"|\bpassed\b[^,;.]*\bchallenge\b|\bchallenge\b[^,;.]*\bpassed\b|\btolerated\s+since\b"
    r"|否认|^\W*无.*过敏"
)
"""A negation of the allergy: "not allergic", "not a true allergy", "ruled out", "outgrown",
"previously labelled", a passed challenge, a structured field answered no ("Penicillin allergy:
No", "penicillin allergy - N", "(false)", ": none")."""
_QUALIFIER_ANSWERED_NO: Final = re.compile(
    r"\b(?:verified|verification|confirmed|confirmation|validated|documented|tested|reviewed"
    r"|severe|serious|anaphyla\w*|life[\s-]*threatening|hospitali[sz]ed|hospitali[sz]ation"
    r"|challenged|skin\s+test(?:ed)?|test(?:ing)?\s+done)\s*(?:[:=?]|\s-)\s*"
    r"(?:no|n|none|nil|false)[\s.!)]*$"
)
"""A field about the allergy answered no ("Verified: no", "Anaphylaxis: No", "severe = N"):
it qualifies the allergy (unconfirmed, not anaphylactic) and negates nothing."""
_NEGATIVE_RESULT: Final = re.compile(r"\b(?:negative|neg)\b|阴性")
"""A negative test result: of the allergen ("penicillin skin test negative"), or of whatever
else its clause names ("HIV negative")."""
_LEADING_NO: Final = re.compile(r"^\W*(?:no|nil)\b")
_REACTION_WORD: Final = (
    r"(?:anaphyla\w*|rash|hives|urticaria|angioedema|swelling|sjs|ten|stevens|dress|shock"
    r"|bronchospasm|wheez\w*|itch\w*|reactions?|rxn|severe|collapse|blister\w*|allerg\w*)"
)
_SHOUTED: Final = re.compile(
    r"^\W*(?:no|nil)\s+(?!(?:known|allerg\w*|reactions?|history|hx|drugs?|medications?|meds"
    r"|issues?|problems?|concerns?|adverse|sensitivit\w*|intoleran\w*)\b)"
    rf"[^\W_][\w'-]*(?:\s+[^\W_][\w'-]*){{0,3}}?\s*(?:-+|[(:,])\s*{_REACTION_WORD}\b"
)
"""A leading "no" or "nil", a substance, then a reaction: the shouted warning of a drug chart
("NO PENICILLINS - anaphylaxis", "NIL penicillins (anaphylaxis)"), not a negation; "No
penicillin allergy", "no known allergies" and "No penicillin" alone are negations. Its words
are split by spaces only, so a long word is read in one way, not in each of the ways it could
be cut into four (a 300-letter word after "no" took 11 s)."""
_SUGAR_INTOLERANCE: Final = re.compile(
    r"\blactose[\s-]+intoleran(?:ce|t)\b|\bintoleran(?:ce|t)\s+(?:of|to)\s+lactose\b"
    r"|\blactase\s+deficiency\b|乳糖不耐"
)
"""Lactose intolerance: a deficiency of the enzyme that digests the milk sugar, not an
allergy (a cow's milk protein allergy is recorded as such)."""
_EXCEPTION: Final = r"\b(?:other\s+than|except(?:\s+for)?|apart\s+from|aside\s+from|besides|but)\b"
_NO_ALLERGY_HEADING: Final = re.compile(
    r"^\W*(?:no|nil|denies|denied)\s+"
    r"(?:(?:other|further|additional|more|known|food|drug|medication|environmental|seasonal)\s+)*"
    r"(?:allerg(?:y|ies)|adverse\s+(?:drug\s+)?reactions?)\s*(?:[.,;]\W*|$)"
)
"""A statement that opens the text and says there are no allergies of some kind, or no other
ones ("No other known allergies. Sulfa - rash", "No food allergies; amoxicillin - hives",
"denies other allergies, PCN"): it ends at its comma and governs only itself, like an opening
"NKDA"."""
_CLAUSE_BREAK: Final = re.compile(
    rf"[;|()\[\]\n。]|(?<!\d)\.|\.(?!\d)|(?P<exception>{_EXCEPTION})"
    r"|(?<=\bnkda),|(?<=\bnka),|(?<=\bnkfa),|,(?=\s*(?:allergic|allerg(?:y|ies))\s+to\b)"
)
"""Where a clause ends: a semicolon, a full stop (not a decimal point), a bar, a line break, a
parenthesis, an exception ("denies allergies other than penicillin": the negation does not
reach penicillin), a comma after an abbreviated statement ("NKDA, egg allergy": no drug
allergy, but an egg allergy) or before an allergy named anew ("NKDA, allergic to eggs")."""
_RELATIVE: Final = (
    r"(?:mother|father|mum|mom|dad|sister|brother|son|daughter|parents?|siblings?|aunt|uncle"
    r"|grandmother|grandfather|grandma|grandpa|granny|cousin|husband|wife|spouse|partner"
    r"|relatives?|family\s+members?)"
)
_OTHER_PERSON: Final = re.compile(
    r"\bfamily\s+(?:history|hx)\b|\bfhx?\b|\bin\s+(?:the\s+)?family\b|\bnot\s+(?:the\s+)?patient'?s\b"
    rf"|\b{_RELATIVE}\b(?:'s)?\s*(?:[:-]\s*|(?:is|was|has|had|with)\s+)?(?:\w+\s+){{0,3}}?"
    r"(?:allergic|allergy|allergies|anaphylaxis|reaction)\b"
    r"|家族史|(?:母亲|父亲)(?:对)?.*过敏"
)
"""A relative's allergy ("dad has PCN allergy", "brother - PCN allergy", "mom's, not
patient's"), not a relative reporting the patient's ("penicillin, per mother")."""

_REACTION_TREATED: Final = (
    r"(?:anaphylaxis|anaphylactic\s+(?:reaction|shock)|hives|urticaria|rash|itch(?:ing|y)?"
    r"|swelling|angioedema|wheez(?:e|ing)|reaction|rxn)\s*(?:[,;:]|\s-)\s*(?:and\s+)?"
    r"(?:was\s+|were\s+)?(?:given|gave|received)"
)
"""A reaction, then what was given for it ("anaphylaxis, given IM adrenaline and
hydrocortisone", "rash - given chlorphenamine"); "rash when given amoxicillin" says what caused
it and is no such cue."""
_CHINESE_TREATMENT: Final = (
    r"(?<=[,;.。、])\s*(?:予以|给予|予|经)"
    r"(?=[^,;.。、]*?(?:治疗|处理)(?![^,;.。、]*?(?:后出现|后发生|后又|后起)))"
)
"""A later clause saying what the reaction was treated with ("青霉素过敏, 予地塞米松治疗", its
full-width comma folded), not one that says the drug came before the reaction
("予阿莫西林治疗后出现皮疹")."""
_TREATMENT_CUE: Final = (
    r"(?:(?:treated|tx|txd|managed|relieved|resolved|reversed|rescued|helped|settled|subsided"
    r"|improved|controlled)\s+(?:with|by|using)"
    rf"|{_REACTION_TREATED}"
    r"|now\s+(?:on|takes|taking|uses|using)|uses?\s+(?=[^,;.]*\binstead\b)"
    r"|pre-?(?:medicat(?:e|ed|ion)|meds?)(?:\s+(?:with|using))?"
    r"|(?:give|given|administer|administered|infuse|infused)\s+with"
    r"|(?:switched|changed|converted)\s+to|(?:replaced|substituted)\s+(?:with|by)"
    r"|required|requiring|requires|needed|needing|needs|responded\s+to)"
)
_TOLERANCE_CUE: Final = (
    r"(?:(?:ok|okay|fine|safe)\s+(?:with|on|to\s+(?:give|use|take))|cleared\s+for"
    r"|no\s+(?:reactions?|problems?)\s+(?:to|with)"
    r"|tolerated(?!\s+since\b)|tolerates|tolerating|tolerate|can\s+take|has\s+taken)"
)
_NOT_ALLERGEN_CUE: Final = rf"(?:\b(?:{_TREATMENT_CUE}|{_TOLERANCE_CUE})\b|{_CHINESE_TREATMENT})"
_STARTS_WITH_TOLERANCE: Final = re.compile(rf"\(?\s*{_TOLERANCE_CUE}\b")
_CLAUSE_END: Final = (
    r"(?!\b(?:after|following|due|because|from|when|during|while|with|to|for|but|however"
    r"|except|although|though|yet|whereas|allergic|allergy|then|until|which|that|caused|causing"
    r"|developed|later|eventually|also)\b)(?! [-/] )(?!->)(?!\band\b[^,;.()]*\s[-:]\s)"
)
"""Where a treatment or tolerance clause ends before its list item does: at a word that goes
back to the cause ("requiring epinephrine after cefazolin"), turns to another drug ("ok with
morphine but not hydromorphone") or to what happened next ("tolerated Augmentin 5 days then
hives"), or at a spaced dash or slash that starts another item, or an "and" that joins the
next item ("treated with Benadryl and Sulfa - hives")."""
_NOT_ALLERGEN_CLAUSE: Final = re.compile(
    rf"\(\s*{_NOT_ALLERGEN_CUE}(?:{_CLAUSE_END}[^)|])*\)?"
    rf"|{_NOT_ALLERGEN_CUE}(?:{_CLAUSE_END}[^,;+、.。\n|)→])*"
)
"""From a cue that the drugs after it treated the reaction (or premedicate against it), are
tolerated or replaced the allergen, to the end of the list item or sentence, or to a word that
goes back to the cause ("anaphylaxis requiring epinephrine after cefazolin" keeps "after
cefazolin"); a parenthesis that opens with such a cue, to its end ("(premedicate: prednisone,
diphenhydramine)")."""
_REVERSAL: Final = re.compile(
    r"\s*(?:\b(?:then|until|which|that|caused|causing|developed|later|eventually|also)\b|->|→)"
)
"""What follows a clause when its drug reacted after all ("tolerated Augmentin x5 days then
hives", "changed to cefepime -> also rash"): the clause is then an allergen after all."""
_WITHOUT_TROUBLE: Final = (
    r"(?:without|with\s+no|no)\s+(?:any\s+)?(?:problems?|issues?|reactions?|rxns?|rash)"
)
_TOLERATED_ITEM: Final = re.compile(
    r"(?:^|(?<=[,;+、.。\n(|])|(?<= - ))(?:(?! - )[^,;+、.。\n()|])*?\s(?:-\s+)?(?:is\s+|was\s+)?"
    rf"(?:ok|okay|fine|safe|tolerated|helped|worked|works\s+well|{_WITHOUT_TROUBLE})"
    r"(?:\s+(?:in\s+|since\s+)?(?:19|20)\d\d)?"
    r"(?=\s*(?:[,;+、.。\n)|]|$))"
)
"""A list item that ends by saying its drug is tolerated ("codeine - itching; morphine OK",
"has had Keflex without problems", "cefazolin given in OR 2020 - no issues") or helped."""
_AUTO_INJECTOR: Final = (
    r"(?:epi[\s-]?pens?|auvi[\s-]?q|anapen|jext|emerade|adrenaclick|symjepi"
    r"|(?:epinephrine|adrenaline|epi)[\s-]+(?:auto[\s-]?injectors?|pens?))"
)
_RESCUE: Final = re.compile(
    r"\b(?:(?:carries|carry|carrying|uses|using|has|have|with|needs|own|owns)\s+"
    r"(?:an?\s+|own\s+|his\s+|her\s+|their\s+)?)?"
    rf"{_AUTO_INJECTOR}\b"
    r"(?:\s+(?:prescribed|given|administered|used|carried|required|needed|issued))?"
    r"|\b(?:epinephrine|adrenaline|epi)\s+(?:was\s+|were\s+)?"
    r"(?:given|administered|injected|used|required|needed|drip|infusion)\b"
)
"""An epinephrine auto-injector (with the verb that says the patient has or used it), or
epinephrine said to have been given: a rescue treatment, never the allergen."""
_W_SLASH: Final = re.compile(r"\bw/(o\b)?")
"""`w/` and `w/o`, the clinical shorthand for "with" and "without" (not a list separator)."""
_INTOLERANCE_WORDS: Final = frozenset(
    {"not", "never", "poorly", "unable", "cannot", "cant", "couldnt", "didnt", "doesnt", "no"}
)
"""A word among the two before a tolerance cue that turns it into an intolerance."""


@dataclass(frozen=True, slots=True)
class Clause:
    """A clause of a folded allergy text, and what in it says it records no allergen."""

    text: str
    doubt: str | None = None
    """E.g. `a negation ('no allergy')`, None for a clause that may name an allergen."""
    cue: str = ""
    """The words of the doubt, so that what else the clause names can be read without them."""
    negation: bool = False
    """Whether the doubt is a negation, which says that what the clause names is not an
    allergen of the patient (a sugar intolerance says nothing of the kind)."""
    result: bool = False
    """Whether the doubt is a negative test result, whose object may be no substance at all
    ("HIV negative")."""
    excepted: bool = False
    """Whether an exception follows the clause ("no known allergies except", "denies allergies
    other than"): its negation does not reach what follows."""
    heading: bool = False
    """Whether the clause opens the text with a statement of no allergies of some kind ("no
    food allergies", "no other known allergies"): its negation does not reach what follows."""


def doubt_in(text: str) -> str | None:
    """What makes an allergy text more than the name of the patient's allergen, if anything:
    e.g. `a negation ('not allergic')` or `another person's allergy ('mother')`."""
    folded = fold(text)
    negation = _negation(folded, 0, len(folded))
    if negation is not None:
        return negation.doubt
    return other_doubt_in(folded)


def other_doubt_in(text: str) -> str | None:
    """A doubt that concerns the whole allergy text, whatever its clause: another person's
    allergy ('mother') or a rescue treatment named without an allergen."""
    folded = fold(text)
    for pattern, meaning in (
        (_OTHER_PERSON, "another person's allergy"),
        (_RESCUE, "a rescue treatment, not an allergen"),
    ):
        found = pattern.search(folded)
        if found is not None:
            return _described(meaning, found)
    return None


def clauses(folded: str) -> tuple[Clause, ...]:
    """The clauses of a folded allergy text (its allergen part, `read_allergy_text`), each with
    the negation or sugar intolerance it states, if any: "penicillin allergy; no allergy to
    cephalosporins" is `penicillin allergy ` and `no allergy to cephalosporins`, the second a
    negation ('no allergy')."""
    heading = _NO_ALLERGY_HEADING.match(folded)
    bounds = [0] if heading is None else [0, heading.end(), heading.end()]
    excepted: list[bool] = [] if heading is None else [False]
    for found in _CLAUSE_BREAK.finditer(folded, bounds[-1]):
        bounds.extend((found.start(), found.end()))
        excepted.append(found.group("exception") is not None)
    bounds.append(len(folded))
    excepted.append(False)
    spans = zip(bounds[::2], bounds[1::2], excepted, strict=True)
    return tuple(
        replace(_clause(folded, start, end), excepted=before_exception, heading=heading is not None)
        if start == 0
        else replace(_clause(folded, start, end), excepted=before_exception)
        for start, end, before_exception in spans
        if folded[start:end].strip()
    )


def _clause(folded: str, start: int, end: int) -> Clause:
    negation = _negation(folded, start, end)
    if negation is not None:
        return negation
    intolerance = _SUGAR_INTOLERANCE.search(folded, start, end)
    if intolerance is None:
        return Clause(folded[start:end])
    meaning = "an intolerance of the milk sugar, not an allergy"
    return Clause(folded[start:end], _described(meaning, intolerance), intolerance.group())


def _negation(folded: str, start: int, end: int) -> Clause | None:
    """The clause between `start` and `end` with its leftmost negation, if it has one (a
    leading "no" or "nil" counts at the start of the text only, and not in the shouted
    warning of `_SHOUTED`)."""
    patterns = [_LEADING_NO, _NEGATION, _NEGATIVE_RESULT]
    if _SHOUTED.match(folded) is not None:
        patterns.remove(_LEADING_NO)
    qualifier = _QUALIFIER_ANSWERED_NO.search(folded, start, end)
    if qualifier is not None:
        end = qualifier.start()
    found = [(match, n) for n, p in enumerate(patterns) if (match := p.search(folded, start, end))]
    if not found:
        return None
    first, _ = min(found, key=lambda pair: (pair[0].start(), pair[1]))
    result = first.re is _NEGATIVE_RESULT
    doubt = _described("a negation", first)
    return Clause(folded[start:end], doubt, first.group(), negation=True, result=result)


def _described(meaning: str, found: re.Match[str]) -> str:
    return f"{meaning} ({found.group().strip(' ,;:-')!r})"


def read_allergy_text(text: str) -> tuple[str, str]:
    """The (folded) allergy text in two parts: what names the allergens, and what says drugs
    are tolerated (its clauses joined by commas; "" when it says none is).

    The allergen part leaves out the clauses that name drugs which treated the reaction or
    which the patient tolerates, and a rescue epinephrine, and reads a slash as a list
    separator: `penicillin - hives, treated with benadryl` reads as `penicillin - hives, `,
    `bee stings - anaphylaxis - epipen` as `bee stings - anaphylaxis - `, `pen/sulfa` as `pen,
    sulfa` (so "pen" is an item of its own, unrecognised, not a qualifier of "sulfa"). For
    `penicillin allergy; tolerates cephalexin. morphine ok` the tolerated part is `morphine ok,
    tolerates cephalexin`."""
    tolerated: list[str] = []

    def item(found: re.Match[str]) -> str:
        words = re.sub(r"[^\w\s]", "", found.group()).split()
        if _INTOLERANCE_WORDS.intersection(words):
            return found.group()
        tolerated.append(found.group().strip())
        return " "

    def clause(found: re.Match[str]) -> str:
        before = re.sub(r"[^\w\s]", "", folded[: found.start()]).split()[-2:]
        reacted = _REVERSAL.match(folded, found.end())
        if _INTOLERANCE_WORDS.intersection(before) or reacted:
            return found.group()
        if _STARTS_WITH_TOLERANCE.match(found.group()):
            tolerated.append(found.group().strip("( )"))
        return " "

    folded = _RESCUE.sub(" ", _W_SLASH.sub(_with_or_without, fold(text)))
    folded = _TOLERATED_ITEM.sub(item, folded)
    kept = _NOT_ALLERGEN_CLAUSE.sub(clause, folded)
    return kept.replace("/", ", "), ", ".join(tolerated)


def _with_or_without(found: re.Match[str]) -> str:
    return "without " if found.group(1) else "with "
