"""The function allowlist of the analyst SQL guard, without an engine: how the committed file is
read, which aggregate combinators it allows, and what the lexical check makes of a `name(`.
tests/unit/test_analytics.py checks the list against the bundled engine and runs the parser
check on real `EXPLAIN AST` output."""

from __future__ import annotations

import pytest

from streams import sql_guard
from streams.sql_guard import ANALYST_FUNCTIONS, AllowedFunctions, QueryRefused, check_sql

SERVER_READING = [
    "hostName",
    "version",
    "getSetting",
    "getSettingOrDefault",
    "currentUser",
    "currentDatabase",
    "currentRoles",
    "uptime",
    "serverUUID",
    "fqdn",
    "tcpPort",
    "timezone",
    "serverTimezone",
    "getOSKernelVersion",
    "zookeeperSessionUptime",
    "displayName",
    "buildId",
    "getMacro",
    "connectionId",
    "user",
    "database",
    "chdb",
    "readServerSecrets",
]
"""Functions that read the server (its name, version, settings, session, disks), and an invented
one a later engine version could add: none is on the list."""


def _forms(name: str) -> list[str]:
    mixed = "".join(c.upper() if i % 2 else c.lower() for i, c in enumerate(name))
    return [f"{name}()", f'"{name}"()', f"`{name}`()", f"{mixed}()", f"`{name.upper()}` /* */ ()"]


@pytest.mark.parametrize("name", SERVER_READING)
def test_a_function_that_reads_the_server_is_not_on_the_list(name: str) -> None:
    assert not ANALYST_FUNCTIONS.allows(name)
    assert not ANALYST_FUNCTIONS.allows(name.upper())


@pytest.mark.parametrize(
    "sql", [f"SELECT {call} AS x" for name in SERVER_READING for call in _forms(name)]
)
def test_the_lexical_check_refuses_a_function_not_on_the_list_in_every_spelling(sql: str) -> None:
    with pytest.raises(QueryRefused, match="is not among the functions analysts may call"):
        check_sql(sql)


def test_the_refusal_names_the_function_as_written() -> None:
    with pytest.raises(QueryRefused) as refused:
        check_sql("SELECT `hostName`() FROM events")
    assert str(refused.value) == (
        "the function 'hostName' is not among the functions analysts may call (docs/analyst.md)"
    )


def test_a_function_of_the_denylist_keeps_its_own_message() -> None:
    with pytest.raises(QueryRefused, match="'dictget' reads data outside your relations"):
        check_sql("SELECT dictGet('d', 'a', 1)")


@pytest.mark.parametrize(
    "name",
    [
        "sumIf",
        "countIf",
        "uniqExactIf",
        "countDistinct",
        "sumDistinct",
        "quantilesTDigestIf",
        "avgState",
        "sumMerge",
        "sumMergeState",
        "groupArrayDistinct",
        "sumOrNull",
        "sumArray",
        "sumForEach",
        "sumResample",
        "sumMap",
        "avgOrDefaultIf",
        "uniqSimpleState",
        "maxArgMin",
        "anyLastIfOrNull",
        "SUMIF",
        "median",
        "medianIf",
        "varSampIf",
    ],
)
def test_an_allowed_aggregate_with_combinators_is_allowed(name: str) -> None:
    assert ANALYST_FUNCTIONS.allows(name)


@pytest.mark.parametrize(
    "name",
    [
        "hostNameIf",
        "readServerSecretsState",
        "versionOrNull",
        "plusIf",
        "lowerIf",
        "sumIff",
        "sumUnknownCombinator",
        "Distinct",
        "IfIf",
        "aggThrowIf",
    ],
)
def test_a_combinator_on_a_function_that_is_no_allowed_aggregate_is_refused(name: str) -> None:
    assert not ANALYST_FUNCTIONS.allows(name)


def test_a_name_of_many_combinators_is_decided_in_one_pass_over_its_prefixes() -> None:
    assert ANALYST_FUNCTIONS.allows("sum" + "If" * 20_000)
    assert not ANALYST_FUNCTIONS.allows("hostName" + "StateMerge" * 5_000)


@pytest.mark.parametrize(
    ("name", "alias"),
    [
        ("quantile", "median"),
        ("any", "first_value"),
        ("anyLast", "last_value"),
        ("toYear", "YEAR"),
        ("replaceAll", "replace"),
        ("lower", "lcase"),
        ("dateDiff", "date_diff"),
        ("toStartOfMonth", "TOSTARTOFMONTH"),
    ],
)
def test_a_function_and_its_aliases_are_allowed_alike(name: str, alias: str) -> None:
    assert ANALYST_FUNCTIONS.allows(name)
    assert ANALYST_FUNCTIONS.allows(alias)


def test_the_list_is_read_name_by_name_with_aggregates_marked() -> None:
    allowed = AllowedFunctions.parse("# header\n\nsum aggregate  # adds\nLower # lower-case\n")
    assert allowed == AllowedFunctions(frozenset({"sum", "lower"}), frozenset({"sum"}))
    assert allowed.allows("SUMIF")
    assert not allowed.allows("lowerIf")


@pytest.mark.parametrize("line", ["sum aggregat", "sum aggregate extra", "two words"])
def test_a_malformed_line_of_the_list_is_an_error(line: str) -> None:
    with pytest.raises(ValueError, match="line 2 of the function allowlist"):
        AllowedFunctions.parse(f"ok\n{line}\n")


def test_the_committed_list_is_loaded() -> None:
    assert len(ANALYST_FUNCTIONS.functions) > 1000
    assert {"count", "sum", "row_number", "lagInFrame".lower()} <= ANALYST_FUNCTIONS.aggregates


