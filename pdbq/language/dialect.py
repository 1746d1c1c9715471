"""`PdbqDialect`: sqlglot's DuckDB dialect plus pdbq's statements, and nothing else.

Added: CREATE [OR REPLACE] VARIABLE / RULE, DROP VARIABLE / RULE, SHOW VARIABLES / RULES, the
estimate calls PROB / DIST / MAP / STDERR, and a query's trailing GIVEN / USING <method> /
WITH (...) clauses (plus EXPLAIN before such a query). The parse trees are the classes of
`pdbq.language.expressions`; `pdbq.language.parser` turns them into the typed nodes.

This module touches private `_parse_*` methods of sqlglot, which is why sqlglot is pinned to a
minor version and the golden parser fixtures exist.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar

import sqlglot.expressions as exp
from sqlglot import tokens as _sqlglot_tokens

if getattr(_sqlglot_tokens, "SQLGLOTC_INSTALLED", False):
    # The compiled build replaces sqlglot's modules with compiled ones, which Python classes
    # cannot subclass; failing here is clearer than a metaclass error deep inside the dialect.
    raise ImportError(
        "pdbq needs the plain-Python sqlglot package, but the compiled build (sqlglotc) is "
        "installed and cannot be subclassed. Run `pip uninstall sqlglotc` (or reinstall with "
        "`pip install --force-reinstall sqlglot` without the [c] extra)."
    )

from sqlglot.dialects.duckdb import DuckDB  # noqa: E402
from sqlglot.tokens import Token, TokenType  # noqa: E402

from pdbq.language.weight_parsing import NAME_TOKENS as _NAME_TOKENS, WeightParsing  # noqa: E402
from pdbq.language.nodes import MAX_CATEGORIES  # noqa: E402
from pdbq.language.expressions import (  # noqa: E402
    FUNCTIONS,
    LEARN_METHODS,
    METHODS,
    SEMANTICS,
    PdbqAtom,
    PdbqCreateRule,
    PdbqCreateVariable,
    PdbqDomain,
    PdbqDrop,
    PdbqEstimate,
    PdbqGivenAtom,
    PdbqGivenQuery,
    PdbqHead,
    PdbqHeadSymbol,
    PdbqLearn,
    PdbqOption,
    PdbqQuery,
    PdbqShow,
    PdbqWildcard,
)

__all__ = ["PdbqDialect", "looks_probabilistic", "QUERY_START_TOKENS", "PARSE_CHECK"]

#: The running statement's cancel check while its text is parsed (None: none). A statement of
#: hundreds of thousands of tokens (a long IN list, a GIVEN of 20,000 atoms) parses for seconds;
#: the parser calls this every `_CHECK_TOKENS` tokens, so a cancel is not left waiting for it.
PARSE_CHECK: ContextVar[Callable[[], None] | None] = ContextVar("pdbq_parse_check", default=None)
_CHECK_TOKENS = 4096

_OPEN = {TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE}
_CLOSE = {TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE}
# Tokens after which a '^' is a binary operator (DuckDB's power) rather than a head marker.
_OPERAND_END = {
    TokenType.VAR,
    TokenType.IDENTIFIER,
    TokenType.NUMBER,
    TokenType.STRING,
    TokenType.R_PAREN,
    TokenType.R_BRACKET,
    TokenType.TRUE,
    TokenType.FALSE,
    TokenType.NULL,
}
#: First tokens of a statement that may be a probabilistic query.
QUERY_START_TOKENS = frozenset({TokenType.SELECT, TokenType.WITH, TokenType.L_PAREN, TokenType.FROM})


def looks_probabilistic(tokens: Sequence[Token]) -> bool:
    """True when a query's tokens use an estimate call or a trailing GIVEN / USING <method>.

    A token-level test, so that statements which are not pdbq's never reach sqlglot's parser
    (whose DuckDB coverage is incomplete) and go to DuckDB untouched.
    """
    depth = 0
    n = len(tokens)
    for i, tok in enumerate(tokens):
        tt = tok.token_type
        if tt in _OPEN:
            depth += 1
            continue
        if tt in _CLOSE:
            depth -= 1
            continue
        prev = tokens[i - 1] if i else None
        nxt = tokens[i + 1] if i + 1 < n else None
        after_dot = prev is not None and prev.token_type == TokenType.DOT
        up = tok.text.upper()
        if nxt is not None and nxt.token_type == TokenType.L_PAREN and not after_dot:
            if tt == TokenType.VAR and up in ("PROB", "DIST", "STDERR"):
                return True
            if (
                tt == TokenType.MAP
                and i + 3 < n
                and tokens[i + 2].token_type in _NAME_TOKENS
                and tokens[i + 3].token_type == TokenType.R_PAREN
            ):
                return True
        if depth != 0 or nxt is None:
            continue
        if tt == TokenType.VAR and up == "GIVEN" and (prev is None or prev.token_type != TokenType.ALIAS):
            if nxt.token_type == TokenType.L_PAREN:
                return True
            if i + 2 < n and tokens[i + 2].token_type == TokenType.L_PAREN:
                return True
        if tt == TokenType.USING and nxt.text.upper() in METHODS:
            return True
    return False


def _is_word(tok: Token) -> bool:
    if tok and tok.token_type == TokenType.IDENTIFIER:  # a quoted name: any text is one name
        return bool(tok.text)
    return bool(tok) and tok.token_type not in (TokenType.STRING, TokenType.NUMBER) and (
        tok.text.replace("_", "a").isalnum() and not tok.text[0].isdigit()
    )


class PdbqDialect(DuckDB):
    """DuckDB's dialect plus pdbq's statements (see the module docstring)."""

    class Tokenizer(DuckDB.Tokenizer):
        # EXPLAIN is a COMMAND in DuckDB's tokenizer, which swallows the rest of the statement
        # as one string; pdbq needs the query's tokens (EXPLAIN SELECT PROB(...)).
        KEYWORDS = {**DuckDB.Tokenizer.KEYWORDS, "EXPLAIN": TokenType.VAR}

    class Parser(WeightParsing, DuckDB.Parser):
        _pdbq_checked_at = 0  # the token index of the last `PARSE_CHECK` call

        def _advance(self, times: int = 1) -> None:
            super()._advance(times)
            if self._index - self._pdbq_checked_at >= _CHECK_TOKENS:
                self._pdbq_checked_at = self._index
                check = PARSE_CHECK.get()
                if check is not None:
                    check()

        FUNCTION_PARSERS = {
            **DuckDB.Parser.FUNCTION_PARSERS,
            "PROB": lambda self: self._pdbq_parse_estimate("PROB"),
            "DIST": lambda self: self._pdbq_parse_estimate("DIST"),
            "STDERR": lambda self: self._pdbq_parse_estimate("STDERR"),
        }
        NO_PAREN_FUNCTION_PARSERS = {
            **DuckDB.Parser.NO_PAREN_FUNCTION_PARSERS,
            "MAP": lambda self: self._pdbq_parse_map(),
        }
        STATEMENT_PARSERS = {
            **DuckDB.Parser.STATEMENT_PARSERS,
            TokenType.CREATE: lambda self: self._pdbq_parse_create(),
            TokenType.DROP: lambda self: self._pdbq_parse_drop(),
            TokenType.SHOW: lambda self: self._pdbq_parse_show(),
        }

        def reset(self) -> None:
            super().reset()
            self._pdbq_depth = 0
            self._pdbq_error_token: Token | None = None
            self._pdbq_error_at_end = False

        def raise_error(self, message: str, token: Token | None = None) -> None:
            # Remember the token so that pdbq's ParseError can point at its START (sqlglot's
            # error dict carries only the end column).
            chosen = token or self._curr or self._prev
            self._pdbq_error_token = chosen or None
            self._pdbq_error_at_end = not token and not self._curr and bool(self._prev)
            super().raise_error(message, token or None)  # type: ignore[arg-type]

        # ------------------------------------------------------------------ statements

        def _parse_statement(self) -> exp.Expr | None:
            if not self._curr:
                return None
            self._pdbq_depth += 1
            try:
                if self._pdbq_depth > 1:
                    return super()._parse_statement()
                return self._pdbq_parse_top_statement()
            finally:
                self._pdbq_depth -= 1

        def _pdbq_parse_top_statement(self) -> exp.Expr | None:
            tok = self._curr
            up = tok.text.upper()
            if tok.token_type == TokenType.VAR and up == "LEARN":
                return self._pdbq_parse_learn()
            explain = False
            if tok.token_type == TokenType.VAR and up == "EXPLAIN":
                rest = self._tokens[self._index + 1 :]
                if not looks_probabilistic(rest):
                    self._advance()
                    return self._parse_as_command(tok)
                self._advance()
                if self._curr and self._curr.text.upper() == "ANALYZE":
                    self.raise_error("EXPLAIN ANALYZE is not supported for probabilistic queries")
                explain = True
            stmt = super()._parse_statement()
            if isinstance(stmt, exp.Query):
                return self._pdbq_wrap_query(stmt, explain)
            if explain:
                self.raise_error("EXPLAIN of a probabilistic statement needs a SELECT query", tok)
            return stmt

        def _pdbq_wrap_query(self, query: exp.Query, explain: bool) -> exp.Expr:
            first = self._curr
            given, method, options = self._pdbq_parse_trailing()
            has_estimates = query.find(PdbqEstimate) is not None
            if not (has_estimates or given or method or options):
                return query
            if not has_estimates:
                self.raise_error(
                    "GIVEN, USING and WITH options need a PROB, DIST, MAP or STDERR in the query",
                    first,
                )
            return self.expression(
                PdbqQuery(
                    this=query, given=given or None, method=method, options=options or None, explain=explain
                )
            )

        def _pdbq_parse_trailing(self) -> tuple[list, str | None, list]:
            given: list = []
            method: str | None = None
            options: list = []
            seen: set[str] = set()
            while self._curr:
                tok = self._curr
                up = tok.text.upper()
                if tok.token_type == TokenType.VAR and up == "GIVEN":
                    clause = "GIVEN"
                elif tok.token_type == TokenType.USING:
                    clause = "USING"
                elif tok.token_type == TokenType.WITH and self._next.token_type == TokenType.L_PAREN:
                    clause = "WITH"
                else:
                    break
                if clause in seen:
                    self.raise_error(f"{clause} appears twice", tok)
                seen.add(clause)
                self._advance()
                if clause == "GIVEN":
                    given = self._pdbq_parse_list(self._pdbq_parse_given_item)
                elif clause == "USING":
                    word = self._curr
                    if not word or word.text.upper() not in METHODS:
                        shown = f"'{word.text}'" if word else "nothing"
                        self.raise_error(
                            f"unknown inference method {shown} after USING; expected one of "
                            + ", ".join(METHODS),
                            word or tok,
                        )
                    self._advance()
                    method = word.text.upper()
                else:
                    options = self._pdbq_parse_options()
            return given, method, options

        def _pdbq_parse_list(self, item) -> list:
            items = [item()]
            while self._match(TokenType.COMMA):
                items.append(item())
            return items

        def _pdbq_parse_given_item(self) -> exp.Expr:
            tok = self._curr
            if tok and tok.token_type == TokenType.L_PAREN:
                query, text = self._pdbq_parse_wrapped_query("GIVEN")
                self._match(TokenType.ALIAS)
                name = self._pdbq_name("the relation name after a GIVEN query (… ) AS rel")
                return self.expression(PdbqGivenQuery(this=name, expression=query, text=text))
            name = self._pdbq_name("a GIVEN item: rel(key, ...) = value or (SELECT ...) AS rel")
            self._pdbq_expect(TokenType.L_PAREN, f"expected '(' after '{name.name}' in GIVEN")
            keys = self._pdbq_parse_list(
                lambda: self._pdbq_constant_or_error(f"GIVEN keys of '{name.name}' must be constants")
            )
            self._pdbq_expect(TokenType.R_PAREN, f"expected ')' after the keys of '{name.name}' in GIVEN")
            self._pdbq_expect(TokenType.EQ, f"expected '= value' after {name.name}(...) in GIVEN")
            value = self._pdbq_constant_or_error(f"expected a constant value for {name.name}(...) in GIVEN")
            return self.expression(PdbqGivenAtom(this=name, expressions=keys, expression=value))

        def _pdbq_parse_options(self) -> list:
            self._pdbq_expect(TokenType.L_PAREN, "expected '(' after WITH")
            options: list = []
            names: set[str] = set()
            while True:
                tok = self._curr
                if not _is_word(tok):
                    self.raise_error("expected an option name in WITH (name = value, ...)")
                name = tok.text.lower()
                if name in names:
                    self.raise_error(f"WITH option '{name}' is given twice", tok)
                names.add(name)
                self._advance()
                self._pdbq_expect(TokenType.EQ, f"expected '=' after WITH option '{name}'")
                value = self._pdbq_bound_constant(null=True)
                if value is None:
                    self.raise_error(f"expected a value after '=' in WITH option '{name}'")
                options.append(self.expression(PdbqOption(this=exp.to_identifier(name), expression=value)))
                if self._match(TokenType.COMMA):
                    continue
                self._pdbq_expect(TokenType.R_PAREN, "expected ',' or ')' in WITH (name = value, ...)")
                return options

        def _parse_placeholder(self):  # type: ignore[override]
            # Remember where a bound parameter stands: ``?`` binds by text order (params.py).
            start = self._curr.start if self._curr is not None else 0
            node = super()._parse_placeholder()
            if isinstance(node, exp.Placeholder):
                node.meta["start"] = start
            return node

        def _parse_table_alias(self, alias_tokens=None):  # type: ignore[override]
            # GIVEN is an ordinary word to the tokenizer: keep `FROM t GIVEN r(1) = TRUE` from
            # reading it as the alias of t.
            if self._curr.token_type == TokenType.VAR and self._curr.text.upper() == "GIVEN":
                nxt = self._next.token_type
                if nxt == TokenType.L_PAREN or (
                    nxt in _NAME_TOKENS
                    and self._index + 2 < len(self._tokens)
                    and self._tokens[self._index + 2].token_type == TokenType.L_PAREN
                ):
                    return None
            return super()._parse_table_alias(alias_tokens=alias_tokens)

        def _parse_table_hints(self):  # type: ignore[override]
            # `FROM t m WITH (steps = 10)` is pdbq's options clause; DuckDB has no T-SQL table hints.
            if self._curr.token_type == TokenType.WITH and self._next.token_type == TokenType.L_PAREN:
                return None
            return super()._parse_table_hints()

        # ------------------------------------------------------------------ estimates

        def _pdbq_parse_estimate(self, kind: str) -> exp.Expr:
            call = self._tokens[self._index - 2]
            tok = self._curr
            example = f"{kind}(m = 'PER')" if kind == "PROB" else f"{kind}(m)"
            if tok and tok.token_type in _NAME_TOKENS and self._next and self._next.token_type == TokenType.DOT:
                self._pdbq_dotted_estimate(kind)
            if not tok or tok.token_type not in _NAME_TOKENS or self._next.token_type not in (
                TokenType.R_PAREN,
                TokenType.EQ,
            ):
                if kind == "PROB" and tok and tok.token_type in _NAME_TOKENS and self._next.token_type in (
                    TokenType.COMMA, TokenType.AND, TokenType.OR, TokenType.NEQ
                ) or kind == "PROB" and tok and tok.token_type == TokenType.NOT:
                    self.raise_error(
                        "PROB in SQL takes one variable; for joint or event probabilities such as "
                        "PROB(a, b) or PROB(a AND NOT b) use pdbq.joint(db, ...) or "
                        "pdbq.probability(db, \"a('k') AND NOT b('k')\") in Python (docs/python-api.md)",
                        tok,
                    )
                self.raise_error(
                    f"{kind} takes the alias of a variable relation in FROM, e.g. {example}", tok or call
                )
            alias = self._pdbq_name(f"a relation alias in {kind}(...)")
            value = other = None
            if self._curr.token_type == TokenType.EQ:
                if kind not in ("PROB", "STDERR"):
                    self.raise_error(f"only PROB and STDERR take '= value'; write {kind}({alias.name})")
                self._advance()
                if self._curr and self._curr.token_type in _NAME_TOKENS and self._next \
                        and self._next.token_type == TokenType.R_PAREN:
                    other = self._pdbq_name(f"a relation alias in {kind}({alias.name} = ...)")
                else:
                    if self._curr and self._curr.token_type in _NAME_TOKENS and self._next \
                            and self._next.token_type == TokenType.DOT:
                        self._pdbq_dotted_estimate(kind)
                    value = self._pdbq_constant()
                if value is None and other is None:
                    self.raise_error(f"expected a constant after '=' in {kind}({alias.name} = ...) (or, for a "
                                     "DOMAIN CLUSTER relation, a second alias)")
            if self._curr.token_type != TokenType.R_PAREN:
                self.raise_error(f"expected ')' to close {kind}(...)")
            node = PdbqEstimate(this=alias, expression=value, kind=kind, other=other)
            node.update_positions(call)
            return self.expression(node)

        def _pdbq_dotted_estimate(self, kind: str) -> None:
            # PROB(a.e = b.e): a relation's value has no column name; its alias stands for it
            self.raise_error(
                f"{kind} takes the alias of a variable relation alone, not a column ('{self._curr.text}."
                f"{self._tokens[self._index + 2].text if self._index + 2 < len(self._tokens) else ''}'): "
                f"write {kind}(m = 'PER'), or for two aliases a, b of a DOMAIN CLUSTER relation "
                f"{kind}(a = b) (P(the two rows' mentions are one entity))",
                self._curr,
            )

        def _pdbq_parse_map(self) -> exp.Expr | None:
            # MAP(v) with one bare identifier is pdbq's; anything else is DuckDB's MAP.
            t = self._tokens
            i = self._index
            if (
                self._curr.token_type == TokenType.L_PAREN
                and i + 2 < len(t)
                and t[i + 1].token_type in _NAME_TOKENS
                and t[i + 2].token_type == TokenType.R_PAREN
            ):
                call = self._prev
                self._advance()
                alias = self._pdbq_name("a relation alias in MAP(...)")
                self._advance()  # ')'
                node = PdbqEstimate(this=alias, kind="MAP")
                node.update_positions(call)
                return self.expression(node)
            return self._parse_map()

        # ------------------------------------------------------------------ CREATE VARIABLE / RULE

        def _pdbq_parse_create(self) -> exp.Expr:
            index = self._index
            replace = self._match_text_seq("OR", "REPLACE")
            if self._match_text_seq("VARIABLE"):
                return self._pdbq_parse_create_variable(replace)
            if self._match_text_seq("RULE"):
                return self._pdbq_parse_create_rule(replace)
            self._retreat(index)
            return self._parse_create()

        def _pdbq_parse_create_variable(self, replace: bool) -> exp.Expr:
            name = self._pdbq_name("a variable relation name after CREATE VARIABLE")
            self._pdbq_expect(TokenType.L_PAREN, f"expected '(' and key columns after '{name.name}'")
            columns = self._pdbq_parse_list(self._pdbq_parse_key_column)
            self._pdbq_expect(TokenType.R_PAREN, "expected ',' or ')' after a key column")
            seen: set[str] = set()
            for col in columns:
                if col.name.lower() in seen:
                    self.raise_error(f"key column '{col.name.lower()}' is declared twice", col.meta.get("token"))
                seen.add(col.name.lower())
            if not self._match_text_seq("DOMAIN"):
                self.raise_error("expected DOMAIN BOOLEAN, DOMAIN ('a', ...) or DOMAIN CATEGORICAL(k)")
            domain = self._pdbq_parse_domain()
            if not self._match(TokenType.FROM):
                self.raise_error("expected FROM (SELECT ...) giving the variables' keys")
            source, source_text = self._pdbq_parse_wrapped_query("FROM")
            evidence = evidence_text = None
            if self._match_text_seq("EVIDENCE"):
                evidence, evidence_text = self._pdbq_parse_wrapped_query("EVIDENCE")
            for col in columns:
                col.meta.pop("token", None)
            return self.expression(
                PdbqCreateVariable(
                    this=name,
                    expressions=columns,
                    domain=domain,
                    source=source,
                    evidence=evidence,
                    replace=replace,
                    source_text=source_text,
                    evidence_text=evidence_text,
                )
            )

        def _pdbq_parse_key_column(self) -> exp.Expr:
            tok = self._curr
            name = self._pdbq_name("a key column name")
            start = self._curr
            dtype = self._parse_types(check_func=False, schema=True, allow_identifiers=False)
            if dtype is None or not start:
                self.raise_error(f"expected a type for key column '{name.name}'", start or tok)
            text = self._find_sql(start, self._prev)
            col = exp.ColumnDef(this=name, kind=dtype)
            col.meta["type_text"] = text
            col.meta["token"] = tok
            return col

        def _pdbq_parse_domain(self) -> exp.Expr:
            tok = self._curr
            if tok.token_type == TokenType.BOOLEAN and tok.text.upper() == "BOOLEAN":
                self._advance()
                return self.expression(PdbqDomain(this="BOOLEAN"))
            if self._match_text_seq("CLUSTER"):
                return self.expression(PdbqDomain(this="CLUSTER"))
            if self._match_text_seq("CATEGORICAL"):
                self._pdbq_expect(TokenType.L_PAREN, "expected '(' and a size after CATEGORICAL")
                size_tok = self._curr
                if not size_tok or size_tok.token_type != TokenType.NUMBER or not size_tok.text.isdigit():
                    self.raise_error("CATEGORICAL(k) needs a whole number k >= 2")
                if int(size_tok.text) < 2:
                    self.raise_error(f"CATEGORICAL(k) needs k >= 2, got {size_tok.text}", size_tok)
                if int(size_tok.text) > MAX_CATEGORIES:
                    self.raise_error(f"CATEGORICAL(k) takes at most k = {MAX_CATEGORIES:,} values (a value is a "
                                     f"32-bit integer), got a {len(size_tok.text)}-digit k", size_tok)
                self._advance()
                self._pdbq_expect(TokenType.R_PAREN, "expected ')' after the CATEGORICAL size")
                return self.expression(
                    PdbqDomain(this="CATEGORICAL", size=exp.Literal.number(int(size_tok.text)))
                )
            if tok.token_type == TokenType.L_PAREN:
                self._advance()
                values: list = []
                seen: set[str] = set()
                while True:
                    vtok = self._curr
                    if not vtok or vtok.token_type != TokenType.STRING:
                        self.raise_error("domain values must be string literals, e.g. DOMAIN ('PER', 'ORG')")
                    if vtok.text == "":
                        self.raise_error("domain values must be non-empty strings", vtok)
                    if vtok.text in seen:
                        self.raise_error(f"domain value '{vtok.text}' appears twice", vtok)
                    seen.add(vtok.text)
                    values.append(exp.Literal.string(vtok.text))
                    self._advance()
                    if self._match(TokenType.COMMA):
                        continue
                    self._pdbq_expect(TokenType.R_PAREN, "expected ',' or ')' in the domain values")
                    break
                if len(values) < 2:
                    self.raise_error("a domain needs at least two values", tok)
                return self.expression(PdbqDomain(this="VALUES", expressions=values))
            self.raise_error("expected BOOLEAN, ('a', ...), CATEGORICAL(k) or CLUSTER after DOMAIN")
            raise AssertionError("unreachable")

        def _pdbq_parse_wrapped_query(self, clause: str) -> tuple[exp.Expr, str]:
            self._pdbq_expect(TokenType.L_PAREN, f"expected '(' and a SELECT query after {clause}")
            start = self._curr
            if not start or start.token_type == TokenType.R_PAREN:
                self.raise_error(f"expected a SELECT query inside {clause} (...)")
            query = self._parse_statement()
            if not isinstance(query, exp.Query):
                self.raise_error(f"expected a SELECT query inside {clause} (...)", start)
            if query.find(PdbqEstimate) is not None or query.find(PdbqQuery) is not None:
                self.raise_error(f"PROB, DIST, MAP and STDERR cannot be used inside {clause} (...)", start)
            end = self._prev
            self._pdbq_expect(TokenType.R_PAREN, f"expected ')' to close the {clause} query")
            return query, self._find_sql(start, end)

        def _pdbq_parse_create_rule(self, replace: bool) -> exp.Expr:
            name = self._pdbq_name("a rule name after CREATE RULE")
            args: dict = {}
            while self._curr and self._curr.token_type != TokenType.ALIAS:
                tok = self._curr
                clause = tok.text.upper()
                if clause not in ("WEIGHT", "SEMANTICS", "FUNCTION"):
                    self.raise_error(
                        f"expected WEIGHT, SEMANTICS, FUNCTION or AS in CREATE RULE, got '{tok.text}'"
                    )
                key = clause.lower()
                if key in args:
                    self.raise_error(f"{clause} is given twice", tok)
                self._advance()
                if clause == "WEIGHT":
                    args[key] = self._pdbq_parse_weight()
                else:
                    choices = SEMANTICS if clause == "SEMANTICS" else FUNCTIONS
                    word = self._curr
                    if not word or word.text.upper() not in choices:
                        shown = f"'{word.text}'" if word else "nothing"
                        self.raise_error(
                            f"unknown {clause.lower()} {shown}; expected one of " + ", ".join(choices),
                            word or tok,
                        )
                    self._advance()
                    args[key] = word.text.upper()
            if not self._match(TokenType.ALIAS):
                self.raise_error("expected AS head :- body after the rule's clauses")
            if self._pdbq_arrow_ahead():
                # MLN/ProbLog habit: `body => head` (a weighted clause, MLN semantics by default)
                body = self._pdbq_parse_list(self._pdbq_parse_body_item)
                self._pdbq_expect(TokenType.FARROW, "expected '=>' between the rule body and its head")
                head_tok = self._curr
                head = self._pdbq_parse_head()
                if self._curr:
                    self.raise_error(f"unexpected '{self._curr.text}' after the rule head")
                if not isinstance(head.expression, PdbqAtom):
                    args.setdefault("function", "IMPLY_MLN")
            else:
                head_tok = self._curr
                fact = self._pdbq_parse_fact_probability()
                if fact is not None:
                    if "weight" in args or "function" in args:
                        self.raise_error(
                            "a probabilistic fact p::head takes its weight from p: leave out WEIGHT and FUNCTION", head_tok
                        )
                    args["weight"], args["function"] = fact, "ISTRUE"
                    head_tok = self._curr
                head = self._pdbq_parse_head()
                if fact is not None and head.args.get("expression") is not None:
                    self.raise_error("a probabilistic fact p::rel(x) has one boolean atom as its head", head_tok)
                if not (self._curr.token_type == TokenType.COLON and self._next.token_type == TokenType.DASH):
                    self.raise_error("expected ':-' between the rule head and its body (or 'body => head')")
                self._advance(2)
                body = self._pdbq_parse_list(self._pdbq_parse_body_item)
            if isinstance(head.expression, PdbqAtom) and args.get("function", "EQUAL") != "EQUAL":
                self.raise_error(
                    f"a head of the form a(x) = b(y) means FUNCTION EQUAL, not FUNCTION {args['function']}",
                    head_tok,
                )
            if not any(isinstance(item, PdbqAtom) for item in body):
                self.raise_error("a rule body needs at least one atom such as rel(x, y)", self._prev)
            if self._curr:
                self.raise_error(f"unexpected '{self._curr.text}' after the rule body")
            return self.expression(
                PdbqCreateRule(this=name, head=head, expressions=body, replace=replace, **args)
            )

        def _pdbq_arrow_ahead(self) -> bool:
            """A top-level '=>' follows: the rule is written ``body => head``."""
            depth = 0
            for tok in self._tokens[self._index :]:
                if tok.token_type in _OPEN:
                    depth += 1
                elif tok.token_type in _CLOSE:
                    depth -= 1
                elif depth == 0 and tok.token_type == TokenType.FARROW:
                    return True
            return False

        def _pdbq_parse_head(self) -> exp.Expr:
            first = self._pdbq_parse_atom(head=True)
            if not self._match(TokenType.EQ):
                return self.expression(PdbqHead(this=first))
            tok = self._curr
            if tok and tok.token_type in self.ID_VAR_TOKENS and self._next.token_type == TokenType.L_PAREN:
                second = self._pdbq_parse_atom(head=True)
                return self.expression(PdbqHead(this=first, expression=second))
            value = self._pdbq_constant()
            if value is None:
                self.raise_error("expected a constant or an atom after '=' in the rule head", tok)
            return self.expression(PdbqHead(this=first, expression=value))

        def _pdbq_parse_atom(self, head: bool, negated: bool = False) -> exp.Expr:
            name = self._pdbq_name("an atom such as rel(x, y)")
            self._pdbq_expect(TokenType.L_PAREN, f"expected '(' after '{name.name}'")
            terms: list = []
            if self._curr.token_type != TokenType.R_PAREN:
                terms = self._pdbq_parse_list(lambda: self._pdbq_parse_term(head))
            self._pdbq_expect(TokenType.R_PAREN, f"expected ',' or ')' in the atom '{name.name}(...)'")
            return self.expression(PdbqAtom(this=name, expressions=terms, negated=negated))

        def _pdbq_parse_term(self, head: bool) -> exp.Expr:
            tok = self._curr
            if tok.token_type == TokenType.CARET:
                if not head:
                    self.raise_error("'^' marks head symbols and can only be used in the rule head", tok)
                self._advance()
                if self._curr.token_type not in _NAME_TOKENS or self._curr.text == "_":
                    self.raise_error("expected a symbol after '^'")
                return self.expression(PdbqHeadSymbol(this=self._pdbq_name("a symbol after '^'")))
            if tok.token_type == TokenType.VAR and tok.text == "_":
                if head:
                    self.raise_error("'_' (any value) cannot be used in the rule head", tok)
                self._advance()
                return self.expression(PdbqWildcard())
            const = self._pdbq_constant()
            if const is not None:
                return const
            if tok.token_type in _NAME_TOKENS or (
                tok.token_type in self.ID_VAR_TOKENS and _is_word(tok)
            ):
                if self._next.token_type not in (TokenType.COMMA, TokenType.R_PAREN):
                    self.raise_error(
                        "atom arguments must be symbols, constants or _; write other expressions as "
                        "conditions", self._next or tok
                    )
                return exp.column(self._pdbq_name("a symbol"))
            self.raise_error("atom arguments must be symbols, constants or _", tok)
            raise AssertionError("unreachable")

        def _pdbq_parse_body_item(self) -> exp.Expr:
            tok = self._curr
            if not tok:
                self.raise_error("expected an atom or a condition after ':-' or ','")
            start = self._index
            negated = tok.token_type == TokenType.NOT
            at = start + 1 if negated else start
            if self._pdbq_is_bare_call(at):
                if negated:
                    self._advance()
                return self._pdbq_parse_atom(head=False, negated=negated)
            self._pdbq_check_caret(start)
            expr = self._parse_disjunction()
            if expr is None:
                self.raise_error("expected an atom or a condition", tok)
            if self._curr and self._curr.token_type not in (TokenType.COMMA, TokenType.FARROW):
                self.raise_error(f"unexpected '{self._curr.text}' in the rule body; expected ',' or the end")
            self._pdbq_reject_in_rule(expr, tok)
            return expr

        def _pdbq_is_bare_call(self, i: int) -> bool:
            """`name(...)` filling a whole body item: the documented atom-versus-condition rule."""
            t = self._tokens
            n = len(t)
            if i + 1 >= n or t[i + 1].token_type != TokenType.L_PAREN:
                return False
            if not (t[i].token_type in self.ID_VAR_TOKENS or t[i].token_type in self.FUNC_TOKENS):
                return False
            if not _is_word(t[i]):
                return False
            depth = 0
            for j in range(i + 1, n):
                tt = t[j].token_type
                if tt in _OPEN:
                    depth += 1
                elif tt in _CLOSE:
                    depth -= 1
                    if depth == 0:
                        return j + 1 == n or t[j + 1].token_type in (TokenType.COMMA, TokenType.FARROW)
            return True  # unbalanced: let the atom parser report the missing ')'

        def _pdbq_check_caret(self, start: int) -> None:
            t = self._tokens
            depth = 0
            for j in range(start, len(t)):
                tt = t[j].token_type
                if tt in _OPEN:
                    depth += 1
                elif tt in _CLOSE:
                    depth -= 1
                elif tt == TokenType.COMMA and depth == 0:
                    return
                elif tt == TokenType.CARET and (j == start or t[j - 1].token_type not in _OPERAND_END):
                    self.raise_error("'^' marks head symbols and can only be used in the rule head", t[j])

        def _pdbq_reject_in_rule(self, expr: exp.Expr, tok: Token) -> None:
            if expr.find(PdbqEstimate) is not None:
                self.raise_error("PROB, DIST, MAP and STDERR cannot be used in a rule", tok)
            if expr.find(exp.Placeholder) is not None:
                self.raise_error("'?' is only allowed right after WEIGHT", tok)

        # ------------------------------------------------------------------ DROP / SHOW

        def _pdbq_parse_drop(self) -> exp.Expr:
            index = self._index
            if self._match_texts(("VARIABLE", "RULE")):
                kind = self._prev.text.upper()
                exists = self._match_text_seq("IF", "EXISTS")
                name = self._pdbq_name(f"a {kind.lower()} name after DROP {kind}")
                return self.expression(PdbqDrop(this=name, kind=kind, exists=exists))
            self._retreat(index)
            return self._parse_drop()

        def _pdbq_parse_learn(self) -> exp.Expr:
            self._advance()  # LEARN
            if not self._match_texts(("WEIGHTS",)):
                self.raise_error("expected WEIGHTS after LEARN: LEARN WEIGHTS [FOR rule, ...] [USING SGD] [WITH (...)]")
            rules: list = []
            if self._curr and self._curr.text.upper() == "FOR":
                self._advance()
                rules = self._pdbq_parse_list(lambda: self._pdbq_name("a rule name after LEARN WEIGHTS FOR"))
            method = None
            options: list = []
            if self._match(TokenType.USING):
                word = self._curr
                if not word or word.text.upper() not in LEARN_METHODS:
                    shown = f"'{word.text}'" if word else "nothing"
                    self.raise_error(
                        f"unknown learning method {shown} after USING; expected one of " + ", ".join(LEARN_METHODS),
                        word or self._prev,
                    )
                self._advance()
                method = word.text.upper()
            if self._curr and self._curr.token_type == TokenType.WITH:
                self._advance()
                options = self._pdbq_parse_options()
            if self._curr and self._curr.token_type != TokenType.SEMICOLON:
                self.raise_error(f"unexpected '{self._curr.text}' in LEARN WEIGHTS")
            return self.expression(PdbqLearn(expressions=rules or None, method=method, options=options or None))

        def _pdbq_parse_show(self) -> exp.Expr:
            if self._match_texts(("VARIABLES", "RULES", "WEIGHTS", "CALIBRATION")):
                return self.expression(PdbqShow(this=self._prev.text.upper()))
            return self._parse_show()

        # ------------------------------------------------------------------ small helpers

        def _pdbq_name(self, what: str) -> exp.Identifier:
            tok = self._curr
            if not tok or not (
                tok.token_type in _NAME_TOKENS or (tok.token_type in self.ID_VAR_TOKENS and _is_word(tok))
            ):
                shown = f", got '{tok.text}'" if tok else ""
                self.raise_error(f"expected {what}{shown}")
            self._advance()
            return exp.to_identifier(tok.text.lower())

        def _pdbq_expect(self, token_type: TokenType, message: str) -> None:
            if not self._match(token_type):
                self.raise_error(message)

        def _pdbq_constant(self, null: bool = False) -> exp.Expr | None:
            tok = self._curr
            tt = tok.token_type
            if tt == TokenType.STRING:
                self._advance()
                return exp.Literal.string(tok.text)
            if tt == TokenType.NUMBER:
                self._advance()
                return exp.Literal.number(tok.text)
            if tt in (TokenType.DASH, TokenType.PLUS) and self._next.token_type == TokenType.NUMBER:
                self._advance(2)
                number = exp.Literal.number(self._prev.text)
                return exp.Neg(this=number) if tt == TokenType.DASH else number
            if tt in (TokenType.TRUE, TokenType.FALSE):
                self._advance()
                return exp.Boolean(this=tt == TokenType.TRUE)
            if null and tt == TokenType.NULL:
                self._advance()
                return exp.Null()
            return None

        def _pdbq_bound_constant(self, null: bool = False) -> exp.Expr | None:
            """A constant, or a bound parameter (``?``, ``$1``, ``$name``) standing for one."""
            if self._curr is not None and self._curr.token_type in self.PLACEHOLDER_PARSERS:
                return self._parse_placeholder()
            return self._pdbq_constant(null=null)

        def _pdbq_constant_or_error(self, message: str) -> exp.Expr:
            value = self._pdbq_bound_constant()
            if value is None:
                self.raise_error(message)
            return value  # type: ignore[return-value]

    class Generator(DuckDB.Generator):
        TRANSFORMS = {
            **DuckDB.Generator.TRANSFORMS,
            PdbqEstimate: lambda self, e: (
                f"{e.args['kind']}({self.sql(e, 'this')}"
                + (f" = {self.sql(e, 'expression')}" if e.args.get("expression") else "")
                + (f" = {self.sql(e, 'other')}" if e.args.get("other") else "")
                + ")"
            ),
            PdbqGivenAtom: lambda self, e: (
                f"{self.sql(e, 'this')}({self.expressions(e, flat=True)}) = {self.sql(e, 'expression')}"
            ),
            PdbqGivenQuery: lambda self, e: f"({self.sql(e, 'expression')}) AS {self.sql(e, 'this')}",
            PdbqOption: lambda self, e: f"{self.sql(e, 'this')} = {self.sql(e, 'expression')}",
            PdbqQuery: lambda self, e: _query_sql(self, e),
        }


def _query_sql(gen, e: PdbqQuery) -> str:
    parts = ["EXPLAIN " if e.args.get("explain") else "", gen.sql(e, "this")]
    if e.args.get("given"):
        parts.append(" GIVEN " + ", ".join(gen.sql(g) for g in e.args["given"]))
    if e.args.get("method"):
        parts.append(f" USING {e.args['method']}")
    if e.args.get("options"):
        parts.append(" WITH (" + ", ".join(gen.sql(o) for o in e.args["options"]) + ")")
    return "".join(parts)
