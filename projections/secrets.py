"""Screening free text for secrets that must never enter a memory (or a log, or a topic).

Findings name the kind of secret and where it was, never the secret itself. Text is read in its
NFKC form, so a full-width colon (U+FF1A) after `password`, full-width letters or digits and the
no-break spaces (U+00A0, U+202F) read as their plain forms, and without its invisible format
characters (a zero-width space, U+200B, between a card number's groups hides nothing).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Mapping
from typing import Any, Final, NamedTuple

from pydantic import BaseModel

from schemas.base import field_names
from schemas.events import Event

_NAME_START = r"(?<![\w-])"
"""Where a setting's name begins: not after a letter, a digit, `_` or `-` (not at each part of
`a-b-c-…`, from where the parts would be read again: 10,000 characters of them took 8 s)."""
_LOGIN_TERMS = (
    r"password|passwd|passphrase|pswd|passcode|passwort|kennwort|wachtwoord|mot de passe"
    r"|contrase[ñn]a|senha"
)
_OTHER_LOGIN_WORD = r"(?:пароль|парола|hasło|lösenord|şifre|jelszó|mật khẩu)"
"""Password in Russian, Bulgarian, Polish, Swedish, Turkish, Hungarian and Vietnamese: a pattern of
its own, searched only in text that holds one (every word beginning tries each login term)."""
_CREDENTIAL_WORD = (
    rf"[_-]*(?:[a-z0-9]+[_-]+)*(?:{_LOGIN_TERMS}|pwd"
    r"|(?:client|auth|refresh|session|app|bot|oauth|jwt|api)?(?:secret|token)|api[_ -]?key"
    r"|access[_ -]?token)(?:[_-][a-z0-9]+)*[\"']?"
)
"""A word that names a credential, alone or in a setting's name (`aws_secret_access_key`,
`client_secret`, `db_password`, the camelCase `clientSecret` and npm's `_authToken`), maybe as a
quoted key (`"password": …`)."""
_CJK_LOGIN_WORD = r"(?:密码|密碼|口令|パスワード|暗証番号|비밀번호)"
"""Password in Chinese (simplified and traditional), Japanese and Korean, written without a
space before it (`我的密码`, `wifi口令`)."""
_CJK_SAYS = r"\s*(?:[:=]|是|为|為|は)\s*"
"""A colon (the full-width U+FF1A reads as `:`), or `is` (`密码是…`, `パスワードは…`)."""
_ASCII_VALUE = r"(?=[!-~]{0,63}?(?:\d|[a-z][A-Z]|[_@#$%^&*+=\\|<>~`]))[!-~]{4,}"
"""A password in Chinese, Japanese or Korean text is typed in ASCII (`密码:abc12345`); what the
text goes on to say has no spaces either (`密码:请在2024年前修改`, change it before 2024)."""
_CREDENTIAL_VALUE = r"(?=\S{0,63}?(?:\d|[a-z][A-Z]|[_@#$%^&*+=\\|<>~`]))\S{4,}"
"""A run of four or more characters without spaces that holds a digit, a symbol or a capital
letter after a small one (`hunter22`, `p@ss`, `eyJhbGci`): what a credential looks like, and
what an ordinary word (`Secret: patient does not want family informed`) does not."""

_STRONG_VALUE = (
    r"(?:(?=\S{0,63}?[a-z])(?=\S{0,63}?[A-Z])(?=\S{0,63}?\d)\S{6,}"
    r"|(?=\S{0,63}?[A-Za-z])(?=\S{0,63}?\d)(?=\S{0,63}?[!@#$%^&*?~+=])\S{6,})"
)
"""Six or more characters without spaces mixing small and capital letters with a digit, or
letters and digits with a symbol (`Hunter2!`, `S3cr3t!`): what a password looks like and what a
measurement (`72kg`, `1.5m/s`) or a word does not. Required after a word that is not only a
credential's name (`pass`, `pw`: a pass of a stone, pulsed-wave Doppler) or that is not followed
by `:` or `=` (`password Hunter2!`)."""
_SHORT_CREDENTIAL_WORD = r"[_-]*(?:[a-z0-9]+[_-]+)*(?:pass|pw)"
"""`pass` and `pw`, alone or in a setting's name (`DB_PASS`)."""

