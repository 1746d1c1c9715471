"""Compile a rule into a sqlglot SELECT that yields one row per grounding.

Every atom becomes a FROM item: observed atoms name the user's table or view (its columns taken
positionally), random atoms the relation's vid map ``pdbq_vars__<relation>``. Shared symbols become
equalities, constants filters, wildcards nothing; ``NOT t(...)`` over an observed table becomes
``NOT EXISTS``; conditions get their symbols replaced by the columns that bind them.

Output columns, in order:
  ``v0 .. v{k-1}``  vids of the random atoms: body atoms in written order, then the head atom(s)
                    (the head is last, docs/factors.md);
  ``w``             EXPRESSION weights: the weight of this grounding (DOUBLE);
  ``t_<sym>``       TIED weights: the tying symbols' values;
  ``h_<sym>``       LOGICAL/RATIO semantics: the head symbols' values (the head-group key).
Literals are per position and the same for every grounding, so they live in the rule's registry
row, not in each factor row.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import duckdb
import sqlglot
import sqlglot.expressions as exp

from pdbq.errors import GroundingError, suggest
from pdbq.grounding.store import col, ident, table_ref, var_table
from pdbq.grounding.variables import domain_index
from pdbq.language.nodes import (
    Atom,
    CreateRule,
    CreateVariable,
    DomainKind,
    FactorFunction,
    HeadKind,
    Semantics,
    TermKind,
    WeightKind,
)

__all__ = ["CompiledRule", "compile_cached", "compile_rule", "observed_columns", "UNSUPPORTED_FUNCTIONS"]

# DeepDive's single-factor aggregates hold a whole head group in one factor of varying arity, and
# TABLE needs a table of log-potentials that no rule text gives: neither is grounded from rules.
UNSUPPORTED_FUNCTIONS = {
    FactorFunction.LINEAR: "use the default function with SEMANTICS LINEAR",
    FactorFunction.RATIO: "use the default function with SEMANTICS RATIO",
    FactorFunction.LOGICAL: "use the default function with SEMANTICS LOGICAL",
    FactorFunction.TABLE: "TABLE factors come from importers (pdbq.graph.builder / UAI files)",
}


@dataclass(frozen=True)
class CompiledRule:
    """A rule ready to ground. ``select`` yields one row per grounding (see module docstring);
    ``vid_columns[i]`` is the column that produces ``v{i}`` (used to restrict to a frontier)."""

    name: str
    select: exp.Select = field(repr=False)
    vid_columns: tuple[exp.Column, ...] = field(repr=False)
    relations: tuple[str, ...]  # variable relation of each position
    literals: tuple[int, ...]
    function: FactorFunction
    semantics: Semantics  # effective: LINEAR when there are no head groups
    weight_kind: WeightKind
    weight_value: float
    tie_columns: tuple[str, ...]
    head_columns: tuple[str, ...]
    observed: tuple[str, ...]  # observed tables/views read (for staleness)
    # ("table", name) / ("map", relation) whose row counts multiply to an upper bound on the
    # groundings: every observed atom's table, and each variable atom not keyed entirely by
    # constants and symbols bound elsewhere (a map holds one row per key, so a fully keyed atom
    # matches at most one row per combination of the others)
    size_bound: tuple[tuple[str, str], ...] = ()

    @property
    def arity(self) -> int:
        return len(self.relations)

    @property
    def grouped(self) -> bool:
        return bool(self.head_columns)

    @property
    def has_w(self) -> bool:
        return self.weight_kind is WeightKind.EXPRESSION

    def restricted(self, condition: exp.Expression) -> exp.Select:
        """The grounding SELECT with an extra WHERE condition (over ``vid_columns``)."""
        return self.select.copy().where(condition, copy=False)

    def sql(self) -> str:
        return self.select.sql(dialect="duckdb", pretty=True)

    @functools.cached_property
    def select_text(self) -> str:
        """``select`` as DuckDB SQL, generated once (a compiled rule is shared between calls
        by `compile_cached`: nothing may change its tree in place)."""
        return self.select.sql(dialect="duckdb")

    def guarded_text(self, max_rows: int) -> str:
        """The grounding SELECT with ``LIMIT max_rows + 1`` (bounds the work of a join the
        optimizer underestimated), or plain when there is no real bound."""
        if max_rows >= 2**62:
            return self.select_text
        cache = self.__dict__.setdefault("_guarded", {})
        text = cache.get(max_rows)
        if text is None:
            text = cache[max_rows] = self.select.copy().limit(max_rows + 1).sql(dialect="duckdb")
        return text


class observed_columns:
    """A column lookup for observed atoms: ``lookup(name)`` gives the table's/view's column names,
    or None if there is none; ``lookup.known()`` lists table and view names (for hints)."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con

    def __call__(self, name: str) -> list[str] | None:
        # A table or view the binder finds by this one name: its columns from a bound relation
        # (no statement runs, ~0.05 ms against ~1 ms for the catalog query below). `_table_kind`
        # reads the catalog only, so a Python object found by a replacement scan is not taken
        # for a table. Dotted names and the rest go to the catalog query.
        kind = getattr(self.con, "_table_kind", None)
        if kind is not None and "." not in name:
            try:
                if kind(name) in ("table", "view"):
                    return list(self.con.table(name).columns)
            except duckdb.Error:
                pass
        # a catalog query, not SELECT * FROM name: a failed statement would abort the transaction
        # ordered in Python: an ORDER BY here costs DuckDB more than the catalog scan itself
        rows = self.con.execute(
            "SELECT database_name = current_database(), schema_name = current_schema(), database_name, schema_name, "
            "column_index, column_name FROM duckdb_columns() WHERE table_name = ?",
            [name],
        ).fetchall()
        if not rows:
            return None
        rows.sort(key=lambda r: (not r[0], not r[1], r[2], r[3], r[4]))
        first = rows[0][2:4]
        return [r[5] for r in rows if r[2:4] == first]

    def known(self) -> list[str]:
        rows = self.con.execute(
            "SELECT table_name FROM duckdb_tables() UNION SELECT view_name FROM duckdb_views() WHERE NOT internal"
        ).fetchall()
        return [r[0] for r in rows if not r[0].startswith("pdbq_")]


