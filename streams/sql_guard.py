"""What an analyst's SQL may be: one read-only statement over the relations that calls only the
functions of a committed allowlist (`analyst_functions.txt`), checked lexically (comments and
literals skipped), by ClickHouse's parser (`EXPLAIN AST`) and by its analyzer (`EXPLAIN QUERY
TREE`); and the full query built from it with the relation definitions."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Final

from streams.clickhouse import DATABASE
from streams.query_relations import (
    PURPOSE_PARAMETER,
    READ_AT_PARAMETER,
    READABLE_TABLES,
    RELATIONS,
    TENANT_PARAMETER,
    relations,
)

QUERY_OWN_TABLES: Final = "_temporary_and_external_tables._tmp_"
"""Prefix of the temporary tables the engine creates for the query itself (WITH RECURSIVE)."""
GENERATOR_TABLE_FUNCTIONS: Final = frozenset(
    {"numbers", "numbers_mt", "zeros", "zeros_mt", "generateSeries", "generate_series", "values"}
)
FORBIDDEN_DATABASES: Final = frozenset({DATABASE, "system", "information_schema"})
FORBIDDEN_FUNCTIONS: Final = frozenset(
    {
        "file",
        "url",
        "urlcluster",
        "remote",
        "remotesecure",
        "cluster",
        "clusterallreplicas",
        "merge",
        "loop",
        "input",
        "executable",
        "dictionary",
        "joinget",
        "joingetornull",
        "catboostevaluate",
        "s3",
        "s3cluster",
        "gcs",
        "azureblobstorage",
        "hdfs",
        "mysql",
        "postgresql",
        "sqlite",
        "mongodb",
        "redis",
        "jdbc",
        "odbc",
        "iceberg",
        "deltalake",
        "hudi",
        "getserversetting",
        "getmergetreesetting",
        "hascolumnintable",
        "showcertificate",
        "generateserialid",
        "addresstoline",
        "addresstolinewithinlines",
        "addresstosymbol",
        "demangle",
    }
)
"""Functions that read data from outside the wrapped relations: other tables, files, URLs, the
server's configuration, catalog or binary, or that write (a Keeper counter); compared
case-insensitively."""
FORBIDDEN_FUNCTION_PREFIXES: Final = ("dict", "region", "filesystem", "ai")
"""Families refused by the start of their names: dictionaries (`dictGet`), the embedded
dictionaries (`regionToName`), the server's disks (`filesystemAvailable`) and the functions that
send rows to an AI service (`aiGenerate`), including those a later engine version adds."""


ANALYST_FUNCTIONS_FILE: Final = Path(__file__).with_name("analyst_functions.txt")
"""The committed allowlist of the functions an analyst may call (its header says how it is
written and reviewed)."""
AGGREGATE_COMBINATORS: Final = (
    "If",
    "Array",
    "Map",
    "SimpleState",
    "State",
    "Merge",
    "MergeState",
    "ForEach",
    "Distinct",
    "OrDefault",
    "OrNull",
    "Resample",
    "ArgMin",
    "ArgMax",
)
"""Suffixes that make another aggregate function of an allowed one (`sumIf`, `uniqExactIf`,
`avgState`, `sumMerge`, `countDistinct`, `avgOrDefaultIf`), stacked in any order."""
_COMBINATORS_BY_NAME: Final = tuple(suffix.lower() for suffix in AGGREGATE_COMBINATORS)


@dataclass(frozen=True)
class AllowedFunctions:
    """The allowlist, lower-cased: every function, and the aggregate ones among them."""

    functions: frozenset[str]
    aggregates: frozenset[str]

    @classmethod
    def parse(cls, text: str) -> AllowedFunctions:
        """From the allowlist file's text: `name [aggregate]` per line, `#` comments."""
        functions: set[str] = set()
        aggregates: set[str] = set()
        for number, line in enumerate(text.splitlines(), start=1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if len(words) > 2 or words[1:] not in ([], ["aggregate"]):
                raise ValueError(f"line {number} of the function allowlist: {line!r}")
            functions.add(words[0].lower())
            if words[1:]:
                aggregates.add(words[0].lower())
        return cls(frozenset(functions), frozenset(aggregates))

    def allows(self, name: str) -> bool:
        """Whether an analyst may call `name` (any case): a listed function, or an aggregate
        function made of a listed one by combinators (`sumIf`, `uniqExactIfState`)."""
        lowered = name.lower()
        return lowered in self.functions or self._combined_aggregate(lowered)

    @cached_property
    def _longest_aggregate(self) -> int:
        return max(map(len, self.aggregates), default=0)

    def _combined_aggregate(self, name: str) -> bool:
        """Whether `name` is a listed aggregate followed by one or more combinator suffixes.
        Each prefix of `name` is looked at once, by its end (no recursion, no regular
        expression, no copy longer than the longest aggregate's name), so a name of thousands
        of `If`s costs one pass over its prefixes."""
        longest = self._longest_aggregate
        pending, seen = [len(name)], {len(name)}
        while pending:
            end = pending.pop()
            for suffix in _COMBINATORS_BY_NAME:
                base = end - len(suffix)
                if base <= 0 or not name.endswith(suffix, 0, end):
                    continue
                if base <= longest and name[:base] in self.aggregates:
                    return True
                if base not in seen:
                    seen.add(base)
                    pending.append(base)
        return False


ANALYST_FUNCTIONS: Final = AllowedFunctions.parse(ANALYST_FUNCTIONS_FILE.read_text("utf-8"))

SQL_WORDS_BEFORE_PARENTHESES: Final = frozenset(
    {
        # clauses, operators and constructs that may be followed by `(` in a SELECT
        "all",
        "and",
        "any",
        "anti",
        "array",
        "as",
        "asc",
        "asof",
        "between",
        "both",
        "by",
        "case",
        "columns",
        "cross",
        "cube",
        "desc",
        "distinct",
        "div",
        "else",
        "end",
        "escape",
        "except",
        "exists",
        "fill",
        "filter",
        "final",
        "first",
        "following",
        "for",
        "from",
        "full",
        "global",
        "having",
        "ilike",
        "in",
        "inner",
        "interpolate",
        "intersect",
        "interval",
        "is",
        "join",
        "last",
        "leading",
        "left",
        "like",
        "limit",
        "mod",
        "natural",
        "not",
        "null",
        "nulls",
        "offset",
        "on",
        "or",
        "outer",
        "over",
        "partition",
        "paste",
        "preceding",
        "prewhere",
        "qualify",
        "range",
        "recursive",
        "regexp",
        "replace",
        "right",
        "rollup",
        "rows",
        "sample",
        "select",
        "semi",
        "sets",
        "some",
        "staleness",
        "step",
        "then",
        "ties",
        "to",
        "top",
        "totals",
        "trailing",
        "union",
        "using",
        "when",
        "where",
        "window",
        "with",
        # the data types and their words (`CAST(x AS Nullable(String))`, `x::Decimal(10, 2)`)
        "aggregatefunction",
        "simpleaggregatefunction",
        "nullable",
        "lowcardinality",
        "decimal",
        "decimal32",
        "decimal64",
        "decimal128",
        "decimal256",
        "datetime",
        "datetime32",
        "datetime64",
        "time",
        "time64",
        "fixedstring",
        "enum",
        "enum8",
        "enum16",
        "tuple",
        "map",
        "json",
        "object",
        "variant",
        "dynamic",
        "qbit",
        "varchar",
        "varchar2",
        "nvarchar",
        "char",
        "nchar",
        "character",
        "varying",
        "national",
        "binary",
        "varbinary",
        "float",
        "double",
        "precision",
        "dec",
        "numeric",
        "fixed",
        "int",
        "integer",
        "tinyint",
        "smallint",
        "mediumint",
        "bigint",
        "bit",
        "text",
        "blob",
        "signed",
        "unsigned",
        "timestamp",
        *(name.lower() for name in GENERATOR_TABLE_FUNCTIONS),
    }
)
"""Words that may stand before `(` in an analyst's SELECT without calling a function: keywords,
data types (and the generating table functions). The lexical check lets these through and
refuses every other `name(` that is not on the allowlist; none of them is a function the engine
knows that the allowlist leaves out (tests/unit/test_analytics.py checks), and the parser check
sees the real calls whatever the lexical one let through."""

_CTE_COLUMNS: Final = ("as", "(")
"""`WITH t (a, b) AS (SELECT ...)`: a WITH table's column names, not a call of `t`."""


EXPLAIN_SETTINGS: Final = {"enable_scalar_subquery_optimization": 0}
"""For `EXPLAIN QUERY TREE`: keep a folded scalar subquery in the tree (not `__getScalar(hash)`)."""


class QueryRefused(ValueError):
    """The SQL is not a single read-only statement over the tenant's relations."""


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    start: int

    @property
    def name(self) -> str:
        """An identifier's name without quotes, lower-cased (empty for other tokens)."""
        if self.kind == "word":
            return self.text.lower()
        if self.kind == "quoted":
            return self.text[1:-1].lower()
        return ""


_SPACE = re.compile(r"\s+")
_LINE_COMMENT = re.compile(r"(--|//|# |#!)[^\n]*")
_STRING = re.compile(r"'(?:[^'\\]|\\.|'')*'|\u2018[^\u2019]*\u2019", re.DOTALL)
_QUOTED = re.compile(r'"(?:[^"\\]|\\.|"")*"|`(?:[^`\\]|\\.|``)*`|\u201c[^\u201d]*\u201d', re.DOTALL)
_WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_NUMBER = re.compile(r"[0-9][0-9_]*(?:\.[0-9_]*)?(?:[eE][-+]?[0-9_]+)?[A-Za-z0-9_]*")
_UNTERMINATED = frozenset("'\"`\u2018\u201c")
"""ClickHouse's lexing (`src/Parsers/Lexer.cpp`): `--`, `//`, `# ` and `#!` start a line comment
(a `#` before anything else is an error there); a here-doc's tag is everything from its `$` to
the next `$`; a bare word may hold `$` (`x$a$` is one identifier, not a word and a here-doc);
text in U+2018 and U+2019 quotes is a string, in U+201C and U+201D a quoted identifier."""


def _block_comment_end(sql: str, start: int) -> int:
    """End of a (possibly nested) `/* ... */` comment starting at `start`."""
    depth, position = 0, start
    while position < len(sql):
        pair = sql[position : position + 2]
        if pair == "/*":
            depth, position = depth + 1, position + 2
        elif pair == "*/":
            depth, position = depth - 1, position + 2
            if depth == 0:
                return position
        else:
            position += 1
    raise QueryRefused("the SQL has an unterminated /* comment */")


class _HereDocs:
    """Where each here-doc of `sql` ends, found in one pass: every `$` starts a candidate tag
    (up to the next `$`), and a here-doc ends at the next copy of its own tag. Looking for each
    tag with a regular expression scans to the end of the SQL once per unclosed tag."""

    def __init__(self, sql: str) -> None:
        self._sql = sql
        dollars = [position for position, character in enumerate(sql) if character == "$"]
        self._tag_end = dict(zip(dollars, [end + 1 for end in dollars[1:]], strict=False))
        self._starts: dict[str, list[int]] = {}
        for start, end in self._tag_end.items():
            self._starts.setdefault(sql[start:end], []).append(start)

    def at(self, position: int) -> str | None:
        """The here-doc that starts at `position`, if one does."""
        end = self._tag_end.get(position)
        if end is None:
            return None
        tag = self._sql[position:end]
        starts = self._starts[tag]
        closing = bisect.bisect_left(starts, end)
        if closing == len(starts):
            return None
        return self._sql[position : starts[closing] + len(tag)]


def tokens(sql: str) -> Iterator[Token]:
    """Code tokens of `sql` (ClickHouse lexing: comments skipped, literals as single tokens)."""
    heredocs = _HereDocs(sql)
    position = 0
    while position < len(sql):
        if sql.startswith("/*", position):
            position = _block_comment_end(sql, position)
            continue
        skipped = _SPACE.match(sql, position) or _LINE_COMMENT.match(sql, position)
        if skipped:
            position = skipped.end()
            continue
        token = _token_at(sql, position, heredocs)
        yield token
        position += len(token.text)


def _token_at(sql: str, position: int, heredocs: _HereDocs) -> Token:
    string = _STRING.match(sql, position)
    if string:
        return Token("string", string.group(), position)
    heredoc = heredocs.at(position)
    if heredoc:
        return Token("string", heredoc, position)
    for kind, pattern in (
        ("quoted", _QUOTED),
        ("word", _WORD),
        ("number", _NUMBER),
    ):
        found = pattern.match(sql, position)
        if found:
            return Token(kind, found.group(), position)
    if sql[position] in _UNTERMINATED:
        raise QueryRefused(f"the SQL has an unterminated literal at character {position}")
    return Token("punct", sql[position], position)


def _is_forbidden_function(name: str) -> bool:
    return name in FORBIDDEN_FUNCTIONS or name.startswith(FORBIDDEN_FUNCTION_PREFIXES)


def _statement(sql: str) -> list[Token]:
    """The code tokens of the one statement in `sql` (trailing semicolons dropped)."""
    found = list(tokens(sql))
    while found and found[-1].text == ";":
        found.pop()
    if not found:
        raise QueryRefused("the SQL is empty")
    if any(token.text == ";" for token in found):
        raise QueryRefused("only one statement is allowed (found `;` between statements)")
    if found[0].name not in {"select", "with"}:
        raise QueryRefused(
            f"only a read-only SELECT (or WITH ... SELECT) is allowed, not {found[0].text!r}"
        )
    return found


ANALYST_PARAMETERS: Final = (TENANT_PARAMETER, PURPOSE_PARAMETER, READ_AT_PARAMETER)
"""The query parameters an analyst's SQL may name (`{tenant:String}`, docs/analyst.md). The
others are the relations' own: `erased` holds the `subject_ref` of every subject, of every
tenant, whose erasure is under way."""


def check_analyst_parameters(sql: str) -> None:
    """Refuse a query parameter `{name:Type}` in the analyst's SQL that is not one of
    ANALYST_PARAMETERS (the layer's own statements, `streams.alert_lineage`, bind others)."""
    found = list(tokens(sql))
    for index, token in enumerate(found[:-2]):
        name, colon = found[index + 1], found[index + 2]
        if token.text != "{" or name.kind != "word" or colon.text != ":":
            continue
        if name.text not in ANALYST_PARAMETERS:
            allowed = ", ".join(f"{{{parameter}:...}}" for parameter in ANALYST_PARAMETERS)
            raise QueryRefused(
                f"the query parameter {{{name.text}:...}} is not one an analyst's SQL may use "
                f"({allowed})"
            )


_PLACEHOLDER_START: Final = re.compile(r"\{\$?\w+:")
"""The start of a `{name:Type}` query parameter (clickhouse-connect's names: `$` may lead)."""


def _refuse_unclosed_placeholder(sql: str) -> None:
    """A `{name:` with no `}` after it: clickhouse-connect looks for every parameter's closing
    brace up to the end of the SQL, so a run of them (12 KB of `{a:` inside a string) held the
    query layer, the running sink's too, for seconds of CPU, growing with the square of the
    size. Found in one pass: only the text after the last `}` can hold one."""
    unclosed = _PLACEHOLDER_START.search(sql, sql.rfind("}") + 1)
    if unclosed is not None:
        raise QueryRefused(
            f"the SQL has {unclosed.group()!r} with no closing '}}' at character "
            f"{unclosed.start()}: a query parameter is written {{name:Type}}"
        )


def check_sql(sql: str) -> list[Token]:
    """Refuse SQL that is not one read-only statement over the relations (lexical rules)."""
    _refuse_unclosed_placeholder(sql)
    found = _statement(sql)
    closing = _closing_parentheses(found)
    for index, (token, following) in enumerate(zip(found, [*found[1:], None], strict=True)):
        after = following.text if following else ""
        if token.name in FORBIDDEN_DATABASES and after == ".":
            raise QueryRefused(
                f"the SQL names the database {token.name!r} directly; query the relations "
                f"({', '.join(RELATIONS)}) by their bare names"
            )
        if token.kind == "word" and token.name == "apply" and _follows(found, index, _TRANSFORMED):
            raise QueryRefused(APPLY_REFUSED)
        if token.kind in {"word", "quoted"} and after == "(":
            _check_called(found, index, closing)
        if token.kind == "quoted" and _defines_table(found, index, closing):
            _check_table_name_defined(token.text[1:-1])
        if token.name == "settings" and token.kind == "word":
            raise QueryRefused("a SETTINGS clause is not allowed in analyst queries")
        if token.name == "into" and following is not None and following.name == "outfile":
            raise QueryRefused("INTO OUTFILE is not allowed in analyst queries")
        if token.name == "format" and following is not None and following.name == "native":
            raise QueryRefused(FORMAT_REFUSED)
    return found


_PLAIN_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
"""A name as a bare word spells it."""
WITH_NAME_REFUSED: Final = (
    "a WITH table needs a plain name (letters, digits and _, as a bare word is written), not "
    "{name!r}: a name with a dot in it (`uac.events`) would stand in for a stored table inside "
    "the relations' definitions"
)


def _defines_table(found: Sequence[Token], index: int, closing: dict[int, int]) -> bool:
    """Whether `found[index]` names a WITH table (`name AS (`, `name (a, b) AS (`)."""
    after = [t.text.lower() for t in found[index + 1 : index + 3]]
    if after == list(_CTE_COLUMNS):
        return True
    end = closing.get(index + 1)
    following = tuple(t.text.lower() for t in found[end + 1 : end + 3]) if end else ()
    return after[:1] == ["("] and following == _CTE_COLUMNS


def _check_table_name_defined(name: str) -> None:
    if not _PLAIN_NAME.fullmatch(name):
        raise QueryRefused(WITH_NAME_REFUSED.format(name=name))


def _closing_parentheses(found: Sequence[Token]) -> dict[int, int]:
    """The index of the `)` that closes each `(` of `found` (balanced ones only), in one pass."""
    closing: dict[int, int] = {}
    opened: list[int] = []
    for index, token in enumerate(found):
        if token.text == "(":
            opened.append(index)
        elif token.text == ")" and opened:
            closing[opened.pop()] = index
    return closing


FORMAT_REFUSED: Final = (
    "a FORMAT clause is not allowed in analyst queries (uac query --json prints JSON)"
)
"""Refused lexically for `FORMAT Native`, the client's own format, which the parse cannot tell
from the one the client adds, and by the parse for any other."""
APPLY_REFUSED: Final = (
    "a column transformer APPLY is not allowed in analyst queries: it calls a function by its "
    "bare name, which the checks cannot see as a call; call the function on the columns instead"
)
_COLUMN_NAMES_AFTER: Final = frozenset({"as"})
"""`... AS t (a, b)`, `CAST(x AS Nullable(String))`: after AS comes a name or a type, no call."""
_TABLE_FUNCTION_AFTER: Final = frozenset({"from", "join"})
"""`FROM f(...)`, `JOIN f(...)`: a table function (the generating ones are let through above)."""
_TRANSFORMED: Final = frozenset({"*", ")"})
"""What an `APPLY` transformer follows: `*`, `COLUMNS(...)`, or another transformer's `(...)`."""


def _follows(found: Sequence[Token], index: int, texts: frozenset[str]) -> bool:
    return index > 0 and found[index - 1].text.lower() in texts


def _check_called(found: Sequence[Token], index: int, closing: dict[int, int]) -> None:
    """`found[index]` is a name followed by `(`: a function the analyst may call, a keyword or
    data type, a name given column names (`AS t (a, b)`, a WITH table `t (a, b) AS (...)`)."""
    name = found[index].name
    if _is_forbidden_function(name):
        raise QueryRefused(f"the function {name!r} reads data outside your relations")
    if ANALYST_FUNCTIONS.allows(name):
        return
    if found[index].kind == "word" and name in SQL_WORDS_BEFORE_PARENTHESES:
        return
    if _follows(found, index, _COLUMN_NAMES_AFTER):
        return
    end = closing.get(index + 1)
    if end is not None and tuple(t.text.lower() for t in found[end + 1 : end + 3]) == _CTE_COLUMNS:
        return
    written = found[index].text if found[index].kind == "word" else found[index].text[1:-1]
    if _follows(found, index, _TABLE_FUNCTION_AFTER):
        raise QueryRefused(f"the table function {written!r} is not allowed")
    raise _not_allowed(written)


def _not_allowed(function: str) -> QueryRefused:
    return QueryRefused(
        f"the function {function!r} is not among the functions analysts may call (docs/analyst.md)"
    )


def _text(sql: str, first: Token, last: Token) -> str:
    """The source text from `first` to `last` (leading and trailing comments dropped)."""
    return sql[first.start : last.start + len(last.text)]


def statement_text(sql: str) -> str:
    """The analyst's statement, checked, without surrounding comments and semicolons."""
    found = check_sql(sql)
    return _text(sql, found[0], found[-1])


def with_relations(sql: str, *, purpose_exempt: bool) -> str:
    """The analyst's statement with the relation definitions prepended (WITH lists merged)."""
    found = check_sql(sql)
    definitions = ",\n".join(
        f"{name} AS ({body})" for name, body in relations(purpose_exempt=purpose_exempt).items()
    )
    if found[0].name != "with":
        return f"WITH {definitions}\n{_text(sql, found[0], found[-1])}"
    recursive = len(found) > 1 and found[1].kind == "word" and found[1].name == "recursive"
    rest = found[2] if recursive else found[1]
    keyword = "WITH RECURSIVE" if recursive else "WITH"
    return f"{keyword} {definitions},\n{_text(sql, rest, found[-1])}"


_AST_NODE = re.compile(r"^(?P<indent> *)(?P<kind>\S+)(?: (?P<rest>.*))?$")
_AST_NAME = re.compile(r"^(?P<name>.*?)(?: \(alias (?P<alias>.*?)\))?(?: \(children \d+\))?$")
_TREE_TABLE = re.compile(r"\btable_name: ([^,\s]+)")
_TREE_TABLE_FUNCTION = re.compile(r"\btable_function_name: ([^,\s]+)")
_TREE_CTE_NAME = re.compile(r"\bis_cte: 1\b.*?\bcte_name: (.*)$")
_TREE_PLAIN_CTE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*(?:, [a-z_]+: .*)?")
"""A WITH table's name in the tree dump, which may go on with other fields (`, union_mode:`)."""
_TREE_FOLDED_SCALAR = re.compile(r"\bfunction_name: __getScalar\b")
_GENERATORS_BY_NAME: Final = frozenset(name.lower() for name in GENERATOR_TABLE_FUNCTIONS)

CATALOG_SQL: Final = """SELECT 'current' AS kind, currentDatabase() AS name
UNION ALL SELECT 'database' AS kind, name FROM system.databases
UNION ALL SELECT 'table' AS kind, name FROM system.tables
WHERE database = currentDatabase() OR is_temporary"""
"""What the engine holds besides the relations (asked by the query layer, never by the analyst)."""


@dataclass(frozen=True)
class Catalog:
    """The names a query could reach stored data by besides the relations: every database (for
    qualified names), and the tables a bare name resolves to (those of the current database
    and the temporary tables). A bare relation name is always the relation (its definition
    shadows a table of that name), any other bare name is either the analyst's own `WITH`
    table or nothing, unless it names one of these tables."""

    databases: frozenset[str] = frozenset()
    tables: frozenset[str] = frozenset()
    current: str = "default"

    @classmethod
    def of(cls, rows: Sequence[Sequence[str]]) -> Catalog:
        """From the rows of CATALOG_SQL."""
        return cls(
            databases=frozenset(name for kind, name in rows if kind == "database"),
            tables=frozenset(name for kind, name in rows if kind == "table"),
            current=next((name for kind, name in rows if kind == "current"), "default"),
        )

    def outside(self, name: str) -> bool:
        """Whether a bare `name` resolves to a stored table that is not a relation."""
        return name in self.tables and name not in RELATIONS

    def database(self, qualifier: str) -> bool:
        return qualifier.lower() in FORBIDDEN_DATABASES or qualifier in self.databases


@dataclass(frozen=True)
class _Node:
    depth: int
    kind: str
    name: str
    parent: str
    alias: str = ""


def _ast_nodes(lines: Sequence[str]) -> Iterator[_Node]:
    """The nodes of an `EXPLAIN AST` dump (one space of indent per level) with their names
    (an identifier's, a function's; aliases and child counts dropped) and their parent's kind."""
    kinds: list[str] = []
    for line in lines:
        node = _AST_NODE.match(line)
        if not node:
            continue
        depth = len(node.group("indent"))
        del kinds[depth:]
        name = _AST_NAME.match(node.group("rest") or "")
        parent = kinds[-1] if kinds else ""
        alias = (name.group("alias") or "") if name else ""
        yield _Node(depth, node.group("kind"), name.group("name") if name else "", parent, alias)
        kinds.append(node.group("kind"))


def check_parsed(lines: Sequence[str], catalog: Catalog | None = None) -> None:
    """Refuse by ClickHouse's parse of the analyst's SQL (`EXPLAIN AST` lines; it executes
    nothing, so this runs before the engine evaluates any part of the query): a `Set` node is a
    SETTINGS clause at any level, a literal right below the statement its INTO OUTFILE file, an
    identifier there its FORMAT (other than the client's own); a
    function right below a `TableExpression` is a table function, every other function a call
    that must be on the allowlist, a lambda has no name (one named `equals` replaced the function
    in the relations' tenant filter); an `APPLY` transformer calls a function it only names; a bare
    name may not reach a table of `catalog` that is not a relation, nor a qualified one any
    database."""
    known = catalog or Catalog()
    if not lines or not lines[0].startswith("SelectWithUnionQuery"):
        raise QueryRefused("only a read-only SELECT (or WITH ... SELECT) is allowed")
    nodes = list(_ast_nodes(lines))
    for index, node in enumerate(nodes):
        if node.kind == "Set":
            raise QueryRefused("a SETTINGS clause is not allowed in analyst queries")
        if node.kind == "Literal" and node.depth == 1:
            raise QueryRefused("INTO OUTFILE is not allowed in analyst queries")
        if node.kind == "Identifier" and node.depth == 1 and node.name != CLIENT_FORMAT:
            raise QueryRefused(FORMAT_REFUSED)
        if node.kind == "TableIdentifier":
            _check_table_name(node.name, known)
        if node.kind == "Identifier":
            _check_name(node.name, known)
        if node.kind == "Function" and node.name.lower() == "lambda" and node.alias:
            raise QueryRefused(NAMED_LAMBDA_REFUSED.format(name=node.alias))
        if node.kind == "Function":
            _check_function(node)
            _check_aggregate_named(node, nodes[index + 1 : index + 3])
        if node.kind == "ColumnsApplyTransformer":
            raise QueryRefused(APPLY_REFUSED)


NAMED_LAMBDA_REFUSED: Final = (
    "a lambda may not be given a name (`... -> ... AS {name}`): the engine calls it in place of "
    "the function of that name, inside the relations' definitions too (their tenant and purpose "
    "filters); write the lambda where it is used"
)


CLIENT_FORMAT: Final = "Native"
"""The FORMAT the client adds to every statement it sends (an identifier right below the
statement, like the one an analyst's FORMAT clause names)."""


def _check_table_name(name: str, catalog: Catalog) -> None:
    if "." in name:
        raise QueryRefused(f"the SQL names the table {name!r} by its database")
    _check_not_outside(name, catalog)


def _check_name(name: str, catalog: Catalog) -> None:
    qualifier, dot, _ = name.partition(".")
    if dot and catalog.database(qualifier):
        raise QueryRefused(f"the SQL names {name!r} by its database")
    _check_not_outside(name, catalog)


def _check_not_outside(name: str, catalog: Catalog) -> None:
    if catalog.outside(name):
        raise QueryRefused(
            f"the SQL reads {catalog.current + '.' + name!r}, which is not one of your relations"
        )


def _check_function(node: _Node) -> None:
    function = node.name.split(" ", 1)[0]
    if _is_forbidden_function(function.lower()):
        raise QueryRefused(f"the function {function!r} reads data outside your relations")
    if node.parent == "TableExpression":
        if function.lower() not in _GENERATORS_BY_NAME:
            raise QueryRefused(f"the table function {function!r} is not allowed")
        return
    if not ANALYST_FUNCTIONS.allows(function):
        raise _not_allowed(function)


AGGREGATE_BY_NAME: Final = frozenset(
    {"arrayreduce", "arrayreduceinranges", "initializeaggregation"}
)
"""Functions whose first argument names the aggregate function they run (`arrayReduce('sum',
arr)`, `initializeAggregation('sumState', x)`): that name must be allowed like a call."""


def _check_aggregate_named(node: _Node, following: Sequence[_Node]) -> None:
    """For a function of AGGREGATE_BY_NAME: its first argument (the node after its argument
    list's) is a string literal naming an allowed function, parameters aside (`'quantile(0.9)'`)."""
    if node.name.lower() not in AGGREGATE_BY_NAME:
        return
    first = following[1] if len(following) == 2 and following[1].depth == node.depth + 2 else None
    text = first.name if first is not None and first.kind == "Literal" else ""
    if len(text) < 2 or text[0] != "'" or text[-1] != "'":
        raise QueryRefused(
            f"the function {node.name!r} takes the name of an aggregate function as a string "
            "literal in analyst queries"
        )
    named = text[1:-1].split("(", 1)[0].strip()
    if not ANALYST_FUNCTIONS.allows(named):
        raise _not_allowed(named)


def check_resolved(lines: Sequence[str]) -> None:
    """Refuse by the analyzer's resolution of the full query (`EXPLAIN QUERY TREE` lines, asked
    with EXPLAIN_SETTINGS: a scalar subquery the analyzer folds into a constant keeps its source,
    so a table it reads is listed; a `__getScalar` that hides it is refused): every WITH table
    it resolves has a plain name (one named `uac.events` stood in for the stored table inside the
    relations' definitions)."""
    for line in lines:
        if _TREE_FOLDED_SCALAR.search(line):
            raise QueryRefused(
                "the SQL has a subquery the engine evaluated before it could be checked"
            )
        cte = _TREE_CTE_NAME.search(line)
        if cte is not None and not _TREE_PLAIN_CTE_NAME.fullmatch(cte.group(1)):
            raise QueryRefused(WITH_NAME_REFUSED.format(name=cte.group(1)))
        for table in _TREE_TABLE.findall(line):
            if table not in READABLE_TABLES and not table.startswith(QUERY_OWN_TABLES):
                raise QueryRefused(f"the SQL reads {table!r}, which is not one of your relations")
        for function in _TREE_TABLE_FUNCTION.findall(line):
            if function not in GENERATOR_TABLE_FUNCTIONS:
                raise QueryRefused(f"the table function {function!r} is not allowed")
