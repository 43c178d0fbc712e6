"""Secret screening: a quick look for each pattern's needles stands in for its search."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from projections.secrets import (
    _TOKEN_PATTERNS,
    FreeText,
    _folded,
    _readable,
    secrets_in,
    secrets_in_text,
    text_fields,
)

FRAGMENTS = (
    "sk_live_",
    "pk-test-",
    "sk-proj-",
    "sk-ant-api03-",
    "AIza",
    "hf_",
    "shpat_",
    "dop_v1_",
    "dapi",
    "0123456789abcdef",
    "github_pat_",
    "Authorization: Bearer ",
    "bearer ",
    "\uff1a",
    "AKIA",
    "ghp_",
    "xoxb-",
    "eyJ",
    ".eyJ",
    "-----BEGIN RSA PRIVATE KEY-----",
    "Password",
    "PASSWORT",
    "mot de passe",
    "Contraseña",
    "KENNWORT",
    "client_secret",
    "api key",
    "token",
    "https://",
    "user:",
    "@",
    "xoxa-",
    "ghs_",
    "\u0130",
    "\u0131",
    "\u017f",
    "\u212a",
    " is ",
    ": ",
    "=",
    "4111 1111 1111 1111",
    "4111",
    " 1111",
    "\n",
    "pw: ",
    "pswd",
    "DB_PASS=",
    "passphrase ",
    "Hunter2!",
    "PIN: ",
    "4821",
    "login: ",
    "username=",
    " / ",
    "mysql -u root -p",
    "\u2013",
    "(",
    ")",
    "  ",
    " - ",
    "-----BEGIN PGP PRIVATE KEY BLOCK-----",
    "PuTTY-User-Key-File-3:",
    "glpat-",
    "glrt-",
    "hooks.slack.com/services/",
    "whsec_",
    "SG.",
    "npm_",
    "pypi-AgE",
    "GOCSPX-",
    "?sig=",
    "&X-Amz-Signature=",
    "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "AccountKey=",
    "SharedAccessKey",
    "private_key",
    '"password": "',
    "clientSecret",
    "_authToken=",
    " for the portal",
    "redis://:",
    "jdbc:oracle:thin:scott/",
    "密码",
    "パスワード",
    "是",
    "пароль",
    "ПАРОЛЬ",
    "hasło",
    "ŞİFRE",
    "OTP ",
    "verification code ",
    "482913",
    "CVV",
    " mg",
)
texts = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(alphabet="aZ09_-. :=/", max_size=40)),
    max_size=8,
).map("".join)


@given(texts)
def test_given_any_text_a_pattern_matches_then_one_of_its_needles_is_in_it(text: str) -> None:
    for token in _TOKEN_PATTERNS:
        if token.pattern.search(text):
            assert any(needle in _folded(text) for needle in token.needles), token.kind


@pytest.mark.parametrize(
    "text",
    [
        "AP\u0130_KEY = abcd1234",
        "ap\u0131-key: abc123XY",
        "\u017fecret = hunter22",
        "PA\u017f\u017fWORD: letmein",
    ],
)
def test_given_a_letter_a_case_insensitive_pattern_reads_as_ascii_then_the_quick_look_passes_it(
    text: str,
) -> None:
    assert {finding.kind for finding in secrets_in_text("note", text)} == {
        "a credential assignment"
    }


@given(texts)
def test_given_any_text_then_the_kinds_named_are_those_of_the_patterns_that_match(
    text: str,
) -> None:
    kinds = {finding.kind for finding in secrets_in_text("note", text)}
    readable = _readable(text)
    expected = {token.kind for token in _TOKEN_PATTERNS if token.pattern.search(readable)}
    assert kinds - {"a payment card number"} == expected


class Reaction(BaseModel):
    manifestation: str
    notes: tuple[str, ...]


class Claim(BaseModel):
    text: str
    reactions: tuple[Reaction, ...]
    tags: list[str]
    reference: int = 0


claims = st.builds(
    Claim,
    text=texts,
    reactions=st.lists(st.builds(Reaction, manifestation=texts, notes=st.tuples(texts, texts))).map(
        tuple
    ),
    tags=st.lists(texts, max_size=3),
    reference=st.one_of(st.integers(), st.just(4111111111111111)),
)


@given(claims)
def test_given_any_value_then_its_findings_are_those_of_each_string_searched_alone(
    claim: Claim,
) -> None:
    alone = [
        finding
        for field, text in text_fields(claim, "payload")
        for finding in secrets_in_text(field, text)
    ]
    assert secrets_in(FreeText({"payload": claim})) == alone


def test_given_a_card_number_sent_as_a_number_then_it_is_found() -> None:
    claim = Claim(text="x", reactions=(), tags=[], reference=4111111111111111)
    found = secrets_in(FreeText({"payload": claim}))
    assert [(f.field, f.kind) for f in found] == [("payload.reference", "a payment card number")]


def test_given_a_card_number_sent_as_a_whole_floating_point_number_then_it_is_found() -> None:
    class Fact(BaseModel):
        value: float

    assert [f.kind for f in secrets_in(FreeText({"payload": Fact(value=4111111111111111.0)}))] == [
        "a payment card number"
    ]


def test_given_a_card_number_split_across_two_strings_then_nothing_is_found() -> None:
    claim = Claim(text="4111 1111", reactions=(), tags=["1111 1111"])
    assert secrets_in(FreeText({"payload": claim})) == []


def test_given_a_card_number_in_a_nested_string_then_its_path_is_named() -> None:
    reaction = Reaction(manifestation="rash", notes=("paid with 4111 1111 1111 1111",))
    claim = Claim(text="x", reactions=(reaction,), tags=[])
    found = secrets_in(FreeText({"payload": claim}))
    assert [(f.field, f.kind) for f in found] == [
        ("payload.reactions[0].notes[0]", "a payment card number")
    ]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        pytest.param("card 4111 1111 1111 1111 exp 12/29", True, id="given a card number"),
        pytest.param("call daughter +86 138 0013 8002", False, id="given an international phone"),
        pytest.param(
            "ref 86 138 0013 8002",
            False,
            id="given the same digits without a plus then no card brand issues them",
        ),
        pytest.param("ref +4111 1111 1111 1111", False, id="given a card's digits after a plus"),
    ],
)
def test_a_card_number_is_found_but_not_an_international_phone_number(
    text: str, found: bool
) -> None:
    assert bool(secrets_in_text("note", text)) is found


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        pytest.param(
            "key sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
            "an API key",
            id="given an OpenAI project key then an API key",
        ),
        pytest.param(
            "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
            "an API key",
            id="given an Anthropic key then an API key",
        ),
        pytest.param(
            "AIzaSyA1234567890abcdefghijklmnopqrstuv",
            "a Google API key",
            id="given a Google key then a Google API key",
        ),
        pytest.param(
            "HF token hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
            "a Hugging Face token",
            id="given a Hugging Face token then a Hugging Face token",
        ),
        pytest.param(
            "shpat_0123456789abcdef0123456789abcdef",
            "a Shopify token",
            id="given a Shopify access token then a Shopify token",
        ),
        pytest.param(
            "dop_v1_" + "0123456789abcdef" * 4,
            "a DigitalOcean token",
            id="given a DigitalOcean personal token then a DigitalOcean token",
        ),
        pytest.param(
            "databricks dapi0123456789abcdef0123456789abcdef-2",
            "a Databricks token",
            id="given a Databricks token then a Databricks token",
        ),
        pytest.param(
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTU",
            "a GitHub token",
            id="given a fine-grained GitHub token then a GitHub token",
        ),
        pytest.param(
            "Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345",
            "an authorization credential",
            id="given an Authorization header then an authorization credential",
        ),
        pytest.param(
            "Authorization: Basic dXNlcjpodW50ZXIy",
            "an authorization credential",
            id="given basic credentials then an authorization credential",
        ),
        pytest.param(
            "use Bearer abcdefghijklmnopqrstuvwxyz012345",
            "an authorization credential",
            id="given a long token after Bearer then an authorization credential",
        ),
        pytest.param(
            "password\uff1ahunter22",
            "a credential assignment",
            id="given a full-width colon then a credential assignment",
        ),
        pytest.param(
            "\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44: hunter22",
            "a credential assignment",
            id="given a full-width keyword then a credential assignment",
        ),
        pytest.param(
            "Secret: 4711xyz",
            "a credential assignment",
            id="given a keyword and a value with a digit then a credential assignment",
        ),
        pytest.param(
            "the passcode is Tr0ub4dor&3",
            "a credential assignment",
            id="given 'is' and a token then a credential assignment",
        ),
        pytest.param(
            "password: letmein",
            "a credential assignment",
            id="given 'password:' and a word that ends its line then a credential assignment",
        ),
        pytest.param(
            "Login for the portal\nPassword: sunshine.\nCall if locked out",
            "a credential assignment",
            id="given a password line in a longer note then a credential assignment",
        ),
        pytest.param(
            "password=letmein",
            "a credential assignment",
            id="given an '=' assignment of a word then a credential assignment",
        ),
        pytest.param(
            "card 4111\u00a01111\u00a01111\u00a01111",
            "a payment card number",
            id="given groups split by no-break spaces then a card",
        ),
        pytest.param(
            "card 4111\u202f1111\u202f1111\u202f1111",
            "a payment card number",
            id="given groups split by narrow no-break spaces then a card",
        ),
        pytest.param(
            "card 4111.1111.1111.1111.",
            "a payment card number",
            id="given groups split by dots then a card",
        ),
        pytest.param(
            "card 4111-1111-1111-1111",
            "a payment card number",
            id="given groups split by hyphens then a card",
        ),
        pytest.param(
            "visa4111111111111111", "a payment card number", id="given a card glued to a word"
        ),
        pytest.param(
            "paid 4111111111111111EUR", "a payment card number", id="given a card glued to a unit"
        ),
        pytest.param(
            "room 12 4111 1111 1111 1111",
            "a payment card number",
            id="given a number before the card's groups then a card",
        ),
        pytest.param(
            "Amex 3782 822463 10005", "a payment card number", id="given an Amex in 4-6-5 groups"
        ),
        pytest.param(
            "\uff14\uff11\uff11\uff11 1111 1111 1111",
            "a payment card number",
            id="given full-width digits then a card",
        ),
        pytest.param(
            "4111\u200b1111\u200b1111\u200b1111",
            "a payment card number",
            id="given groups split by zero-width spaces then a card",
        ),
        pytest.param(
            "card 4111\t1111\t1111\t1111",
            "a payment card number",
            id="given groups split by tabs then a card",
        ),
        pytest.param(
            "card 4111/1111/1111/1111",
            "a payment card number",
            id="given groups split by slashes then a card",
        ),
        pytest.param(
            "card 4111_1111_1111_1111",
            "a payment card number",
            id="given groups split by underscores then a card",
        ),
        pytest.param(
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "a credential assignment",
            id="given a secret key in a setting's name then a credential",
        ),
        pytest.param(
            "client_secret: 9f8e7d6c5b4a",
            "a credential assignment",
            id="given a client secret then a credential",
        ),
        pytest.param(
            "portal https://anna:S3cretPass@example.com/login",
            "a credential in a URL",
            id="given a user and password in a URL then a credential",
        ),
        pytest.param("Passwort: Geheim123", "a credential assignment", id="given Passwort"),
        pytest.param("wachtwoord: zomer2024", "a credential assignment", id="given wachtwoord"),
        *(
            pytest.param(text, "a credential assignment", id=f"given {text!r}")
            for text in (
                "pass: S3cr3t!",
                "pass=S3cr3t!",
                "pw: Hunter2!",
                "pswd: Hunter2!",
                "DB_PASS=Hunter2!",
                "passphrase: correct-horse-Battery-9",
                "password Hunter2!",
                "password - Hunter2!",
                "mysql -u root -pHunter2!",
                "login: jdoe / Hunter2!",
                "PIN: 4821",
                "Pwd=Hunter2;",
                "pwd: Hunter2",
                "pwd Hunter2!",
            )
        ),
        *(
            pytest.param(text, "an authorization credential", id=f"given {text!r}")
            for text in (
                "Authorization: Basic YWRtaW46aHVudGVyMg==",
                "authorization: bearer ya29.a0AfH6SMBx7Kq2",
            )
        ),
        pytest.param(
            "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxMjM0NTY3ODkwIn0.",
            "a JSON web token",
            id="given an unsigned JWT (alg none, empty signature) then a JSON web token",
        ),
        *(
            pytest.param(text, "a payment card number", id=f"given {text!r}")
            for text in (
                "card 4111\u20131111\u20131111\u20131111",
                "card 4111\u20101111\u20101111\u20101111",
                "card 4111  1111  1111  1111",
                "card (4111) 1111 1111 1111",
                "card 4111 - 1111 - 1111 - 1111",
            )
        ),
    ],
)
def test_given_a_secret_then_its_kind_is_found(text: str, kind: str) -> None:
    assert [finding.kind for finding in secrets_in_text("note", text)] == [kind]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("OTP: 482913", "a one-time code"),
        ("verification code: 482913", "a one-time code"),
        ("2FA code 482913 for booking", "a one-time code"),
        ("sign-in code is 552211", "a one-time code"),
        ("one-time code 4821", "a one-time code"),
        ("\u9a8c\u8bc1\u7801\uff1a482913", "a one-time code"),
        ("CVV: 123", "a card security code"),
        ("CVC2 1234", "a card security code"),
        ("security code 123", "a card security code"),
    ],
)
def test_given_a_one_time_or_card_security_code_then_its_kind_is_found(
    text: str, kind: str
) -> None:
    assert [finding.kind for finding in secrets_in_text("note", text)] == [kind]


@pytest.mark.parametrize(
    "text",
    [
        "OTP clinic: methadone 80 mg daily",
        "OTP: 100 mg",
        "OTP: 1000 mg",
        "OTP 2024 enrolment",
        "Opioid treatment programme (OTP) enrolment 2024",
        "CVVH started 2024-01-02, effluent 2000 ml/h",
        "Code status: DNR",
        "ICD code 1234",
        "auth code 12345678 from the insurer",
        "verification code sent to her phone",
    ],
)
def test_given_a_code_that_is_not_a_secret_then_nothing_is_found(text: str) -> None:
    assert secrets_in_text("note", text) == []


@pytest.mark.parametrize(
    "text",
    [
        "我的密码\uff1aabc12345",
        "密碼: Tr0ub4dor",
        "wifi口令\uff1a88886666",
        "密码是abc123\uff0c请勿外传",
        "密码\uff1aletmein",
        "パスワード\uff1asakura2024",
        "パスワードはHana2024です",
        "暗証番号: 4821abc",
        "비밀번호: Seoul2024!",
        "пароль: Zima2024",
        "ПАРОЛЬ: zima2024",
        "hasło: Lato2024!",
        "lösenord: Sommar2024",
        "şifre: Yaz2024!",
        "jelszó: Nyar2024",
        "mật khẩu: Hanoi2024",
    ],
)
def test_given_a_password_in_another_language_then_a_credential_is_found(text: str) -> None:
    assert [finding.kind for finding in secrets_in_text("note", text)] == [
        "a credential assignment"
    ]


@pytest.mark.parametrize(
    "text",
    [
        "密码已重置",
        "修改密码\uff1a请联系IT部门",
        "密码\uff1a请在2024年前修改",
        "パスワードを忘れた",
        "パスワード\uff1a再設定済み",
        "пароль сброшен администратором",
        "пароль: сброшен администратором вчера",
        "Passwort vergessen, neu angefordert",
        "mot de passe oublié",
        "비밀번호 재설정 요청",
    ],
)
def test_given_a_password_mentioned_in_another_language_then_nothing_is_found(text: str) -> None:
    assert secrets_in_text("note", text) == []


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        pytest.param(
            "DefaultEndpointsProtocol=https;AccountName=ehrstore;AccountKey=Eby8vdM02xNOcqFlqUw"
            "JPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;",
            "a credential assignment",
            id="given an Azure storage connection string then its AccountKey",
        ),
        pytest.param(
            "Endpoint=sb://uac.servicebus.windows.net/;SharedAccessKeyName=Root;"
            "SharedAccessKey=q1w2E3r4T5y6U7i8O9p0a1S2d3F4g5H6j7K8l9Z0x1c=",
            "a credential assignment",
            id="given a Service Bus connection string then its SharedAccessKey",
        ),
        pytest.param(
            "PRIVATE_KEY=MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
            "a credential assignment",
            id="given a private key's setting then a credential",
        ),
        pytest.param(
            '"private_key_id": "1a2b3c", "private_key": "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"',
            "a credential assignment",
            id="given a quoted private key then a credential",
        ),
        pytest.param(
            '{"username": "anna", "password": "Hunter2!"}',
            "a credential assignment",
            id="given a JSON password then a credential",
        ),
        pytest.param(
            '{"password": "letmein", "user": "anna"}',
            "a credential assignment",
            id="given a quoted word as a JSON password then a credential",
        ),
        pytest.param(
            "'password': 'letmein99'",
            "a credential assignment",
            id="given a Python dict's password then a credential",
        ),
        pytest.param(
            '"clientSecret": "9f8e7d6c5b4a"',
            "a credential assignment",
            id="given a camelCase secret's name then a credential",
        ),
        pytest.param(
            "//registry.npmjs.org/:_authToken=abcd1234efgh",
            "a credential assignment",
            id="given npm's _authToken then a credential",
        ),
        pytest.param(
            "password for the portal: Tr0ub4dor&3",
            "a credential assignment",
            id="given what a password opens before its colon then a credential",
        ),
        pytest.param(
            "the password to my account is Summer2024",
            "a credential assignment",
            id="given what a password opens before 'is' then a credential",
        ),
        pytest.param(
            "redis://:Hunter2pass@cache:6379/0",
            "a credential in a URL",
            id="given a URL with a password and no user then a credential",
        ),
        pytest.param(
            "jdbc:oracle:thin:scott/Tiger123@dbhost:1521:orcl",
            "a credential in a URL",
            id="given an Oracle JDBC URL's user and password then a credential",
        ),
    ],
)
def test_given_a_credential_in_a_setting_then_its_kind_is_found(text: str, kind: str) -> None:
    assert [finding.kind for finding in secrets_in_text("note", text)] == [kind]


@pytest.mark.parametrize(
    "text",
    [
        "--password=Hunter2",
        "psql --password=hunter22",
        "--api-key=abcd1234",
        "x--token=abc123",
        "--db-pass=Hunter2!",
        "--private-key=MIIEabc123def",
        "docker login -u admin -p Hunter2!x",
        "contraseña del portal: Verano2024!",
        "Passwort für das Portal: Sommer2024",
        "mot de passe du portail : Soleil2024!",
    ],
)
def test_given_a_command_line_option_or_a_qualified_password_then_a_credential_is_found(
    text: str,
) -> None:
    assert [finding.kind for finding in secrets_in_text("note", text)] == [
        "a credential assignment"
    ]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBGX", "a private key"),
        ("PuTTY-User-Key-File-3: ssh-ed25519\nPrivate-Lines: 1", "a private key"),
        ("deploy with glpat-AbCdEfGhIjKlMnOpQrSt please", "a GitLab token"),
        (
            "webhook https://hooks.slack.com/services/T01ABCDEF/B02GHIJKL/AbCdEfGhIjKlMnOpQrStUvWx",
            "a Slack webhook URL",
        ),
        ("signing secret whsec_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "a webhook signing secret"),
        (
            "SG.AbCdEfGhIjKlMnOpQrStUv.wXyZ0123456789AbCdEfGhIjKlMnOpQrStUvWxYz0",
            "a SendGrid API key",
        ),
        (
            "publish with npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
            "an npm token",
        ),
        ("pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2wtbW5vcC1xcnN0LXV2d3h5ejAxMjM0NQ", "a PyPI token"),
        ("oauth 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", "a Google OAuth client secret"),
        (
            "https://ehr.blob.core.windows.net/c/x.pdf?sv=2022-11-02&sp=r&sig=aB3dE5fG7hI9jK1lM3nO5pQ7%2BA%3D",
            "a URL signature",
        ),
    ],
)
def test_given_a_vendor_token_then_its_kind_is_found(text: str, kind: str) -> None:
    assert [finding.kind for finding in secrets_in_text("note", text)] == [kind]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("device IMEI 490154203237518", id="given a Luhn-valid 15-digit IMEI"),
        pytest.param(
            "Secret: patient does not want family informed",
            id="given 'secret:' and ordinary words",
        ),
        pytest.param("Token: expired, reissue at front desk", id="given 'token:' and a word"),
        pytest.param(
            "Password: reset by the IT desk on Monday", id="given 'password:' and a sentence"
        ),
        pytest.param("the secret is safe with the GP", id="given 'secret is' and a word"),
        pytest.param(
            "Bearer of this letter is her daughter, Mrs Anne Smith-Johnson",
            id="given 'bearer' in prose",
        ),
        pytest.param("sha ab12cd4111111111111111ef", id="given digits inside a mixed code"),
        pytest.param("lot 4111111111111112", id="given a Visa-like number that fails Luhn"),
        pytest.param("order 1234567812345670", id="given a Luhn-valid number no brand issues"),
        pytest.param(
            "uuid a4111111-1111-1111-1110-abcdef012345", id="given the digit groups of a UUID"
        ),
        pytest.param("see https://example.com/a:b/c@d", id="given a URL without a user"),
        pytest.param("mailto anna@example.com, phone 020/123/4567", id="given an address"),
        pytest.param("seen 12/01/2024 and 13/01/2024", id="given dates with slashes"),
        pytest.param("pass\u200bword reset on Monday", id="given a zero-width space in prose"),
        *(
            pytest.param(text, id=f"given {text!r}")
            for text in (
                "PW: 72kg",
                "PW Doppler: 1.5m/s",
                "Pass: negative",
                "Kidney stone pass is likely",
                "password reset requested 2024-01-01",
                "Steinmann pin: 2.0mm",
                "PIN site care daily",
                "PIN: 12345678901",
                "mysql -u root -p mydb",
                "mysql -P3306 -h db",
                "login: jdoe",
                "username: j.doe / ward 3",
                "phone (0612) 345 678",
                "dose 1000 - 2000 - 3000 mg",
                "Prior authorization: basic metabolic panel covered",
                "Authorization: Basic metabolic panel.",
                "PWD: confirmed",
                "PWD: insulin pump user",
                "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE",
                "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBa",
                "Private key holder for the house: neighbour",
                "SG. 1.020 on urinalysis",
                "Sig: take 1 tablet by mouth twice daily",
                "GitLab issue #1234 tracks the import bug",
                "npm install failed on clinic kiosk",
                "docker login -p $REGISTRY_TOKEN",
                "contraseña olvidada, restablecida",
                "Endpoint=sb://uac.servicebus.windows.net/;SharedAccessKeyName=RootManage",
                "IV access: 20G left antecubital",
                "access key for the key safe kept by daughter",
                "Secretary: Jane Doe, ext 4412",
                "password for the portal: reset at front desk",
                "patient's mother knows the password to the iPad",
                '{"key": "diet", "value": "vegetarian"}',
                "SK-II cream applied to the skin; SKAT score 12",
                "dapivirine ring inserted, dapi 25 mg",
                "HF_clinic follow-up: HFrEF, NYHA II",
                "shpat_ prefix in the kiosk log, no key",
            )
        ),
    ],
)
def test_given_text_without_a_secret_then_nothing_is_found(text: str) -> None:
    assert secrets_in_text("note", text) == []


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a-" * 30_000 + "token", id="hyphenated parts before a name"),
        pytest.param("a-" * 30_000 + "pass", id="hyphenated parts before a short name"),
        pytest.param("secret:" * 9_000, id="names each followed by a value without spaces"),
        pytest.param("user:" * 12_000, id="login names without a slash"),
        pytest.param("mysql " * 10_000, id="mysql without -p"),
    ],
)
def test_given_a_long_repetitive_text_then_it_is_read_in_about_linear_time(text: str) -> None:
    """Each part of `a-a-a-…` was a place a setting's name could begin, from where the parts
    after it were read again, and a value's look ahead ran to the end of the text from each
    name: 10,000 characters of parts took 8 s (events may have 64 KiB); each text here is
    about 60,000 characters, read in about 0.1 s; the old reading would pass the timeout."""
    assert secrets_in_text("note", text) == []