def _parse(rule: str, text: str, what: str) -> exp.Expression:
    try:
        return sqlglot.parse_one(text, read="duckdb")
    except sqlglot.errors.ParseError as e:
        raise GroundingError(f"rule '{rule}': cannot read {what} {text!r}: {e}") from None


def _substitute(rule: str, text: str, bindings: Mapping[str, exp.Expression], what: str) -> exp.Expression:
    tree = _parse(rule, text, what)

    def repl(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table:
            name = node.name.lower()
            if name not in bindings:
                raise GroundingError(
                    f"rule '{rule}': {what} {text!r} names '{node.name}', which no positive body atom binds."
                    + suggest(name, bindings)
                )
            return bindings[name].copy()
        return node

    return tree.transform(repl)


def _size_bound(atoms: list[tuple[Atom, bool]], variables: Mapping[str, CreateVariable]) -> tuple[tuple[str, str], ...]:
    """See `CompiledRule.size_bound`. Filters (negated observed atoms, conditions) only remove rows."""
    parts: list[tuple[str, str]] = []
    bound: set[str] = set()
    pending = []
    for atom, _is_head in atoms:
        if atom.relation in variables:
            pending.append(atom)
        elif not atom.negated:
            parts.append(("table", atom.relation))
            bound |= {t.text.lower() for t in atom.terms if t.kind is TermKind.SYMBOL}
    while pending:
        keyed = [a for a in pending if all(t.kind is TermKind.CONSTANT or (t.kind is TermKind.SYMBOL and t.text.lower() in bound)
                                           for t in a.terms)]
        if keyed:
            pending = [a for a in pending if a not in keyed]
            continue
        first = pending.pop(0)
        parts.append(("map", first.relation))
        bound |= {t.text.lower() for t in first.terms if t.kind is TermKind.SYMBOL}
    return tuple(parts)


def compile_cached(
    rule: CreateRule,
    variables: Mapping[str, CreateVariable],
    columns_of: Callable[[str], Sequence[str] | None],
) -> CompiledRule:
    """`compile_rule`, reused while the rule, the variable relations it names and the columns of
    the tables it reads are the same (building and generating the SELECT costs ~2 ms of Python
    per rule and query; the column lookups still run every time, so a changed table recompiles)."""
    names = sorted({a.relation for a in (*rule.body, *rule.head.atoms)})
    observed = []
    for r in names:
        if r in variables:
            continue
        cols = columns_of(r)
        if cols is None:  # compile_rule raises, with hints from the real lookup
            return compile_rule(rule, variables, columns_of)
        observed.append((r, tuple(cols)))
    return _compile_key(rule, tuple((r, variables[r]) for r in names if r in variables), tuple(observed))


@functools.lru_cache(maxsize=512)
def _compile_key(rule: CreateRule, var_items: tuple, observed: tuple) -> CompiledRule:
    cols = dict(observed)
    return compile_rule(rule, dict(var_items), cols.get)


@dataclass
class _Joins:
    """What binding a rule's atoms produces: the FROM items, join/filter conditions, the first
    column each symbol is bound to, and where the random atoms sit."""

    bindings: dict[str, exp.Expression] = field(default_factory=dict)
    where: list[exp.Expression] = field(default_factory=list)
    from_items: list[exp.Table] = field(default_factory=list)
    negated_observed: list[tuple[str, Atom, list[str]]] = field(default_factory=list)
    observed: list[str] = field(default_factory=list)
    positions: list[tuple[str, str, Atom, bool]] = field(default_factory=list)  # (alias, relation, atom, is_head)


def compile_rule(
    rule: CreateRule,
    variables: Mapping[str, CreateVariable],
    columns_of: Callable[[str], Sequence[str] | None],
) -> CompiledRule:
    """Compile one rule. ``columns_of(name)`` gives an observed table's column names (or None).

    >>> # compile_rule(rule, catalog.variables(), observed_columns(con)).sql()
    """
    name = rule.name
    head_atoms = _check_head(rule, variables)
    atoms: list[tuple[Atom, bool]] = [(a, False) for a in rule.body] + [(a, True) for a in head_atoms]
    joins = _bind_atoms(name, atoms, variables, columns_of)
    joins.where.extend(_negated_filters(name, joins))
    for cond in rule.conditions:
        joins.where.append(exp.Paren(this=_substitute(name, cond, joins.bindings, "condition")))

    # positions: body random atoms in written order, then head atoms (head last)
    ordered = [p for p in joins.positions if not p[3]] + [p for p in joins.positions if p[3]]
    literals = _literals(rule, variables, ordered)
    if not ordered:
        raise GroundingError(f"rule '{name}': no random atom, nothing to ground")

    vid_columns = tuple(col("vid", alias) for alias, *_ in ordered)
    projections: list[exp.Expression] = [c.copy().as_(ident(f"v{i}")) for i, c in enumerate(vid_columns)]
    tie_columns = _weight_projections(rule, joins.bindings, projections)
    semantics = Semantics(rule.semantics)
    head_columns = _head_projections(rule, semantics, head_atoms, joins.bindings, projections)

    select = exp.select(*projections)
    select = select.from_(joins.from_items[0])
    for t in joins.from_items[1:]:
        select = select.join(t)
    if joins.where:
        select = select.where(exp.and_(*joins.where))
    return CompiledRule(
        size_bound=_size_bound(atoms, variables),
        name=name,
        select=select,
        vid_columns=vid_columns,
        relations=tuple(p[1] for p in ordered),
        literals=tuple(literals),
        function=FactorFunction(rule.function),
        semantics=semantics,
        weight_kind=rule.weight.kind,
        weight_value=float(rule.weight.value),
        tie_columns=tuple(tie_columns),
        head_columns=tuple(head_columns),
        observed=tuple(dict.fromkeys(joins.observed)),
    )


def _check_head(rule: CreateRule, variables: Mapping[str, CreateVariable]) -> list[Atom]:
    """The head atoms, each a variable relation, under a factor function grounding supports."""
    name = rule.name
    if rule.function in UNSUPPORTED_FUNCTIONS:
        raise GroundingError(
            f"rule '{name}': FUNCTION {rule.function.name} is not grounded from rules; {UNSUPPORTED_FUNCTIONS[rule.function]}"
        )
    head_atoms = list(rule.head.atoms)
    for a in head_atoms:
        if a.relation not in variables:
            raise GroundingError(f"rule '{name}': head atom '{a.relation}' is not a variable relation." + suggest(a.relation, variables))
    return head_atoms


def _bind_atoms(
    name: str,
    atoms: list[tuple[Atom, bool]],
    variables: Mapping[str, CreateVariable],
    columns_of: Callable[[str], Sequence[str] | None],
) -> _Joins:
    """Join every positive atom on its shared symbols; negated observed atoms wait for NOT EXISTS."""
    joins = _Joins()
    for i, (atom, is_head) in enumerate(atoms):
        alias = f"a{i}"
        rel = atom.relation
        if rel in variables:
            cols = [c.name for c in variables[rel].columns]
            table = var_table(rel)
        else:
            found = columns_of(rel)
            if found is None:
                raise GroundingError(
                    f"rule '{name}': atom '{rel}' names no table, view or variable relation."
                    + suggest(rel, list(variables) + list(getattr(columns_of, "known", list)()))
                )
            cols = list(found)
            table = rel
            joins.observed.append(rel)
        if len(atom.terms) != len(cols):
            raise GroundingError(
                f"rule '{name}': atom '{rel}' has {len(atom.terms)} terms but '{rel}' has {len(cols)} columns ({', '.join(cols)})"
            )
        if atom.negated and rel not in variables:
            joins.negated_observed.append((alias, atom, cols))
            continue
        joins.from_items.append(table_ref(table, alias))
        for term, c in zip(atom.terms, cols):
            ref = col(c, alias)
            if term.kind is TermKind.SYMBOL:
                sym = term.text.lower()
                if sym in joins.bindings:
                    joins.where.append(exp.EQ(this=ref, expression=joins.bindings[sym].copy()))
                else:
                    joins.bindings[sym] = ref
            elif term.kind is TermKind.CONSTANT:
                joins.where.append(exp.EQ(this=ref, expression=_parse(name, term.text, "constant")))
        if rel in variables:
            joins.positions.append((alias, rel, atom, is_head))
    return joins


def _negated_filters(name: str, joins: _Joins) -> list[exp.Expression]:
    """One NOT EXISTS per negated observed atom, correlated on the symbols bound outside it."""
    out: list[exp.Expression] = []
    for alias, atom, cols in joins.negated_observed:
        inner: list[exp.Expression] = []
        local: dict[str, exp.Expression] = {}
        for term, c in zip(atom.terms, cols):
            ref = col(c, alias)
            if term.kind is TermKind.SYMBOL:
                sym = term.text.lower()
                if sym in joins.bindings:
                    inner.append(exp.EQ(this=ref, expression=joins.bindings[sym].copy()))
                elif sym in local:
                    inner.append(exp.EQ(this=ref, expression=local[sym].copy()))
                else:
                    local[sym] = ref
            elif term.kind is TermKind.CONSTANT:
                inner.append(exp.EQ(this=ref, expression=_parse(name, term.text, "constant")))
        sub = exp.select(exp.Literal.number(1)).from_(table_ref(atom.relation, alias))
        if inner:
            sub = sub.where(exp.and_(*inner))
        out.append(exp.Not(this=exp.Exists(this=sub)))
    return out


def _literals(
    rule: CreateRule, variables: Mapping[str, CreateVariable], ordered: list[tuple[str, str, Atom, bool]]
) -> list[int]:
    """Per random atom, the value it asserts: 1/0 (boolean, negated), a domain index, or -1 (raw)."""
    name = rule.name
    literals: list[int] = []
    for _alias, rel, atom, is_head in ordered:
        dom = variables[rel].domain
        boolean = dom.kind is DomainKind.BOOLEAN and not variables[rel].per_row_cardinality
        if is_head:
            if rule.head.kind is HeadKind.COMPARE:
                literals.append(domain_index(dom, rule.head.value or "", what=f"rule '{name}' head {rel}"))
            elif rule.head.kind is HeadKind.EQUAL or rule.function in (FactorFunction.EQUAL,):
                literals.append(-1)
            elif boolean:
                literals.append(1)
            else:
                raise GroundingError(
                    f"rule '{name}': head '{rel}' is categorical; compare it with a value, e.g. {rel}(...) = 'value'"
                )
        else:
            if boolean:
                literals.append(0 if atom.negated else 1)
            elif rule.function is FactorFunction.EQUAL and not atom.negated:
                literals.append(-1)
            else:
                raise GroundingError(
                    f"rule '{name}': body atom '{rel}' is categorical; only boolean random atoms can appear in a body "
                    "(or raw values under FUNCTION EQUAL)"
                )
    return literals


def _weight_projections(
    rule: CreateRule, bindings: dict[str, exp.Expression], projections: list[exp.Expression]
) -> list[str]:
    """Append the per-grounding weight (w), feature (f) and tie (t_*) columns; return the tie columns."""
    name = rule.name
    w = rule.weight
    tie_columns: list[str] = []
    if w.kind is WeightKind.EXPRESSION:
        expr = _substitute(name, w.expression or "", bindings, "weight expression")
        projections.append(exp.Cast(this=expr, to=exp.DataType.build("DOUBLE")).as_(ident("w")))
    if w.kind in (WeightKind.LEARNABLE, WeightKind.TIED) and w.expression is not None:
        # the feature a learnable weight multiplies (cluster rules, pdbq.coref.design)
        expr = _substitute(name, w.expression, bindings, "weight feature")
        projections.append(exp.Cast(this=expr, to=exp.DataType.build("DOUBLE")).as_(ident("f")))
    if w.kind is WeightKind.TIED:
        for s in w.symbols:
            s = s.lower()
            if s not in bindings:
                raise GroundingError(f"rule '{name}': weight ?({s}) ties on a symbol no body atom binds." + suggest(s, bindings))
            tie_columns.append(f"t_{s}")
            projections.append(bindings[s].copy().as_(ident(f"t_{s}")))
    return tie_columns


def _head_projections(
    rule: CreateRule,
    semantics: Semantics,
    head_atoms: list[Atom],
    bindings: dict[str, exp.Expression],
    projections: list[exp.Expression],
) -> list[str]:
    """Under LOGICAL/RATIO semantics, append the head-group key columns (h_*); return their names."""
    name = rule.name
    w = rule.weight
    head_columns: list[str] = []
    if semantics is Semantics.LINEAR:
        return head_columns
    hs = [s.lower() for s in rule.head_symbols] or list(
        dict.fromkeys(t.text.lower() for a in head_atoms for t in a.terms if t.kind is TermKind.SYMBOL)
    )
    for s in hs:
        if s not in bindings:
            raise GroundingError(f"rule '{name}': head symbol '{s}' is not bound." + suggest(s, bindings))
        head_columns.append(f"h_{s}")
        projections.append(bindings[s].copy().as_(ident(f"h_{s}")))
    wsyms: set[str] = set()
    if w.kind is WeightKind.TIED:
        wsyms = {x.lower() for x in w.symbols}
    elif w.kind is WeightKind.EXPRESSION:
        wsyms = {c.name.lower() for c in _parse(name, w.expression or "", "weight expression").find_all(exp.Column)}
    if wsyms - set(hs):
        raise GroundingError(
            f"rule '{name}': SEMANTICS {semantics.name} needs a weight that depends on head symbols only; "
            f"the weight uses {sorted(wsyms - set(hs))}"
        )
    if not hs:  # a group per rule: every grounding shares the (empty) head key
        head_columns.append("h_")
        projections.append(exp.Literal.number(0).as_(ident("h_")))
    return head_columns
