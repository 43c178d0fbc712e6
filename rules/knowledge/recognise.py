"""Turns a drug or allergen (free text plus codings) into concept ids from the bundled tables.

Text is matched greedily, longest term first, over tokens: ingredient names, synonyms, brand
names, Chinese names and class words map to concepts; strengths, units, dose forms, routes and
salts are noise. A term followed by "free" ("sulfite-free") is negated and dropped. "Plus"
joins two names ("amoxicillin plus clavulanate"); after the last name it is a product suffix
that adds an ingredient the text does not name (Diovan Plus: + hydrochlorothiazide), so it is
unrecognised there unless the product is a term of its own (Nurofen Plus). A qualifier ("pen",
"dye", "antibiotics", "vaccines") is noise in an item of a list (items are separated by commas,
semicolons or "+") that names something ("insulin pen"), and unrecognised in one that does not
("Pen, sulfa"; "penicillin, antibiotics"), so a list item never vanishes. Any other
word is unrecognised, and a text with unrecognised words is not completely resolved; for a
long enough unrecognised word the closest known one-word names are offered (a likely
misspelling), which never changes what was resolved. A class word right after a name of one
of its members, in the same list item, describes that name and adds nothing when the class
says nothing of how its members cross-react ("Lantus insulin", "Moderna COVID-19 vaccine":
the text names the member, not every drug of the class); a class that does ("cefazolin
cephalosporins") is kept, the safe reading.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from difflib import get_close_matches
from functools import lru_cache

from rules.knowledge.judge import is_class
from rules.knowledge.model import Coding
from rules.knowledge.normalise import fold, folded_tokens, is_quantity, normalise_code
from rules.knowledge.tables import (
    CLASS_PREFIX,
    SYSTEM_URIS,
    SYSTEMS,
    system_key,
    written_coding,
)

NEGATION = "free"
JOINING_WORD = "plus"
_ITEM_SEPARATORS = re.compile(r"[,;+、]")
SUGGESTION_MIN_LENGTH = 5
SUGGESTION_CUTOFF = 0.85
SUGGESTIONS = 2
VARIANT_MIN_LENGTH = 6
ALLERGY_SUFFIX = "allergie"
_BARE_CODE = re.compile(r"\d{4,18}")
"""A text that is one number of four digits or more may be a code written without its system
("91936005"); shorter numbers (a CVX code, a strength) are never read as one."""
_BARE_CODE_SYSTEMS = ("rxnorm", "snomed", "ndc")


@dataclass(frozen=True, slots=True)
class Recognition:
    """Concepts found for one input, and what could not be recognised."""

    query: str
    concepts: tuple[str, ...]
    unrecognised: tuple[str, ...]
    suggestions: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(unrecognised word, the closest known names), for the words that have any."""

    @property
    def complete(self) -> bool:
        return bool(self.concepts) and not self.unrecognised


