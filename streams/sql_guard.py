"""What an analyst's SQL may be: one read-only statement over the relations, checked lexically
(comments and literals skipped), by ClickHouse's parser (`EXPLAIN AST`) and by its analyzer
(`EXPLAIN QUERY TREE`); and the full query built from it with the relation definitions."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from streams.clickhouse import DATABASE
from streams.query_relations import READABLE_TABLES, RELATIONS, relations

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
    }
)
"""Functions that read data from outside the wrapped relations (compared case-insensitively);
every function whose name starts with `dict` (dictGet and friends) is refused too."""


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
_HEREDOC = re.compile(r"(\$[^$]*\$).*?\1", re.DOTALL)
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


def tokens(sql: str) -> Iterator[Token]:
    """Code tokens of `sql` (ClickHouse lexing: comments skipped, literals as single tokens)."""
    position = 0
    while position < len(sql):
        if sql.startswith("/*", position):
            position = _block_comment_end(sql, position)
            continue
        skipped = _SPACE.match(sql, position) or _LINE_COMMENT.match(sql, position)
        if skipped:
            position = skipped.end()
            continue
        token = _token_at(sql, position)
        yield token
        position += len(token.text)


def _token_at(sql: str, position: int) -> Token:
    for kind, pattern in (
        ("string", _STRING),
        ("string", _HEREDOC),
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
    return name in FORBIDDEN_FUNCTIONS or name.startswith("dict")


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


def check_sql(sql: str) -> list[Token]:
    """Refuse SQL that is not one read-only statement over the relations (lexical rules)."""
    found = _statement(sql)
    for token, following in zip(found, [*found[1:], None], strict=True):
        after = following.text if following else ""
        if token.name in FORBIDDEN_DATABASES and after == ".":
            raise QueryRefused(
                f"the SQL names the database {token.name!r} directly; query the relations "
                f"({', '.join(RELATIONS)}) by their bare names"
            )
        if token.kind in {"word", "quoted"} and after == "(" and _is_forbidden_function(token.name):
            raise QueryRefused(f"the function {token.name!r} reads data outside your relations")
        if token.name == "settings" and token.kind == "word":
            raise QueryRefused("a SETTINGS clause is not allowed in analyst queries")
        if token.name == "into" and following is not None and following.name == "outfile":
            raise QueryRefused("INTO OUTFILE is not allowed in analyst queries")
    return found


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
    recursive = len(found) > 1 and found[1].name == "recursive"
    rest = found[2] if recursive else found[1]
    keyword = "WITH RECURSIVE" if recursive else "WITH"
    return f"{keyword} {definitions},\n{_text(sql, rest, found[-1])}"


_AST_TABLE = re.compile(r"^\s*TableIdentifier (\S+)")
_AST_IDENTIFIER = re.compile(r"^\s*Identifier (\S+)")
_AST_FUNCTION = re.compile(r"^\s*Function (\S+)")
_TREE_TABLE = re.compile(r"\btable_name: ([^,\s]+)")
_TREE_TABLE_FUNCTION = re.compile(r"\btable_function_name: ([^,\s]+)")


def check_parsed(lines: Sequence[str]) -> None:
    """Refuse by ClickHouse's parse of the analyst's SQL (`EXPLAIN AST` lines, one space of
    indent per level): a `Set` node is a SETTINGS clause at any level, a literal right below the
    statement its INTO OUTFILE file (FORMAT is the statement's `Identifier`)."""
    if not lines or not lines[0].startswith("SelectWithUnionQuery"):
        raise QueryRefused("only a read-only SELECT (or WITH ... SELECT) is allowed")
    for line in lines:
        if line.strip() == "Set":
            raise QueryRefused("a SETTINGS clause is not allowed in analyst queries")
        if line.startswith(" Literal "):
            raise QueryRefused("INTO OUTFILE is not allowed in analyst queries")
        table = _AST_TABLE.match(line)
        if table and "." in table.group(1):
            raise QueryRefused(f"the SQL names the table {table.group(1)!r} by its database")
        identifier = _AST_IDENTIFIER.match(line)
        qualifier, dot, _ = identifier.group(1).partition(".") if identifier else ("", "", "")
        if identifier and dot and qualifier.lower() in FORBIDDEN_DATABASES:
            raise QueryRefused(f"the SQL names {identifier.group(1)!r} by its database")
        function = _AST_FUNCTION.match(line)
        if function and _is_forbidden_function(function.group(1).lower()):
            raise QueryRefused(
                f"the function {function.group(1)!r} reads data outside your relations"
            )


def check_resolved(lines: Sequence[str]) -> None:
    """Refuse by the analyzer's resolution of the full query (`EXPLAIN QUERY TREE` lines)."""
    for line in lines:
        for table in _TREE_TABLE.findall(line):
            if table not in READABLE_TABLES and not table.startswith(QUERY_OWN_TABLES):
                raise QueryRefused(f"the SQL reads {table!r}, which is not one of your relations")
        for function in _TREE_TABLE_FUNCTION.findall(line):
            if function not in GENERATOR_TABLE_FUNCTIONS:
                raise QueryRefused(f"the table function {function!r} is not allowed")
