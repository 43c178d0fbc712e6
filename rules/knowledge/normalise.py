"""Text and code normalisation shared by the bundled knowledge tables and their lookups.

Case, accents, punctuation and full-width characters are folded away, and Traditional Chinese
characters to their Simplified forms; Chinese characters, Japanese kana and Korean syllables
are kept one token each so that multi-character names can be matched as token sequences in
scripts written without spaces between words ("ペニシリン アレルギー"); Latin and Cyrillic words
are whole tokens.
"""

from __future__ import annotations

import re
import unicodedata

from rules.knowledge.traditional_chinese import SIMPLIFIED, TRADITIONAL

_GREEK = str.maketrans(
    {"\u03b1": " alpha ", "\u03b2": " beta ", "\u03b3": " gamma ", "\u03b4": " delta "}
)
_SIMPLIFIED = str.maketrans(TRADITIONAL, SIMPLIFIED)
"""Traditional Chinese characters fold to Simplified ones (青黴素過敏 reads as 青霉素过敏)."""
_TOKEN = re.compile(
    r"[a-z0-9]+|[\u0430-\u044f\u0451-\u045f]+"
    r"|[\u3400-\u4dbf\u4e00-\u9fff\u3041-\u3096\u30a1-\u30fa\u30fc\uac00-\ud7a3]"
)
_QUANTITY = re.compile(r"\d+[a-z]*|(?:nda|anda|bla)\d+|q\d+h|x\d+[a-z]*|[a-ce-z]")
"""A stray letter is noise ("1 g", "penicillin-g" is a term of its own), except "d": after a
brand it adds an ingredient (Claritin-D, Allegra-D: pseudoephedrine), so it must be part of a
known term or leave the text unresolved. A course length is a quantity ("x7/7", "x5d")."""
_NDC_WIDTHS = (5, 4, 2)


def fold(text: str) -> str:
    """Lower-case, width-folded, accent-free text (a kana's voicing mark is an accent: "ペ"
    folds as "ヘ"; a Korean syllable stays one character), without the invisible formatting
    characters a copy and paste leaves inside a word (a zero-width space, a soft hyphen, a
    direction mark: "amoxi\u200bcillin" is amoxicillin), and Traditional Chinese characters as
    their Simplified forms ("頭孢" as "头孢"). ASCII text only needs lowering."""
    if text.isascii():
        return text.lower()
    visible = "".join(char for char in text if unicodedata.category(char) != "Cf")
    lowered = (
        unicodedata.normalize("NFKC", visible).lower().translate(_GREEK).translate(_SIMPLIFIED)
    )
    decomposed = unicodedata.normalize("NFKD", lowered)
    plain = "".join(char for char in decomposed if not unicodedata.combining(char))
    return unicodedata.normalize("NFC", plain) if _HANGUL_JAMO.search(plain) else plain


_HANGUL_JAMO = re.compile(r"[\u1100-\u11ff]")


def tokens(text: str) -> tuple[str, ...]:
    """Latin words and digits as whole tokens, each Chinese character as one token."""
    return folded_tokens(fold(text))


def folded_tokens(folded: str) -> tuple[str, ...]:
    """The tokens of a text already folded (`fold`)."""
    return tuple(_TOKEN.findall(folded))


def is_quantity(token: str) -> bool:
    """Strengths, counts, dosing intervals, course lengths, application numbers and stray
    letters but "d".

    For example "500", "5gm", "q8h", "x7", "x7d", "nda020800", "g".
    """
    return _QUANTITY.fullmatch(token) is not None


def normalise_code(system: str, code: str) -> str:
    """Codes compare on digits; hyphenated NDCs are padded to the 11-digit 5-4-2 form; CVX
    codes compare without leading zeros ("03" and "3" are MMR)."""
    stripped = code.strip()
    if system == "ndc" and stripped.count("-") == 2:
        parts = stripped.split("-")
        return "".join(part.zfill(width) for part, width in zip(parts, _NDC_WIDTHS, strict=True))
    folded = re.sub(r"[^0-9A-Za-z]", "", stripped).lower()
    if system == "cvx":
        return folded.lstrip("0") or folded
    return folded
