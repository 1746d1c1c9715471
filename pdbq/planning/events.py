"""The probability of an event over several variables: joint and conditional queries.

``probability(db, "smokes('ann') AND NOT cancer('ann')", given={"friends": ...})`` and
``joint(db, [("smokes", "ann"), ("cancer", "ann")])`` answer what per-variable marginals cannot:
P(a ∧ ¬b), P(a, b), P(a ∨ b | evidence).

How: the chain rule. With the event's variables x1..xk in order, P(E) = Σ_v P(x1 = v) ·
P(E | x1 = v), and each P(E | x1 = v) is answered the same way with x1 = v added to the evidence,
stopping as soon as the assignment so far decides E. Every factor is one ordinary query-aware
inference (`infer`), so every method works: EXACT gives exact conditionals (standard error 0);
sampling methods give estimates whose standard errors combine by the delta method over
independent runs (one seed per run): for a node with estimated P(x = v) = p̂_v (standard error
s_v) and child answers Q_v (variance V_v), Var ≈ (Σ_v s_v |Q_v − Q̄|)² + Σ_v p̂_v² V_v, where the
first term bounds the covariance of the p̂_v from above (they sum to one; Q̄ is their mean), so
the reported error is never too small to first order. A branch the model gives probability 0
is skipped.

Cost: at most Π(domain sizes) − 1 inferences (2^k − 1 for k booleans), usually far fewer since
decided branches stop; more than `MAX_VARIABLES` variables raise `InferenceError`.

Events are written like conditions on variables: ``rel(key, ...)`` (a boolean variable is true),
``rel(key) = value``, ``<>``, combined with AND, OR, NOT and parentheses.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import sqlglot
import sqlglot.expressions as exp

from pdbq.errors import InferenceError, ParseError, PdbqError
from pdbq.language.nodes import Method
from pdbq.planning.infer import infer
from pdbq.planning.plan import Session
from pdbq.planning.shapes import normalize_given, normalize_targets

__all__ = ["probability", "joint", "EventAnswer", "MAX_VARIABLES"]

MAX_VARIABLES = 12

Var = tuple[str, tuple]  # (relation, key)


@dataclass(frozen=True)
class EventAnswer:
    """P(event | evidence): ``p``, its standard error ``stderr`` (0 when exact), how many
    inferences were run, and the method they used."""

    p: float
    stderr: float
    runs: int
    method: str
    warnings: tuple[str, ...] = field(default=())

    def __float__(self) -> float:
        return self.p


# ---------------------------------------------------------------------------------- the event


def _literal(node: exp.Expression, where: str) -> Any:
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Neg):
        return -_literal(node.this, where)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        return int(text) if text.lstrip("-").isdigit() else float(text)
    raise PdbqError(f"{where}: keys and values are constants, got '{node.sql()}'")


def _atom(node: exp.Expression, where: str) -> Var | None:
    if isinstance(node, exp.Anonymous):
        name, args = str(node.this), list(node.expressions)
    elif isinstance(node, exp.Func):
        # a relation named like a SQL function (year, left, ...) parses as that function
        name, args = node.sql_name(), list(node.iter_expressions())
    else:
        return None
    return (name.lower(), tuple(_literal(a, where) for a in args))


@dataclass(frozen=True)
class _Event:
    """An event compiled to a test over assignments {var: value}."""

    variables: tuple[Var, ...]
    test: Callable[[Mapping[Var, Any]], bool | None]  # None: undecided by a partial assignment


def _compile(text: str) -> _Event:
    where = f"event {text!r}"
    try:
        tree = sqlglot.parse_one(text, read="duckdb")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        raise ParseError(f"{where}: cannot read it; write e.g. smokes('ann') AND NOT cancer('ann')", line=1, col=1) from None
    found: list[Var] = []

    def var_of(node: exp.Expression) -> Var:
        v = _atom(node, where)
        if v is None:
            raise PdbqError(f"{where}: expected a variable such as rel('key'), got '{node.sql()}'")
        if v not in found:
            found.append(v)
        return v

    def build(node: exp.Expression) -> Callable[[Mapping[Var, Any]], bool | None]:
        if isinstance(node, exp.Paren):
            return build(node.this)
        if isinstance(node, exp.Not):
            inner = build(node.this)
            return lambda a: None if (r := inner(a)) is None else not r
        if isinstance(node, (exp.And, exp.Or)):
            left, right = build(node.this), build(node.expression)
            is_and = isinstance(node, exp.And)

            def both(a: Mapping[Var, Any]) -> bool | None:
                x, y = left(a), right(a)
                if is_and:
                    if x is False or y is False:
                        return False
                    return None if x is None or y is None else True
                if x is True or y is True:
                    return True
                return None if x is None or y is None else False

            return both
        if isinstance(node, (exp.EQ, exp.NEQ)):
            v = var_of(node.this)
            value = _literal(node.expression, where)
            eq = isinstance(node, exp.EQ)
            return lambda a: None if v not in a else ((a[v] == value) == eq)
        v = var_of(node)
        return lambda a: None if v not in a else (a[v] is True)

    test = build(tree)
    return _Event(tuple(found), test)


# ---------------------------------------------------------------------------------- the chain rule


def _as_method(method: Method | str) -> Method:
    if isinstance(method, Method):
        return method
    try:
        return Method(str(method).upper())
    except ValueError:
        raise PdbqError(f"unknown method {method!r}; valid: {', '.join(m.value for m in Method)}") from None


class _Runner:
    def __init__(self, db: Session, given: list, method: Method, options: Mapping[str, Any] | None):
        if method is Method.ANNEAL:
            raise InferenceError("ANNEAL finds a most probable world, not probabilities: use EXACT, GIBBS, QAM or AUTO")
        self.db, self.given, self.method = db, given, method
        self.options = dict(options or {})
        self.base_seed = self.options.get("seed", getattr(db, "default_options", {}).get("seed"))
        self.runs = 0
        self.methods: set[str] = set()
        self.warnings: list[str] = []

    def conditional(self, var: Var, assigned: Mapping[Var, Any]) -> tuple[list[Any], list[float], list[float]]:
        """Values, P(var = value | evidence, assigned) and standard errors."""
        opts = dict(self.options)
        if self.base_seed is not None:
            opts["seed"] = int(self.base_seed) + self.runs  # independent runs: one seed each
        given = list(self.given) + [(rel, key, value) for (rel, key), value in assigned.items()]
        self.runs += 1
        inf = infer(self.db, {var[0]: [var[1]]}, given=given, method=self.method, options=opts)
        self.methods.add(str(inf.diagnostics.get("method")))
        self.warnings.extend(str(w) for w in inf.diagnostics.get("warnings") or ())
        ans = inf[var[0]]
        dist = ans.dist()[0] or {}
        values = list(dist)
        k = len(values)
        se = [float(ans.stderrs[0, j]) if not math.isnan(ans.stderrs[0, j]) else 0.0 for j in range(k)]
        if inf.diagnostics.get("method") == "EXACT":
            se = [0.0] * k
        return values, [float(dist[v]) for v in values], se


def _prob(runner: _Runner, event: _Event, order: Sequence[Var], assigned: dict[Var, Any]) -> tuple[float, float]:
    decided = event.test(assigned)
    if decided is not None:
        return (1.0 if decided else 0.0), 0.0
    var = next(v for v in order if v not in assigned)
    values, ps, ses = runner.conditional(var, assigned)
    qs, vs = [], []
    for value, p, s in zip(values, ps, ses):
        if p == 0.0 and s == 0.0:
            qs.append(0.0)
            vs.append(0.0)
            continue
        q, v = _prob(runner, event, order, {**assigned, var: value})
        qs.append(q)
        vs.append(v)
    mean_q = sum(qs) / len(qs) if qs else 0.0
    total = sum(p * q for p, q in zip(ps, qs))
    spread = sum(s * abs(q - mean_q) for s, q in zip(ses, qs))
    var_total = spread**2 + sum(p * p * v for p, v in zip(ps, vs))
    return min(1.0, max(0.0, total)), var_total


def _check_variables(db: Session, event: _Event) -> None:
    variables = db.catalog.variables()
    normalize_targets([(rel, key if len(key) != 1 else key[0]) for rel, key in event.variables],
                      {name: len(v.columns) for name, v in variables.items()})
    if len(event.variables) > MAX_VARIABLES:
        raise InferenceError(
            f"the event names {len(event.variables)} variables; the chain rule needs up to "
            f"2^{len(event.variables)} inferences (limit {MAX_VARIABLES} variables)"
        )


def probability(
    db: Session,
    event: str,
    *,
    given: Any = None,
    method: Method | str = Method.AUTO,
    options: Mapping[str, Any] | None = None,
) -> EventAnswer:
    """P(``event`` | ``given``) with its standard error (see the module docstring).

    ``event``: e.g. ``"smokes('ann') AND NOT cancer('ann')"`` or ``"tag(3) = 'PER' OR tag(4) =
    'PER'"``. ``given``: evidence in any shape `infer` takes. ``method``/``options`` as in
    `infer` (a ``seed`` option seeds run i with seed + i).
    """
    compiled = _compile(event)
    _check_variables(db, compiled)
    runner = _Runner(db, normalize_given(given), _as_method(method), options)
    p, var = _prob(runner, compiled, compiled.variables, {})
    method_used = "/".join(sorted(runner.methods)) or "NONE"
    return EventAnswer(p, math.sqrt(max(var, 0.0)), runner.runs, method_used, tuple(dict.fromkeys(runner.warnings)))


def joint(
    db: Session,
    variables: Iterable[tuple[str, Any]],
    *,
    given: Any = None,
    method: Method | str = Method.AUTO,
    options: Mapping[str, Any] | None = None,
) -> pa.Table:
    """The joint distribution of ``variables`` (``(relation, key)`` pairs) given ``given``: one row
    per assignment with one column per variable (named ``relation(key)``), ``p`` and ``stderr``.
    Rows of probability 0 under EXACT are left out. PROB(a, b) of the issue tracker.
    """
    pairs = [(str(rel).lower(), tuple(key) if isinstance(key, (tuple, list)) else (key,)) for rel, key in variables]
    if not pairs:
        raise PdbqError("joint() needs at least one (relation, key) pair")
    if len(pairs) > MAX_VARIABLES:
        raise InferenceError(f"joint over {len(pairs)} variables: at most {MAX_VARIABLES}")
    catalog_vars = db.catalog.variables()
    normalize_targets([(r, k if len(k) != 1 else k[0]) for r, k in pairs],
                      {name: len(v.columns) for name, v in catalog_vars.items()})
    runner = _Runner(db, normalize_given(given), _as_method(method), options)
    rows: list[tuple[tuple, float, float]] = []

    def walk(i: int, assigned: dict[Var, Any], p: float, var: float) -> None:
        # p: P(assignment so far); var: its variance, that of a product of independent estimates
        # (Var XY = q²·Var X + p²·s² + Var X·s²) kept absolute, so a tiny q never divides anything
        if i == len(pairs):
            rows.append((tuple(assigned[v] for v in pairs), p, math.sqrt(var)))
            return
        values, ps, ses = runner.conditional(pairs[i], assigned)
        for value, q, s in zip(values, ps, ses):
            if q == 0.0 and s == 0.0:
                continue
            walk(i + 1, {**assigned, pairs[i]: value}, p * q, q * q * var + p * p * s * s + var * s * s)

    walk(0, {}, 1.0, 0.0)
    names = [f"{rel}({', '.join(repr(k) for k in key)})" for rel, key in pairs]
    cols: dict[str, Any] = {n: [r[0][j] for r in rows] for j, n in enumerate(names)}
    cols["p"] = pa.array([r[1] for r in rows], type=pa.float64())
    cols["stderr"] = pa.array([r[2] for r in rows], type=pa.float64())
    table = pa.table(cols)
    warned = list(dict.fromkeys(runner.warnings))
    if warned:  # the runs' warnings travel with the table: a joint is never a plain number
        table = table.replace_schema_metadata({b"warnings": json.dumps(warned).encode()})
    return table