_LOGIN_WORD = rf"(?:{_LOGIN_TERMS})"
"""A password given as the whole of its line (`password: letmein`) is one, whatever it looks
like; `Password: reset by the IT desk` goes on in words and is not. `pwd` is a credential's name
only in a setting (`Pwd=…;`, `pwd: Hunter2`): alone it is also a person with diabetes or
dementia (`PWD: confirmed`)."""
_OPAQUE_VALUE = r"(?=\S{0,63}?(?:\d|[a-z][A-Z]|[_+/=~]))\S{8,}"
"""What follows an `Authorization:` header's scheme or a key's name (`AccountKey=`): a token or
Base64 (`dXNlcjpodW50ZXIy`), with a digit, a capital letter after a small one or a symbol, which
words do not have (`Prior authorization: basic metabolic panel covered`)."""
_QUALIFIED_LOGIN_WORD = (
    rf"{_LOGIN_WORD}\s+(?:for|to|of|on|del?|du|des|für|do|da|voor|van)\s+"
    r"(?:(?:the|my|his|her|their|your|our|la|el|le|das|die|den|het)\s+)?[\w.-]+"
)
"""A login word and what it opens (`password for the portal: …`, `contraseña del portal: …`)."""
_KEY_NAME = (
    r"[_-]*(?:[a-z0-9]+[_-]+)*(?:shared|storage)?(?:private|account|access)[_ -]?key(?:[_-][a-z0-9]+)*"
    r"[\"']?"
)
"""The name of a key that is a secret (`PRIVATE_KEY`, Azure's `AccountKey` and
`SharedAccessKey`, `"private_key"`); not `SharedAccessKeyName`, a key's name."""


class _TokenPattern(NamedTuple):
    kind: str
    pattern: re.Pattern[str]
    needles: tuple[str, ...]
    """Lower-case text that every match holds, in the text as `_folded` reads it (the rarest
    such text: `@`, not the `://` of every coding's system URI): the pattern is searched only
    where one of them is, since Python's regular expressions try each branch at
    each position (the credential assignment alone took about 20 us on 100 characters of
    plain clinical text, the combined search of every pattern about 35 us)."""


