"""The WEIGHT clause of CREATE RULE (and a fact's ``p::``), parsed by a mixin of pdbq's sqlglot
parser (`pdbq.language.dialect.PdbqDialect.Parser`): the methods use the parser's cursor
(``self._curr``, ``self._advance``, ...) like its own."""

from __future__ import annotations

import math

import sqlglot.expressions as exp
from sqlglot.tokens import TokenType

from pdbq.language.expressions import PdbqWeight

__all__ = ["NAME_TOKENS", "WeightParsing"]

NAME_TOKENS = {TokenType.VAR, TokenType.IDENTIFIER}
_NAME_TOKENS = NAME_TOKENS


class WeightParsing:
    """``WEIGHT number | ? [* feature] | ?(syms) [* feature] | = expr | MODEL 'name' ON records``
    and ``p::`` (mixin)."""

    def _pdbq_parse_fact_probability(self) -> exp.Expr | None:
        """``p::`` before a head (ProbLog's probabilistic fact): the weight that gives the head
        prior probability p under FUNCTION ISTRUE, whose ±1 encoding makes P(true) =
        sigmoid(2w), so w = logit(p) / 2. ``p`` is a number in (0, 1) or a body symbol
        (a probability column): then the weight is computed per grounding."""
        if self._next is None or self._next.token_type != TokenType.DCOLON:
            return None
        tok = self._curr
        if tok.token_type == TokenType.NUMBER:
            p = float(tok.text)
            if not 0.0 < p < 1.0:
                self.raise_error(
                    f"a fact's probability must lie strictly between 0 and 1, got {tok.text} "
                    "(a certain fact is evidence: use the variable's EVIDENCE)", tok
                )
            self._advance(2)
            w = 0.5 * math.log(p / (1.0 - p))
            return self.expression(PdbqWeight(this="CONSTANT", expression=exp.Literal.number(repr(w)) if w >= 0
                                              else exp.Neg(this=exp.Literal.number(repr(-w)))))
        if tok.token_type in _NAME_TOKENS:
            name = self._pdbq_name("a probability symbol before '::'")
            self._advance()  # '::'
            sym = exp.column(name.name.lower())
            logit = exp.Ln(this=exp.Div(this=sym, expression=exp.Paren(this=exp.Sub(
                this=exp.Literal.number(1), expression=sym.copy()))))
            return self.expression(PdbqWeight(this="EXPRESSION", expression=exp.Mul(
                this=exp.Literal.number("0.5"), expression=logit)))
        self.raise_error("expected a probability (a number or a symbol) before '::'", tok)
        return None

    def _pdbq_parse_weight(self) -> exp.Expr:
        tok = self._curr
        if tok.token_type == TokenType.PLACEHOLDER and tok.text == "?":
            self._advance()
            if self._curr.token_type == TokenType.L_PAREN and self._prev.end + 1 == self._curr.start:
                self._advance()
                syms = self._pdbq_parse_list(lambda: self._pdbq_name("a symbol in WEIGHT ?(...)"))
                self._pdbq_expect(TokenType.R_PAREN, "expected ')' after the tied symbols")
                return self.expression(PdbqWeight(this="TIED", expressions=syms, expression=self._pdbq_parse_feature()))
            return self.expression(PdbqWeight(this="LEARNABLE", expression=self._pdbq_parse_feature()))
        if tok.token_type == TokenType.EQ:
            self._advance()
            start = self._curr
            expr = self._parse_disjunction()
            if expr is None:
                self.raise_error("expected an expression after WEIGHT =", start or tok)
            self._pdbq_reject_in_rule(expr, start)
            return self.expression(PdbqWeight(this="EXPRESSION", expression=expr))
        if tok.text.upper() == "MODEL" and self._next is not None and self._next.token_type in (
                TokenType.STRING, *NAME_TOKENS):
            return self._pdbq_parse_model_weight()
        value = self._pdbq_constant()
        if value is None or not (value.is_number or isinstance(value, exp.Neg)):
            self.raise_error("expected a number, ?, ?(symbols) or = expression after WEIGHT (or, for a DOMAIN "
                             "CLUSTER pair rule, MODEL 'name' ON records)", tok)
        return self.expression(PdbqWeight(this="CONSTANT", expression=value))

    def _pdbq_parse_model_weight(self) -> exp.Expr:
        """``MODEL 'name[@version]' ON records``: a stored pair model scores each grounding (a
        DOMAIN CLUSTER pair) from the two records' fields in ``records``."""
        self._advance()  # MODEL
        tok = self._curr
        if tok.token_type == TokenType.STRING:
            self._advance()
            ref = tok.text
        else:
            ref = self._pdbq_name("a stored pair model's name after WEIGHT MODEL").name
        if not ref.strip():
            self.raise_error("WEIGHT MODEL needs a stored pair model's name, e.g. WEIGHT MODEL 'people@1' ON people", tok)
        if not self._match(TokenType.ON):
            self.raise_error(f"expected ON <records table> after WEIGHT MODEL '{ref}' (the table or view holding "
                             "the records the model compares)", self._curr or tok)
        records = self._pdbq_name("the records table after WEIGHT MODEL ... ON")
        return self.expression(PdbqWeight(this="MODEL", expression=exp.Literal.string(ref), expressions=[records]))

    def _pdbq_parse_feature(self) -> exp.Expr | None:
        """``* expr`` after ``?`` / ``?(syms)``: the learnable weight multiplies this
        per-grounding feature (the whole expression up to the next clause)."""
        if not self._match(TokenType.STAR):
            return None
        start = self._curr
        expr = self._parse_disjunction()
        if expr is None:
            self.raise_error("expected a feature expression after WEIGHT ? *", start or self._prev)
        self._pdbq_reject_in_rule(expr, start)
        return expr
