"""MariaDB's expressions (check clauses, column defaults) in PostgreSQL's words, where both
mean the same; otherwise a :class:`~spark_jobs.engines.objects.SchemaProblem` that says why.

The translation is by tokens, not by text: identifiers (MariaDB prints them in
backticks) become PostgreSQL's quoted identifiers, string literals are decoded
from MariaDB's escapes and written as PostgreSQL's standard strings, numbers
stay, operators and functions are taken from a table of those whose meaning is
the same on both (``length`` counts bytes in MariaDB: ``octet_length``;
``ifnull`` is ``coalesce``; ``<=>`` is ``IS NOT DISTINCT FROM``). Anything
else (``/``, whose integer division differs; ``concat``, which ignores no NULL
in MariaDB; regular expressions; a function PostgreSQL lacks) is refused: the
operator skips the object or writes its PostgreSQL definition.

Text compares by its column's collation in MariaDB (case-insensitive for a
``_ci`` one) and exactly in PostgreSQL: a translated check or ``LIKE`` holds
the PostgreSQL way (the README's mapping says so).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from spark_jobs.engines.objects import SchemaProblem

NOW = "\x00now"
"""Stands for MariaDB's ``current_timestamp()`` (or ``now()``): the caller writes
``CURRENT_TIMESTAMP`` or ``LOCALTIMESTAMP`` by the column's type."""

_TOKEN = re.compile(
    r"""\s+|`(?:[^`]|``)*`|'(?:[^'\\]|''|\\.)*'|"(?:[^"\\]|""|\\.)*"|0x[0-9a-fA-F]+|"""
    r"""b'[01]*'|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+|<=>|<>|!=|>=|<=|\|\||&&|[=<>+\-*/%(),.!]"""
    r"""|[A-Za-z_][A-Za-z0-9_$]*""",
    re.DOTALL,
)
_ESCAPES = {"0": "\0", "n": "\n", "r": "\r", "t": "\t", "b": "\b", "Z": "\x1a"}

_SAME_FUNCTIONS = {
    "char_length": "char_length", "character_length": "char_length", "length": "octet_length",
    "octet_length": "octet_length", "lower": "lower", "upper": "upper", "lcase": "lower",
    "ucase": "upper", "abs": "abs", "coalesce": "coalesce", "ifnull": "coalesce",
    "nullif": "nullif", "trim": "trim", "ltrim": "ltrim", "rtrim": "rtrim", "greatest": "greatest",
    "least": "least", "floor": "floor", "ceil": "ceil", "ceiling": "ceil", "sign": "sign",
}  # fmt: skip
_NOW_FUNCTIONS = {"current_timestamp", "now", "localtimestamp", "localtime"}
_NILADIC = {"curdate": "CURRENT_DATE", "current_date": "CURRENT_DATE", "curtime": "LOCALTIME",
            "current_time": "LOCALTIME", "uuid": "gen_random_uuid()::text"}  # fmt: skip
_KEYWORDS = {"and": "AND", "or": "OR", "not": "NOT", "is": "IS", "null": "NULL",
             "true": "TRUE", "false": "FALSE", "in": "IN", "between": "BETWEEN",
             "like": "LIKE", "case": "CASE", "when": "WHEN", "then": "THEN", "else": "ELSE",
             "end": "END", "escape": "ESCAPE"}  # fmt: skip
_OPERATORS = {"=": "=", "<>": "<>", "!=": "<>", ">=": ">=", "<=": "<=", "<": "<", ">": ">",
              "+": "+", "-": "-", "*": "*", "%": "%", "(": "(", ")": ")", ",": ",",
              "<=>": "IS NOT DISTINCT FROM", "&&": "AND", "||": "OR", "!": "NOT"}  # fmt: skip


def pg_identifier(name: str) -> str:
    """A PostgreSQL identifier, quoted."""
    return '"' + name.replace('"', '""') + '"'


def pg_literal(text: str) -> str:
    """A PostgreSQL string literal (standard strings: only quotes are doubled)."""
    return "'" + text.replace("'", "''") + "'"


def decode_string(token: str) -> str:
    """The text of a MariaDB string literal (``'it''s'``, ``'a\\nb'``)."""
    quote, body = token[0], token[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            out.append(_ESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
        elif ch == quote and i + 1 < len(body) and body[i + 1] == quote:
            out.append(quote)
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def translate(expression: str) -> str:
    """``expression`` (MariaDB's) as PostgreSQL's; :data:`NOW` where it reads the clock.

    Raises :class:`SchemaProblem` naming what PostgreSQL would read otherwise.
    """
    out: list[str] = []
    tokens = list(_tokens(expression))
    for i, token in enumerate(tokens):
        if not token:
            continue  # a clock function's arguments, dropped
        low = token.lower()
        following = tokens[i + 1] if i + 1 < len(tokens) else ""
        if token.startswith("`"):
            out.append(pg_identifier(token[1:-1].replace("``", "`")))
        elif token.startswith(("'", '"')):
            out.append(pg_literal(decode_string(token)))
        elif low.startswith("b'"):
            out.append("B" + token[1:])
        elif low.startswith("0x"):
            out.append(f"'\\x{token[2:]}'::bytea")
        elif token[0].isdigit() or token[0] == ".":
            out.append(token)
        elif token in _OPERATORS:
            out.append(_OPERATORS[token])
        elif low in _NOW_FUNCTIONS or low in _NILADIC:
            out.append(NOW if low in _NOW_FUNCTIONS else _NILADIC[low])
            if following == "(":
                _skip_call(tokens, i + 1)
        elif following == "(" and low in _SAME_FUNCTIONS:
            out.append(_SAME_FUNCTIONS[low])
        elif low in _KEYWORDS:
            out.append(_KEYWORDS[low])
        else:
            what = f"function {token}()" if following == "(" else repr(token)
            raise SchemaProblem(f"{what} has no PostgreSQL translation of the same meaning")
    return _join(out)


def _tokens(expression: str) -> Iterator[str]:
    at = 0
    while at < len(expression):
        match = _TOKEN.match(expression, at)
        if match is None:
            raise SchemaProblem(f"cannot read {expression[at:at + 20]!r}")
        at = match.end()
        if not match.group(0).isspace():
            if match.group(0) == "/":
                raise SchemaProblem("'/' divides integers into a decimal in MariaDB and an "
                                    "integer in PostgreSQL")  # fmt: skip
            yield match.group(0)


def _skip_call(tokens: list[str], at: int) -> None:
    """Drop a clock function's argument list (``current_timestamp(6)``): the column's type
    says its precision."""
    depth = 0
    for j in range(at, len(tokens)):
        depth += tokens[j] == "("
        depth -= tokens[j] == ")"
        tokens[j] = ""
        if depth == 0:
            return


def _join(parts: list[str]) -> str:
    text = " ".join(p for p in parts if p)
    return re.sub(r"\( ", "(", re.sub(r" \)", ")", re.sub(r" ,", ",", text)))