_TOKEN_PATTERNS: tuple[_TokenPattern, ...] = (
    _TokenPattern(
        "a private key",
        re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\bPuTTY-User-Key-File-\d+:"),
        ("-----begin", "putty-user-key-file-"),
    ),
    _TokenPattern(
        "a GitLab token",
        re.compile(r"\bgl(?:pat|ptt|rt)-[A-Za-z0-9_-]{20,}"),
        ("glpat-", "glptt-", "glrt-"),
    ),
    _TokenPattern(
        "a Slack webhook URL",
        re.compile(r"\bhooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{20,}"),
        ("hooks.slack.com/",),
    ),
    _TokenPattern(
        "a webhook signing secret", re.compile(r"\bwhsec_[A-Za-z0-9+/=]{24,}"), ("whsec_",)
    ),
    _TokenPattern(
        "a SendGrid API key",
        re.compile(r"\bSG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}"),
        ("sg.",),
    ),
    _TokenPattern("an npm token", re.compile(r"\bnpm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"), ("npm_",)),
    _TokenPattern("a PyPI token", re.compile(r"\bpypi-AgE[A-Za-z0-9_-]{50,}"), ("pypi-age",)),
    _TokenPattern(
        "a Google OAuth client secret", re.compile(r"\bGOCSPX-[A-Za-z0-9_-]{24,}"), ("gocspx-",)
    ),
    _TokenPattern(
        "a URL signature",
        re.compile(r"(?i:[?&;](?:sig|x-amz-signature|signature)=)[A-Za-z0-9%/+=_-]{16,}"),
        ("sig=", "signature="),
    ),
    _TokenPattern(
        "an API key",
        re.compile(
            r"\b(?:sk|pk|rk)[-_](?:live[-_]|test[-_])?[A-Za-z0-9]{16,}"
            r"|\bsk-(?:proj|svcacct|admin|ant-[a-z]+\d*)-[A-Za-z0-9_-]{20,}"
        ),
        ("k-", "k_"),
    ),
    _TokenPattern("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), ("aiza",)),
    _TokenPattern(
        "a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{34,}(?![A-Za-z0-9])"), ("hf_",)
    ),
    _TokenPattern(
        "a Shopify token",
        re.compile(r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}(?![0-9A-Za-z])"),
        ("shpat_", "shpca_", "shppa_", "shpss_"),
    ),
    _TokenPattern(
        "a DigitalOcean token", re.compile(r"\bdo[opr]_v1_[a-f0-9]{64}(?![0-9a-f])"), ("_v1_",)
    ),
    _TokenPattern(
        "a Databricks token", re.compile(r"\bdapi[a-f0-9]{32}(?:-\d)?(?![0-9A-Za-z])"), ("dapi",)
    ),
    _TokenPattern(
        "an AWS access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), ("akia", "asia")
    ),
    _TokenPattern(
        "a credential in a URL",
        re.compile(
            r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]*:[^\s/@]+@"
            r"|\bjdbc:oracle:[a-z]+:[^\s/:@]+/[^\s/@]+@"
        ),
        ("@",),
    ),
    _TokenPattern(
        "a GitHub token",
        re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}|\bgithub_pat_[A-Za-z0-9_]{22,}"),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    _TokenPattern("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), ("xox",)),
    _TokenPattern(
        "a JSON web token",
        re.compile(
            r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.(?:[A-Za-z0-9_-]{8,}|(?![\w-]))"
        ),
        ("eyj",),
    ),
    _TokenPattern(
        "an authorization credential",
        re.compile(
            rf"(?i:\bauthorization\s*:\s*(?:bearer|basic|token|digest)\s+){_OPAQUE_VALUE}"
            r"|(?i:\bbearer\s+)(?=[A-Za-z._~+/-]*\d)[A-Za-z0-9._~+/-]{20,}"
        ),
        ("authorization", "bearer"),
    ),
    _TokenPattern(
        "a credential assignment",
        re.compile(
            rf"(?i:{_NAME_START}{_CREDENTIAL_WORD}\s*=\s*)\S{{4,}}"
            rf"|(?i:{_NAME_START}(?:{_CREDENTIAL_WORD}|{_QUALIFIED_LOGIN_WORD})\s*(?:is|:)\s*[\"']?)"
            rf"{_CREDENTIAL_VALUE}"
            rf"|(?i:[\"']{_CREDENTIAL_WORD}\s*:\s*[\"'])[^\"'\s]{{4,}}[\"']"
            rf"|(?i:\b{_LOGIN_WORD}\s*:\s*)\S{{4,64}}?(?=[.,;!)]*(?:$|[\r\n]))"
            rf"|(?i:\b(?:{_LOGIN_WORD}|pwd)(?:\s+[-\u2013\u2014])?\s+){_STRONG_VALUE}"
        ),
        (
            "pass",
            "pwd",
            "pswd",
            "kennwort",
            "wachtwoord",
            "contrase",
            "senha",
            "secret",
            "api",
            "token",
        ),
    ),
    _TokenPattern(
        "a credential assignment",
        re.compile(
            rf"(?i:\b{_OTHER_LOGIN_WORD}\s*(?:=|:)\s*)(?:{_CREDENTIAL_VALUE}"
            rf"|\S{{4,64}}?(?=[.,;!)]*(?:$|[\r\n])))"
            rf"|(?i:\b{_OTHER_LOGIN_WORD}(?:\s+[-\u2013\u2014])?\s+){_STRONG_VALUE}"
            rf"|{_CJK_LOGIN_WORD}{_CJK_SAYS}{_ASCII_VALUE}"
            rf"|{_CJK_LOGIN_WORD}\s*[:=]\s*[!-~]{{4,64}}?(?=[.,;!)\u3002]*(?:$|[\r\n]))"
        ),
        (
            *("пароль", "парола", "hasło", "lösenord", "şifre", "jelszó", "mật khẩu"),
            *("密码", "密碼", "口令", "パスワード", "暗証番号", "비밀번호"),
        ),
    ),
    _TokenPattern(
        "a credential assignment",
        re.compile(rf"(?i:{_NAME_START}{_KEY_NAME}\s*[=:]\s*[\"']?){_OPAQUE_VALUE}"),
        tuple(
            f"{word}{sep}key"
            for word in ("private", "account", "access")
            for sep in ("_", "-", " ", "")
        ),
    ),
    _TokenPattern(
        "a credential assignment",
        re.compile(rf"(?i:{_NAME_START}{_SHORT_CREDENTIAL_WORD}\s*(?:[:=]|is)\s*){_STRONG_VALUE}"),
        ("pass", "pw"),
    ),
    _TokenPattern(
        "a credential assignment",
        re.compile(rf"(?i:\b(?:login\s*|username\s*|user)[:=]\s*\S{{1,64}}\s*/\s*){_STRONG_VALUE}"),
        ("login", "username", "user:", "user="),
    ),
    _TokenPattern(
        "a credential assignment",
        re.compile(r"(?i:\bpin(?:[ _-]?(?:code|number))?[:=]\s*)\d{4,8}(?![\w,/-]|\.\d)"),
        ("pin:", "pin=", "code:", "code=", "number:", "number="),
    ),
    _TokenPattern(
        "a one-time code",
        re.compile(
            r"(?i:\b(?:one[- ]time\s+(?:code|pin|pass(?:word|code)?)"
            r"|(?:verification|2fa|mfa|sms|login|sign[- ]?in|authentication)\s+code)"
            r"\s*(?:[:=#]|is)?\s*)\d{4,8}(?![\w,/-]|\.\d|\s*(?:mg|mcg|ml|units?|iu)\b)"
            r"|(?i:\botp\s*(?:[:=#]|is)?\s*)\d{6,8}(?![\w,/-]|\.\d|\s*(?:mg|mcg|ml|units?|iu)\b)"
            r"|(?:验证码|驗證碼|認証コード|確認コード)\s*(?:[:=]|是|为|為|は)?\s*\d{4,8}(?!\d)"
        ),
        ("otp", "one-time", "one time", "code", "验证码", "驗證碼", "認証コード", "確認コード"),
    ),
    _TokenPattern(
        "a card security code",
        re.compile(r"(?i:\b(?:cvv2?|cvc2?|security\s+code)\s*(?:[:=#]|is)?\s*)\d{3,4}(?![\w,/.-])"),
        ("cvv", "cvc", "security code"),
    ),
    _TokenPattern(
        "a credential assignment",
        re.compile(
            r"(?i:\b(?:mysql|mysqldump|mysqladmin|mariadb)\b)[^\n]{0,200}?\s-p\S{4,}"
            r"|(?i:\bdocker\s+login\b)[^\n]{0,200}?\s-p\s+(?!\$)\S{4,}"
        ),
        ("mysql", "mariadb", "docker"),
    ),
)
_NEEDLES: Final = tuple(
    dict.fromkeys(needle for token in _TOKEN_PATTERNS for needle in token.needles)
)
_GATES: Final = ("_", "=", ".", "-", ":")
"""Characters that most text lacks (`_`, `=`) or that many needles share (`-`, `:`): the needles
holding one are looked for only in text that holds it (the first of them in this order), one
look for the needles of a kind most text has none of. Each needle costs a look (about 70 ns on
100 characters), on every event."""