class Recogniser:
    """Looks up terms and codes in the tables' lexicon and code index."""

    def __init__(
        self,
        lexicon: Mapping[tuple[str, ...], tuple[str, ...]],
        codes: Mapping[tuple[str, str], tuple[str, ...]],
        qualifiers: frozenset[tuple[str, ...]] = frozenset(),
        unsuggested: frozenset[tuple[str, ...]] = frozenset(),
        descriptive_classes: Callable[[str], frozenset[str]] | None = None,
        brand_families: frozenset[tuple[str, ...]] = frozenset(),
        ambiguous: frozenset[tuple[str, ...]] = frozenset(),
        leading: Mapping[tuple[str, ...], tuple[str, ...]] | None = None,
        inflected: frozenset[str] = frozenset(),
    ) -> None:
        self._lexicon = lexicon
        self._leading = dict(leading or {})
        """Names read only at the start of a list item that names nothing else ("Td": tetanus
        and diphtheria toxoids), since their words mean something else inside a name ("25 mcg
        TD", the transdermal route)."""
        self._longest_leading = max((len(term) for term in self._leading), default=0)
        self._brand_families = brand_families
        """Brands whose products differ in composition ("Bengay"): read as the ingredients
        every product contains, and left unrecognised as a product (`family_note`)."""
        self._ambiguous = ambiguous
        """Names of several products or substances read as no concept ("Midol"): left
        unrecognised with a note (`ambiguous_note`), never silently dropped as noise."""
        self._descriptive_classes = descriptive_classes
        """The ids of the classes a concept belongs to whose word, right after its name, only
        describes it (None: no class word does)."""
        self._codes_index = codes
        self._qualifiers = qualifiers
        self._longest = max(len(term) for term in lexicon)
        self._names_by_initial = _names_by_initial(lexicon, unsuggested)
        self._closest = lru_cache(maxsize=4096)(self._closest_names)
        self._inflected = inflected
        """The one-word generic and class names an unlisted word may be a form of."""
        self._variant = lru_cache(maxsize=4096)(self._variant_name)

    def recognise(
        self, text: str, codings: Iterable[Coding], *, every_item: bool = False
    ) -> Recognition:
        """Known codes make the input resolved (text concepts are added, never removed), except,
        with `every_item` (an allergy list), for the list items that name nothing.

        Without a known code the text decides; when the text names nothing ("Drug allergy - see
        chart", "Home med #3"), the displays of the unknown codes are read as text ("Allergy to
        penicillin", "amoxicillin 500 MG Oral Capsule"): the code system's name of the concept
        the record is coded as. When the text or a known code and those displays name
        different substances (text "Azithromycin", an NDC displayed "Amoxicillin 500 MG Oral
        Capsule"; RxNorm ibuprofen and a local code displayed "Amoxicillin"), both are read:
        the pharmacy may fill by the other code. Unknown codes are reported only when neither
        yields anything (codings of one concept are alternatives, not parts). A text that is
        only a code as free text writes one ("rxnorm:723", "RXCUI 723") is read as that code,
        and so is a bare number that exactly one code system lists ("91936005": SNOMED CT).
        """
        codings = with_written_coding(text, codings)
        bare = self._bare_coding(text)
        if bare is not None:
            codings = (*codings, bare)
        coded, unknown_codes = self._codes(codings)
        words = "" if spells_codes(text, codings) else text
        found, unknown_words = self.parse(words)
        displayed = self._displayed([coding for coding in codings if not self._code(coding)])
        if coded:
            unread = self._unread_items(words) if every_item else ()
            read = coded + found
            if displayed is not None and not set(displayed[0]) & set(read):
                read = read + displayed[0]
            return Recognition(text, _sorted_unique(read), unread)
        if not found:
            found, unknown_words = displayed or (found, unknown_words)
        elif displayed is not None and not set(displayed[0]) & set(found):
            found = found + displayed[0]
        if found:
            return Recognition(
                text, _sorted_unique(found), unknown_words, self._suggestions(unknown_words)
            )
        unknown = unknown_words + unknown_codes
        return Recognition(text, (), unknown, self._suggestions(unknown_words))

    def _bare_coding(self, text: str) -> Coding | None:
        """The coding a text that is only a number spells, when exactly one of the code systems
        whose codes are numbers (RxNorm, SNOMED CT, NDC; not CVX, whose short codes read as
        strengths) lists it; None otherwise, and for a number two systems list."""
        number = fold(text).strip()
        if _BARE_CODE.fullmatch(number) is None or written_coding(text) is not None:
            return None
        systems = [
            system
            for system in _BARE_CODE_SYSTEMS
            if (system, normalise_code(system, number)) in self._codes_index
        ]
        return Coding(SYSTEM_URIS[systems[0]], number) if len(systems) == 1 else None

    def _displayed(
        self, codings: Iterable[Coding]
    ) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """(concepts, unrecognised words) of the codings' displays that name anything: those
        read completely if any is, else every one that names something. None when none does."""
        parsed = [self.parse(coding.display) for coding in codings if coding.display]
        naming = [(found, unknown) for found, unknown in parsed if found]
        complete = [(found, unknown) for found, unknown in naming if not unknown] or naming
        if not complete:
            return None
        concepts = tuple(concept for found, _ in complete for concept in found)
        return concepts, tuple(dict.fromkeys(word for _, unknown in complete for word in unknown))

    def item_concepts(self, text: str) -> tuple[tuple[str, ...], ...]:
        """The concepts each list item of a text names ("Advair Diskus; milk": fluticasone,
        salmeterol and lactose; milk)."""
        return tuple(self.parse(item)[0] for item in _ITEM_SEPARATORS.split(fold(text)))

    def _unread_items(self, text: str) -> tuple[str, ...]:
        """The unrecognised words of the list items that name nothing, in a text of several
        items: an allergy's code names one substance, so it cannot vouch for another item of
        its list ("Penicillin, Sulfamethoxazle" coded as penicillin G). A text of one item is
        the code's display, which the code already reads."""
        items = _ITEM_SEPARATORS.split(fold(text))
        if len(items) < 2:
            return ()
        parsed = (self.parse(item) for item in items)
        return tuple(word for found, unknown in parsed if not found for word in unknown)

    def _suggestions(self, words: Iterable[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
        offered = ((word, self._closest(word)) for word in words)
        return tuple((word, names) for word, names in offered if names)

    def _closest_names(self, word: str) -> tuple[str, ...]:
        """Known one-word names that `word` is most likely a misspelling of, best first."""
        if len(word) < SUGGESTION_MIN_LENGTH:
            return ()
        candidates = self._names_by_initial.get(word[0], [])
        return tuple(get_close_matches(word, candidates, SUGGESTIONS, SUGGESTION_CUTOFF))

    def parse(self, text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(concepts, unrecognised words) of a free-text name. A term followed by "free" is
        negated: its concepts are dropped, also from a brand the text names beside it
        ("Excedrin Aspirin Free" is acetaminophen and caffeine, not Excedrin's aspirin)."""
        words, items = _words_and_items(text)
        found: list[str] = []
        negated_concepts: set[str] = set()
        unknown: list[str] = []
        named_items: set[int] = set()
        named_at: dict[int, tuple[str, ...]] = {}
        """Where each term that names something begins (word position), and its concepts."""
        families: list[tuple[int, str, tuple[str, ...]]] = []
        """(where a brand family's or an ambiguous name ends, its note, what all its products
        contain): it names no product unless a name that adds to that follows it in its list
        item ("Vicks NyQuil", "泰诺酚麻美敏", "Unisom doxylamine"; not "Bengay menthol", which
        every Bengay contains)."""
        qualifying: list[tuple[int, tuple[str, ...]]] = []
        joining = False
        position = 0
        named_before: tuple[tuple[int, int], tuple[str, ...]] = ((-1, -1), ())
        """Where the last name ended (word position, list item) and its concepts."""
        while position < len(words):
            length, concepts = self._longest_term(words, position)
            if length == 0:
                if not is_quantity(words[position]):
                    unknown.append(words[position])
                position += 1
                continue
            term = words[position : position + length]
            if named_before[0] == (position, items[position]) and self._describes(
                concepts, named_before[1]
            ):
                position += length
                continue
            if concepts:
                named_before = ((position + length, items[position + length - 1]), concepts)
            negated = bool(concepts) and words[position + length : position + length + 1] == (
                NEGATION,
            )
            if negated:
                negated_concepts.update(concepts)
            else:
                found.extend(concepts)
                note = self._unnamed_note(term)
                if note is not None:
                    families.append((position + length, note, concepts))
            if concepts:
                joining = False
                named_items.update(items[position : position + length])
                named_at[position] = concepts
            elif term == (JOINING_WORD,):
                joining = bool(found)
            elif term in self._qualifiers:
                qualifying.append((items[position], term))
            position += length + int(negated)
        self._read_leading(words, items, named_items, found, unknown)
        unknown.extend(" ".join(term) for item, term in qualifying if item not in named_items)
        unknown.extend(
            note
            for end, note, common in families
            if not (
                end in named_at
                and items[end] == items[end - 1]
                and not set(named_at[end]) <= set(common)
            )
        )
        if joining:
            unknown.append(JOINING_WORD)
        return tuple(c for c in found if c not in negated_concepts), tuple(unknown)

    def _read_leading(
        self,
        words: tuple[str, ...],
        items: tuple[int, ...],
        named_items: set[int],
        found: list[str],
        unknown: list[str],
    ) -> None:
        """Adds to `found` the leading name ("Td") that opens each list item naming nothing
        else, marks its item named and drops its words from `unknown` ("DT")."""
        for start, item in enumerate(items):
            if item in named_items or (start > 0 and items[start - 1] == item):
                continue
            for end in range(min(len(words), start + self._longest_leading), start, -1):
                concepts = self._leading.get(words[start:end])
                if concepts is not None and len(set(items[start:end])) == 1:
                    found.extend(concepts)
                    named_items.add(item)
                    for word in words[start:end]:
                        if word in unknown:
                            unknown.remove(word)
                    break

    def _unnamed_note(self, term: tuple[str, ...]) -> str | None:
        """Why a known term names no one product, if it does not: a brand family or an
        ambiguous name."""
        if term in self._brand_families:
            return family_note(term)
        if term in self._ambiguous:
            return ambiguous_note(term)
        return None

    def _describes(self, concepts: tuple[str, ...], named: tuple[str, ...]) -> bool:
        """Whether `concepts` are only classes that describe one of the concepts `named` just
        before them (`descriptive_classes`)."""
        describing = self._descriptive_classes
        return (
            describing is not None
            and bool(concepts)
            and all(
                is_class(concept)
                and any(concept.removeprefix(CLASS_PREFIX) in describing(n) for n in named)
                for concept in concepts
            )
        )

    def terms(self, text: str) -> tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]:
        """(the known terms of a text, names and noise words alike, as `parse` matches them,
        longest first; its unrecognised words)."""
        words, _ = _words_and_items(text)
        found: list[tuple[str, ...]] = []
        unknown: list[str] = []
        position = 0
        while position < len(words):
            length, _ = self._longest_term(words, position)
            if length == 0:
                if not is_quantity(words[position]):
                    unknown.append(words[position])
                position += 1
                continue
            found.append(words[position : position + length])
            position += length
        return tuple(found), tuple(unknown)

    def _longest_term(self, words: tuple[str, ...], start: int) -> tuple[int, tuple[str, ...]]:
        for end in range(min(len(words), start + self._longest), start, -1):
            concepts = self._lexicon.get(words[start:end])
            if concepts is not None:
                return end - start, concepts
        concepts = self._variant(words[start])
        return (1, concepts) if concepts else (0, ())

    def _variant_name(self, word: str) -> tuple[str, ...]:
        """The concepts of a one-word name that an unlisted word of `VARIANT_MIN_LENGTH`
        letters or more writes in another language's or the plural form: with a final "e"
        added or dropped ("Lamotrigin", "Carbamazepin": German INN spellings; "cephalexine"),
        a Spanish final "o" dropped or "a" dropped or made "e" ("dexketoprofeno", "lidocaína"),
        without a plural "s" or "es" ("pénicillines", "sulfas"), when that is a generic or class
        name (`inflected`: never a brand, "Actose" is not Actos), and the name before a German
        "-allergie" ("Latexallergie", any known name), itself read so; () when none is."""
        if len(word) < VARIANT_MIN_LENGTH or not word.isascii() or not word.isalpha():
            return ()
        stem = word.removesuffix(ALLERGY_SUFFIX)
        if stem != word:
            return self._lexicon.get((stem,)) or self._variant(stem)
        forms = [word + "e"]
        if word.endswith(("e", "s", "a", "o")):
            forms.append(word[:-1])
        if word.endswith("a"):
            forms.append(word[:-1] + "e")
        if word.endswith("es"):
            forms.append(word[:-2])
        return next(
            (
                found
                for form in forms
                if form in self._inflected and (found := self._lexicon.get((form,)))
            ),
            (),
        )

    def _codes(self, codings: Iterable[Coding]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        found: list[str] = []
        unknown: list[str] = []
        for coding in codings:
            concepts = self._code(coding)
            if concepts:
                found.extend(concepts)
            else:
                unknown.append(f"{coding.system}|{coding.code}")
        return tuple(found), tuple(unknown)

    def _code(self, coding: Coding) -> tuple[str, ...]:
        system = SYSTEMS.get(system_key(coding.system))
        if system is None:
            return ()
        return self._codes_index.get((system, normalise_code(system, coding.code)), ())


def ambiguous_note(term: tuple[str, ...]) -> str:
    """How a name of several products or substances stands among the unrecognised words
    ("midol (names several products or substances: name the one meant)")."""
    return f"{_joined(term)} (names several products or substances: name the one meant)"


def _joined(term: tuple[str, ...]) -> str:
    """A term's words as written: Chinese characters together, other words spaced."""
    cjk = all(len(token) == 1 and not token.isascii() for token in term)
    return ("" if cjk else " ").join(term)


def family_note(term: tuple[str, ...]) -> str:
    """How a brand family stands among the unrecognised words: its name and why the product
    is not known ("bengay (a brand whose products differ in composition: name the product)")."""
    return f"{_joined(term)} (a brand whose products differ in composition: name the product)"


def _words_and_items(text: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The words of a text and, for each, the list item it is in."""
    words: list[str] = []
    items: list[int] = []
    for item, piece in enumerate(_ITEM_SEPARATORS.split(fold(text))):
        piece_words = folded_tokens(piece)
        words.extend(piece_words)
        items.extend([item] * len(piece_words))
    return tuple(words), tuple(items)


def _names_by_initial(
    lexicon: Mapping[tuple[str, ...], tuple[str, ...]],
    unsuggested: frozenset[tuple[str, ...]],
) -> dict[str, list[str]]:
    """One-word terms that name something (not noise words, nor the misspellings a table
    reads, which a suggestion must not offer), by first letter, sorted (so the suggestions
    are deterministic)."""
    names: dict[str, list[str]] = {}
    for term in sorted(
        term[0]
        for term, concepts in lexicon.items()
        if len(term) == 1 and concepts and term not in unsuggested
    ):
        names.setdefault(term[0], []).append(term)
    return names


def _sorted_unique(concepts: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(concepts)))


def with_written_coding(text: str, codings: Iterable[Coding]) -> tuple[Coding, ...]:
    """The codings, and the one the text spells if it is only a code ("rxnorm:723")."""
    written = written_coding(text)
    return (*codings, written) if written is not None else tuple(codings)


def spells_codes(text: str, codings: Iterable[Coding]) -> bool:
    """Whether the text only spells the codings' codes, each bare or as `system|code` (the label
    of a record coded without text or display), or is one code as free text writes it
    ("rxnorm:723", `written_coding`): it names no words to recognise. Only codes without
    letters count (RxNorm, SNOMED, NDC, CVX): a local code can be a drug's name."""
    codes = {c.code for c in codings if not any(char.isalpha() for char in c.code)}
    spelled = written_coding(text)
    if spelled is not None:
        return spelled.code in codes
    written = text.split()
    return bool(written) and all(word.rpartition("|")[2] in codes for word in written)