NOT_CALLS = [
    "SELECT CAST(a AS Nullable(String)), a::Decimal(10, 2), CAST(b AS DateTime64(3, 'UTC'))"
    " FROM events",
    "SELECT CAST(x AS Array(LowCardinality(Nullable(String)))) FROM t",
    "SELECT EXTRACT(YEAR FROM occurred_at), INTERVAL (1) DAY FROM events",
    "SELECT count() FROM events WHERE type IN ('a', 'b') AND NOT (a) OR EXISTS (SELECT 1)",
    "SELECT x FROM t WHERE x = ANY (SELECT 1) AND x > ALL (SELECT 1) AND x = SOME (SELECT 1)",
    "SELECT sum(x) FILTER (WHERE x > 1) OVER (PARTITION BY y) FROM t WINDOW w AS (ORDER BY y)",
    "WITH t (a, b) AS (SELECT 1, 2), u AS (SELECT 3) SELECT * FROM t, u",
    "SELECT arrayMap(x -> (x + 1), [1]), (1, 2), COLUMNS('^a') FROM t",
    "SELECT * EXCEPT (a) REPLACE (b AS c) FROM t GROUP BY ROLLUP(a), CUBE(b)",
    "SELECT a FROM t GROUP BY GROUPING SETS ((a), (b)) ORDER BY a WITH FILL STEP (1) LIMIT (5)",
    "SELECT * FROM numbers(3) AS n, values('a UInt8', 1) AS v JOIN zeros(1) AS z USING (number)",
    "SELECT CASE (x) WHEN (1) THEN (2) ELSE (3) END FROM t",
    "SELECT substring(s FROM (1) FOR (2)), trim(BOTH (' ') FROM s), position('a' IN (s)) FROM t",
    "SELECT a BETWEEN (1) AND (2), a LIKE ('x'), a ILIKE ('y'), a IS NOT NULL FROM t",
    "SELECT DISTINCT (a) FROM t WHERE a GLOBAL IN (1) AND a NOT IN (2) HAVING (1) QUALIFY (1)",
]


@pytest.mark.parametrize("sql", NOT_CALLS)
def test_a_keyword_type_or_table_before_a_parenthesis_is_no_call(sql: str) -> None:
    check_sql(sql)


@pytest.mark.parametrize(
    "sql",
    [
        "WITH hostName (a) AS x SELECT 1",
        "SELECT version(1) AS y",
    ],
)
def test_only_a_name_whose_parentheses_close_before_as_and_a_subquery_is_a_with_table(
    sql: str,
) -> None:
    with pytest.raises(QueryRefused, match="not among the functions"):
        check_sql(sql)


def test_no_word_before_a_parenthesis_is_on_the_denylist() -> None:
    words = sql_guard.SQL_WORDS_BEFORE_PARENTHESES
    assert not any(sql_guard._is_forbidden_function(word) for word in words)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * APPLY(getSetting) FROM events",
        "SELECT COLUMNS('^subject') APPLY hostName FROM events",
        "SELECT * EXCEPT (payload) APPLY(x -> toString(x)) FROM events",
        "SELECT t.* REPLACE (1 AS a) apply toString FROM events AS t",
    ],
)
def test_a_column_transformer_that_calls_a_function_by_name_is_refused(sql: str) -> None:
    with pytest.raises(QueryRefused, match="APPLY is not allowed"):
        check_sql(sql)


def test_a_column_named_apply_is_no_transformer() -> None:
    check_sql("SELECT apply, x AS apply FROM t")


@pytest.mark.parametrize(
    "sql",
    [
        "WITH `uac.events` AS (SELECT 1) SELECT 1",
        'WITH "uac.state_checkpoints" (a) AS (SELECT 1) SELECT 1',
        "WITH x AS (SELECT 1), \u201cuac.events\u201d /* c */ AS (SELECT 1) SELECT 1",
        "WITH RECURSIVE `a b` AS (SELECT 1) SELECT 1",
        "SELECT * FROM (WITH `UAC.EVENTS` AS (SELECT 1) SELECT 1)",
    ],
)
def test_a_with_table_whose_name_is_no_bare_word_is_refused(sql: str) -> None:
    """A WITH table named `uac.events` stood in for the stored table inside the relations'
    definitions (they read `uac.events`), so an analyst could forge the consents in force."""
    with pytest.raises(QueryRefused, match="WITH table needs a plain name"):
        check_sql(sql)


def test_a_with_table_may_be_named_in_quotes_as_a_bare_word_is() -> None:
    check_sql(
        'WITH `recent` AS (SELECT 1), "by_type" (a) AS (SELECT 2), x$1 AS (SELECT 3) SELECT 1'
    )


def test_a_table_alias_with_column_names_is_no_call() -> None:
    check_sql("SELECT a FROM (SELECT 1) AS t (a)")


@pytest.mark.parametrize("sql", ['SELECT "select"(1)', 'SELECT "Nullable"(1)', "SELECT `OVER`(1)"])
def test_a_quoted_name_is_never_taken_for_a_keyword(sql: str) -> None:
    with pytest.raises(QueryRefused, match="not among the functions"):
        check_sql(sql)


def test_a_quoted_name_of_an_allowed_function_is_allowed() -> None:
    check_sql('SELECT `in`(1, [1]), "count"(), `SUM`(1)')


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT * FROM mergeTreeIndex('uac', 'events')", "the table function 'mergeTreeIndex'"),
        (
            "SELECT * FROM numbers(1) JOIN `generateRandom`('a String') AS g ON 1",
            "'generateRandom'",
        ),
        ("SELECT * FROM numbers(1), python('frame')", "'python' is not among the functions"),
    ],
)
def test_a_table_function_that_generates_no_data_is_refused_by_name(sql: str, message: str) -> None:
    with pytest.raises(QueryRefused, match=message):
        check_sql(sql)