def _needle_groups(needles: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """`needles` grouped under the first gate each holds; those with none under `""`, looked
    for in every text."""
    groups: dict[str, list[str]] = {}
    for needle in needles:
        gate = next((gate for gate in _GATES if gate in needle), "")
        groups.setdefault(gate, []).append(needle)
    return tuple((gate, tuple(group)) for gate, group in groups.items())


_ASCII_NEEDLE_GROUPS: Final = _needle_groups(tuple(n for n in _NEEDLES if n.isascii()))
_NEEDLE_GROUPS: Final = (
    *_ASCII_NEEDLE_GROUPS,
    ("", tuple(needle for needle in _NEEDLES if not needle.isascii())),
)
"""The needles as text other than ASCII looks for them; ASCII text (most of it, English) looks
for `_ASCII_NEEDLE_GROUPS`, without the needles it cannot hold (`密码`, `пароль`)."""
_ASCII_CASE_FOLDS: Final = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s"})
"""The characters other than ASCII letters that a case-insensitive pattern takes for one (the
dotted and dotless i, the long s) but that `str.lower` does not turn into it."""


def _folded(text: str) -> str:
    """`text` as the needles are looked for in it: lower case, and each character that a
    case-insensitive pattern matches as an ASCII letter written as that letter."""
    return (text if text.isascii() else text.translate(_ASCII_CASE_FOLDS)).lower()


def _token_kinds(text: str) -> dict[str, None]:
    """The kinds of secret the token patterns find in `text` (read by `_readable`), each once;
    a pattern is searched only where one of its needles is."""
    folded = _folded(text)
    present = {
        needle
        for gate, needles in (_ASCII_NEEDLE_GROUPS if folded.isascii() else _NEEDLE_GROUPS)
        if gate in folded
        for needle in needles
        if needle in folded
    }
    if not present:
        return {}
    return dict.fromkeys(
        token.kind
        for token in _TOKEN_PATTERNS
        if not present.isdisjoint(token.needles) and token.pattern.search(text)
    )


_DASHES: Final = str.maketrans(dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"))
"""The hyphens and dashes a word processor writes for `-` (an en dash, U+2013, where
autocorrection replaced a hyphen)."""
_DIGITS_IN_A_ROW = re.compile(r"\d(?:[ .\-/_\t()\u2010-\u2015\u2212]{0,3}\d){12}")
"""Thirteen digits with at most three separators (spaces, dots, hyphens or dashes, slashes,
underscores, tabs, parentheses) between two: every card number as it is written holds them,
and most text does not (the quick test before candidates are read)."""
_WIDE_SEPARATOR = re.compile(r"(?<=\d)(?: ?- ?|( |\t)\1+)(?=\d)")
"""A hyphen with a space around it, or a run of spaces or of tabs, between two digits."""
_DIGITS_IN_PARENTHESES = re.compile(r"\((\d{2,6})\)")


def _card_text(text: str) -> str:
    """`text` with a card number's groups written as `_DIGIT_GROUPS` reads them: dashes as
    hyphens, ` - ` as `-`, runs of spaces as one, and `(4111) 1111 …` without parentheses."""
    if not text.isascii():
        text = text.translate(_DASHES)
    if "(" in text:
        text = _DIGITS_IN_PARENTHESES.sub(r"\1", text)
    return _WIDE_SEPARATOR.sub(lambda match: match.group()[-1] if match.group(1) else "-", text)


_DIGIT_RUN = re.compile(r"(?<![\d+])\d{13,19}(?!\d)")
"""13 to 19 digits in a row; letters may touch them (`visa4111111111111111`)."""
_DIGIT_GROUPS = re.compile(r"(?<![\w.\-/])\d+([ .\-/_\t])\d+(?:\1\d+)*(?![\w\-/]|\.\d)")
"""Groups of digits split by one kind of separator (`4111 1111 1111 1111`, `4111.1111.1111.1111`,
`4111-1111-1111-1111`, a slash, an underscore or a tab) that touch no word, hyphen, slash or
dot: the parts of a UUID or of a dotted version are not a card number."""

_CARD_BRANDS: tuple[tuple[str, str, frozenset[int]], ...] = (
    ("4", "4", frozenset({13, 16, 19})),  # Visa
    ("51", "55", frozenset({16})),  # Mastercard
    ("2221", "2720", frozenset({16})),  # Mastercard
    ("34", "34", frozenset({15})),  # American Express
    ("37", "37", frozenset({15})),  # American Express
    ("6011", "6011", frozenset(range(16, 20))),  # Discover
    ("644", "649", frozenset(range(16, 20))),  # Discover
    ("65", "65", frozenset(range(16, 20))),  # Discover, RuPay, Troy
    ("3528", "3589", frozenset(range(16, 20))),  # JCB
    ("300", "305", frozenset({14, 16, 17, 18, 19})),  # Diners Club
    ("3095", "3095", frozenset({14, 16, 17, 18, 19})),  # Diners Club
    ("36", "36", frozenset(range(14, 20))),  # Diners Club International
    ("38", "39", frozenset(range(16, 20))),  # Diners Club
    ("62", "62", frozenset(range(16, 20))),  # UnionPay
    ("8100", "8171", frozenset(range(16, 20))),  # UnionPay
    ("5018", "5018", frozenset(range(13, 20))),  # Maestro
    ("5020", "5020", frozenset(range(13, 20))),  # Maestro
    ("5038", "5038", frozenset(range(13, 20))),  # Maestro
    ("5893", "5893", frozenset(range(13, 20))),  # Maestro
    ("6304", "6304", frozenset(range(13, 20))),  # Maestro
    ("6759", "6759", frozenset(range(13, 20))),  # Maestro
    ("6761", "6763", frozenset(range(13, 20))),  # Maestro
    ("2200", "2204", frozenset(range(16, 20))),  # Mir
    ("60", "60", frozenset({16})),  # RuPay
    ("81", "82", frozenset({16})),  # RuPay
    ("508", "508", frozenset({16})),  # RuPay
    ("353", "353", frozenset({16})),  # RuPay
    ("356", "356", frozenset({16})),  # RuPay
    ("636", "636", frozenset(range(16, 20))),  # InterPayment
    ("637", "639", frozenset({16})),  # InstaPayment
    ("506099", "506198", frozenset({16, 18, 19})),  # Verve
    ("507865", "507964", frozenset({16, 18, 19})),  # Verve
    ("9792", "9792", frozenset({16})),  # Troy
    ("5019", "5019", frozenset({16})),  # Dankort
    ("8600", "8600", frozenset({16})),  # Uzcard
    ("9860", "9860", frozenset({16})),  # Humo
    ("9704", "9704", frozenset({16})),  # Napas
)
"""The issuer prefixes (first and last of a range, as many digits each) and the lengths of the
card numbers they issue. A 15-digit IMEI that passes the Luhn check (`490154203237518`) has
no brand of that length; nor has UATP's `1` (15 digits), which would take IMEIs for cards."""


class SecretFinding(NamedTuple):
    field: str
    kind: str


def luhn_valid(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def is_card_number(digits: str) -> bool:
    """A number some card brand issues (its prefix and length) that passes the Luhn check."""
    if not digits.isascii():
        digits = "".join(str(unicodedata.digit(char)) for char in digits)
    return (
        len(set(digits)) > 1
        and any(
            len(digits) in lengths and first <= digits[: len(first)] <= last
            for first, last, lengths in _CARD_BRANDS
        )
        and luhn_valid(digits)
    )


def _letters_then_digit(text: str, index: int, step: int) -> bool:
    """Whether, going from `index` by `step`, letters lead to a digit: the run of digits is part of
    a code that mixes them (a hash, an id), not a card number glued to a word."""
    while 0 <= index < len(text) and text[index].isalpha():
        index += step
    return 0 <= index < len(text) and text[index].isdigit()


def _card_candidates(text: str) -> Iterator[str]:
    """The digits of every run or group of runs that may be written as a card number."""
    for match in _DIGIT_RUN.finditer(text):
        if not (
            _letters_then_digit(text, match.start() - 1, -1)
            or _letters_then_digit(text, match.end(), 1)
        ):
            yield match.group()
    for match in _DIGIT_GROUPS.finditer(text):
        separator = match.group(1)
        groups = match.group().split(separator)
        after_plus = text[match.start() - 1 : match.start()] == "+"
        if separator not in " \t":
            if not after_plus:
                yield "".join(groups)
            continue
        for first in range(1 if after_plus else 0, len(groups)):
            digits = ""
            for group in groups[first:]:
                digits += group
                if len(digits) > 19:
                    break
                yield digits


def _readable(text: str) -> str:
    """`text` in NFKC form without invisible format characters (Unicode category Cf)."""
    if text.isascii():
        return text
    text = "".join(char for char in text if unicodedata.category(char) != "Cf")
    return text if unicodedata.is_normalized("NFKC", text) else unicodedata.normalize("NFKC", text)


def secrets_in_text(field: str, text: str) -> list[SecretFinding]:
    text = _readable(text)
    findings = [SecretFinding(field, kind) for kind in _token_kinds(text)]
    if (
        _DIGITS_IN_A_ROW.search(text)
        and not _CODED_VALUE.search(field)
        and any(is_card_number(digits) for digits in _card_candidates(_card_text(text)))
    ):
        findings.append(SecretFinding(field, "a payment card number"))
    return findings


_CODED_VALUE: Final = re.compile(r"\.codes\[\d+\]\.code$")
"""The path of a coding's code: a terminology's identifier, never free text, and one that can
have a card number's shape (a UK dm+d SNOMED CT code has 16 to 18 digits with a check digit:
about one in eight pass a card brand's prefix, length and the Luhn check). Its other screens
still apply."""


def text_fields(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every string inside a model, tuple or list, with its dotted path; an integer, or a
    floating-point whole number, as its digits (a card number sent as a number is still a card
    number)."""
    if isinstance(value, str):
        yield path, value
        return
    if isinstance(value, BaseModel):
        parts: Iterator[tuple[str, Any]] = (
            (f"{path}.{name}", getattr(value, name)) for name in field_names(type(value))
        )
    elif isinstance(value, tuple | list):
        parts = ((f"{path}[{index}]", item) for index, item in enumerate(value))
    else:
        return
    for part_path, item in parts:
        if isinstance(item, str):
            yield part_path, item
        elif (digits := _digits_of(item)) is not None:
            yield part_path, digits
        elif isinstance(item, BaseModel | tuple | list):
            yield from text_fields(item, part_path)


def _texts(value: Any, found: list[str]) -> None:
    """Append every string `text_fields` yields for `value` to `found`, without their paths
    (naming a path costs more than finding the string, and most values need none)."""
    if isinstance(value, str):
        found.append(value)
    elif isinstance(value, BaseModel):
        for name in field_names(type(value)):
            _part_texts(getattr(value, name), found)
    elif isinstance(value, tuple | list):
        for item in value:
            _part_texts(item, found)


def _digits_of(number: Any) -> str | None:
    """The digits of an integer or of a whole floating-point number below 10^19 (a card
    number sent as 4111111111111111.0); None for anything else."""
    if isinstance(number, bool):
        return None
    if isinstance(number, int):
        return str(number)
    if isinstance(number, float) and number.is_integer() and abs(number) < 1e19:
        return str(int(number))
    return None


def _part_texts(item: Any, found: list[str]) -> None:
    if isinstance(item, str):
        found.append(item)
    elif (digits := _digits_of(item)) is not None:
        found.append(digits)
    elif isinstance(item, BaseModel | tuple | list):
        _texts(item, found)


class FreeText:
    """The strings inside some values (`payload`, `source_ref`...; None holds nothing), gathered
    once for every screen that reads them: `together` holds them one per line."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.values = values
        texts: list[str] = []
        for value in values.values():
            _texts(value, texts)
        self.together = "\n".join(texts)

    def fields(self) -> Iterator[tuple[str, str]]:
        """Every string with its path (naming the paths costs more than gathering the strings:
        a screen asks only when `together` holds what it looks for)."""
        for path, value in self.values.items():
            yield from text_fields(value, path)


def secrets_in(text: FreeText) -> list[SecretFinding]:
    """The secrets in every string of `text`, each named by its path. The strings are first
    searched together, one per line: a line break bounds words and digit runs as the ends of a
    string do, so whatever any pattern matches within one string it also matches there, and
    text with nothing that looks like a secret (most, also when a needle such as the `pin` of
    `aspirin` is in it) is searched once, its paths never named."""
    together = _readable(text.together)
    if not (_token_kinds(together) or _DIGITS_IN_A_ROW.search(together)):
        return []
    return [finding for field, value in text.fields() for finding in secrets_in_text(field, value)]


def note_withheld(event: Event) -> tuple[Event, tuple[str, ...]]:
    """The event with its payload's `note` replaced by a marker when the note holds what looks
    like a secret, and the kinds of secret found (none: the event unchanged).

    For an importer: a clinical record's free-text note is secondary to the record, and the
    gate refuses a whole event with a secret anywhere in it, so a secret-looking number in a
    note (a card-like reference) would otherwise cost the allergy or prescription itself. The
    marker keeps it visible that a note was there; the secret never enters the log."""
    note = getattr(event.payload, "note", None)
    if not isinstance(note, str):
        return event, ()
    kinds = tuple(dict.fromkeys(finding.kind for finding in secrets_in_text("note", note)))
    if not kinds:
        return event, ()
    marker = f"[note withheld at import: it looked like it held {' and '.join(kinds)}]"
    payload = event.payload.model_copy(update={"note": marker})
    return event.model_copy(update={"payload": payload}), kinds
