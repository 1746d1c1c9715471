"""CREATE-time validation of variable relations and rules.

Everything here reads; nothing writes. A definition that passes is consistent with the tables
and the other definitions at the moment it is created (data changed later is the grounding
layer's concern). Every failure is a CatalogError (or an EvidenceError for stored evidence
values) naming the object, with near-match suggestions where a name was misspelled; a DuckDB
error met while checking is attached as ``__cause__``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import duckdb
import sqlglot
import sqlglot.expressions as exp

from pdbq.catalog import types
from pdbq.catalog.names import (
    RESERVED_PREFIX,
    explain_duckdb_error,
    fetch_one,
    first_line,
    normalize,
    relation_columns,
    table_expr,
)
from pdbq.catalog.text import atom_sql, weight_sql
from pdbq.catalog.cluster import check_cluster_rule, check_cluster_variable, check_model_weight
from pdbq.errors import CatalogError, EvidenceError, suggest
from pdbq.language.nodes import (
    Atom,
    Column,
    CreateRule,
    CreateVariable,
    Domain,
    DomainKind,
    HeadKind,
    MAX_CATEGORIES,
    Semantics,
    TermKind,
    WeightKind,
)

__all__ = [
    "Scope",
    "check_variable",
    "check_rule",
    "rule_relations",
    "parse_query",
    "bind_columns",
    "source_names",
    "renamed_source",
    "CARDINALITY",
]

_VALUE = "_pdbq_value"
CARDINALITY = "_pdbq_cardinality"  # the per-row cardinality column of an importer's FROM query


@dataclass
class Scope:
    """What a definition is checked against: the connection, the variable relations (with their
    canonical key columns), the rule names, and the other tables/views DuckDB knows."""

    con: duckdb.DuckDBPyConnection
    variables: dict[str, CreateVariable]
    keys: dict[str, tuple[Column, ...]]
    rules: set[str]
    relations: set[str] = field(default_factory=set)  # tables/views, excluding variable views

    def check_name(self, name: str, kind: str, or_replace: bool) -> None:
        """CatalogError unless ``name`` is free for a new ``kind`` ("variable" | "rule")."""
        if not name:
            raise CatalogError(f"a {kind} needs a name")
        if name.startswith(RESERVED_PREFIX):
            raise CatalogError(f"{kind} name '{name}': names starting with '{RESERVED_PREFIX}' are reserved for pdbq")
        if name in self.relations:
            raise CatalogError(f"cannot create {kind} '{name}': a table or view named '{name}' already exists")
        other = "rule" if kind == "variable" else "variable"
        if name in (self.rules if kind == "variable" else self.variables):
            raise CatalogError(f"cannot create {kind} '{name}': a {other} named '{name}' already exists")
        mine = self.variables if kind == "variable" else self.rules
        if name in mine and not or_replace:
            raise CatalogError(
                f"{kind} '{name}' already exists (use CREATE OR REPLACE {kind.upper()} to redefine it)"
            )


# ----------------------------------------------------------------------------- queries


def parse_query(sql: str, what: str) -> exp.Query:
    """``sql`` as a sqlglot query tree; CatalogError unless it is one query (never executed here)."""
    try:
        trees = [t for t in sqlglot.parse(sql, read="duckdb") if t is not None]
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError) as e:
        raise CatalogError(f"{what} does not parse: {first_line(e)}") from e
    if len(trees) != 1 or not isinstance(trees[0], exp.Query):
        raise CatalogError(f"{what} must be a single SELECT query")
    return trees[0]


def bind_columns(con: duckdb.DuckDBPyConnection, query: exp.Query, what: str,
                 relations: Iterable[str] = ()) -> tuple[Column, ...]:
    """The output columns of ``query``, found by binding it with LIMIT 0 (nothing is read).

    ``relations`` are the names offered as near matches when the query names an unknown table.
    """
    sql = exp.select("*").from_(query.subquery("_pdbq_q")).limit(0).sql(dialect="duckdb")
    try:
        rel = con.sql(sql)
    except duckdb.Error as e:
        raise CatalogError(f"{what}: {explain_duckdb_error(e, relations)}") from e
    return tuple(Column(c, str(t)) for c, t in zip(rel.columns, rel.types))


def _renamed(query: exp.Query, alias: str, names: list[str]) -> exp.Subquery:
    """``(query) AS alias(names...)``: positional renaming, whatever the query calls its columns."""
    return exp.Subquery(
        this=query.copy(),
        alias=exp.TableAlias(
            this=exp.to_identifier(alias), columns=[exp.to_identifier(n, quoted=True) for n in names]
        ),
    )


def _first_row(con: duckdb.DuckDBPyConnection, select: exp.Select, what: str) -> tuple | None:
    try:
        return fetch_one(con, select.sql(dialect="duckdb"))
    except duckdb.Error as e:
        raise CatalogError(f"{what}: {explain_duckdb_error(e)}") from e


def _col(name: str, table: str | None = None) -> exp.Column:
    return exp.column(exp.to_identifier(name, quoted=True), table=table)


def _show_row(names: list[str], row: tuple) -> str:
    return ", ".join(f"{n}={v!r}" for n, v in zip(names, row))


# ----------------------------------------------------------------------------- variables


def _check_domain(domain: Domain, what: str) -> None:
    if domain.kind is DomainKind.BOOLEAN:
        if domain.size != 2:
            raise CatalogError(f"{what}: a BOOLEAN domain has 2 values, not {domain.size}")
    elif domain.kind is DomainKind.VALUES:
        if not domain.values:
            raise CatalogError(f"{what}: the domain lists no values")
        seen: set[str] = set()
        for v in domain.values:
            if v in seen:
                raise CatalogError(f"{what}: domain value '{v}' is listed twice")
            seen.add(v)
        if domain.size != len(domain.values):
            raise CatalogError(f"{what}: domain size {domain.size} differs from its {len(domain.values)} values")
    elif domain.kind is DomainKind.CLUSTER:
        pass  # the values are the entities the keys form; nothing to list
    elif domain.size < 1:
        raise CatalogError(f"{what}: CATEGORICAL({domain.size}) needs at least one value")
    elif domain.size > MAX_CATEGORIES:
        raise CatalogError(f"{what}: CATEGORICAL(k) takes at most k = {MAX_CATEGORIES:,} values (a value is a "
                           f"32-bit integer), got {domain.size:,}")


def check_variable(scope: Scope, node: CreateVariable) -> tuple[Column, ...]:
    """Validate ``CREATE VARIABLE``; return its key columns with canonical DuckDB types."""
    con = scope.con
    name = normalize(node.name)
    what = f"variable '{name}'"
    scope.check_name(name, "variable", node.or_replace)
    if not node.columns:
        raise CatalogError(f"{what} declares no key columns")
    keys: list[Column] = []
    for c in node.columns:
        cname = normalize(c.name)
        if any(k.name == cname for k in keys):
            raise CatalogError(f"{what}: key column '{cname}' is declared twice")
        keys.append(Column(cname, types.canonical_type(con, c.type, what=f"{what}, key column '{cname}'")))
    _check_domain(node.domain, what)
    check_cluster_variable(node, what)

    source = parse_query(node.source, f"{what}: FROM query")
    actual = bind_columns(con, source, f"{what}: FROM query", scope.relations | set(scope.keys))
    if node.per_row_cardinality:
        _check_cardinality_column(node, keys, actual, what)
        actual = actual[:-1]
    _check_key_columns(keys, actual, node.columns, f"{what}: FROM query")
    names = [k.name for k in keys]
    rows = _renamed(source, "_pdbq_src", source_names(node, keys))
    null = _first_row(
        con,
        exp.select(*[_col(n) for n in names]).from_(rows)
        .where(exp.or_(*[_col(n).is_(exp.null()) for n in names])).limit(1),
        f"{what}: FROM query",
    )
    if null is not None:
        raise CatalogError(f"{what}: the FROM query yields a NULL key ({_show_row(names, null)})")
    dup = _first_row(
        con,
        exp.select(*[_col(n) for n in names]).from_(rows).group_by(*[_col(n) for n in names])
        .having(exp.GT(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(1))).limit(1),
        f"{what}: FROM query",
    )
    if dup is not None:
        raise CatalogError(
            f"{what}: the FROM query yields the key ({_show_row(names, dup)}) more than once; "
            "one variable per key row (use SELECT DISTINCT)"
        )
    if node.per_row_cardinality:
        card = _col(CARDINALITY)
        bad = _first_row(
            con,
            exp.select(*[_col(n) for n in names], card).from_(rows).where(exp.or_(
                card.is_(exp.null()),
                exp.LT(this=card.copy(), expression=exp.Literal.number(2)),
                exp.GT(this=card.copy(), expression=exp.Literal.number(node.domain.size)),
            )).limit(1),
            f"{what}: FROM query",
        )
        if bad is not None:
            raise CatalogError(
                f"{what}: the FROM query gives ({_show_row(names, bad)}) cardinality {bad[-1]!r}; "
                f"per-row cardinalities lie in 2 .. {node.domain.size}"
            )
    if node.evidence is not None:
        _check_evidence(scope, node, tuple(keys), source, what)
    return tuple(keys)


def renamed_source(node: CreateVariable, keys: tuple[Column, ...]) -> exp.Subquery:
    """``(FROM query) AS _pdbq_src(key, ...)``: the variable rows under the declared key names."""
    return _renamed(parse_query(node.source, f"variable '{normalize(node.name)}': FROM query"), "_pdbq_src",
                    source_names(node, keys))


def source_names(node: CreateVariable, keys: tuple[Column, ...] | list[Column]) -> list[str]:
    """Positional names for the FROM query's columns: the keys (then the per-row cardinality)."""
    names = [k.name for k in keys]
    return names + [CARDINALITY] if node.per_row_cardinality else names


def _check_cardinality_column(node: CreateVariable, keys: list[Column], actual: tuple[Column, ...], what: str) -> None:
    if node.domain.kind is not DomainKind.CATEGORICAL:
        raise CatalogError(f"{what}: per-row cardinalities need a CATEGORICAL domain")
    if len(actual) != len(keys) + 1 or types.family(actual[-1].type) != "integer":
        raise CatalogError(
            f"{what}: the FROM query yields {len(actual)} column(s) ({', '.join(c.name for c in actual)}); "
            f"with per-row cardinalities it must yield the {len(keys)} key column(s) then one integer column"
        )


def _check_key_columns(keys: list[Column] | tuple[Column, ...], actual: tuple[Column, ...],
                       declared: tuple[Column, ...], what: str) -> None:
    if len(actual) != len(keys):
        raise CatalogError(
            f"{what} yields {len(actual)} column(s) ({', '.join(c.name for c in actual)}) but "
            f"{len(keys)} key column(s) are declared ({', '.join(k.name for k in keys)})"
        )
    for key, col, decl in zip(keys, actual, declared):
        if not types.key_compatible(key.type, col.type):
            raise CatalogError(
                f"{what}: column '{col.name}' is {col.type} but key column '{key.name}' is declared "
                f"{decl.type.upper()} ({key.type})"
            )


def _domain_violation(domain: Domain, value: exp.Expression, value_type: str) -> exp.Expression | None:
    """A SQL condition true for values outside ``domain`` (None when the type rules them out)."""
    fam = types.family(value_type)
    if domain.kind is DomainKind.BOOLEAN:
        if fam == "boolean":
            return None
        return exp.Not(this=exp.In(this=value, expressions=[exp.Literal.number(0), exp.Literal.number(1)]))
    if domain.kind is DomainKind.VALUES:
        return exp.Not(this=exp.In(this=value, expressions=[exp.Literal.string(v) for v in domain.values]))
    return exp.or_(
        exp.LT(this=value, expression=exp.Literal.number(0)),
        exp.GTE(this=value, expression=exp.Literal.number(domain.size)),
    )


_VALUE_FAMILIES = {
    DomainKind.BOOLEAN: ({"boolean", "integer"}, "BOOLEAN or an integer 0/1"),
    DomainKind.VALUES: ({"string"}, "text"),
    DomainKind.CATEGORICAL: ({"integer"}, "an integer 0 .. k-1"),
}


def _check_evidence(scope: Scope, node: CreateVariable, keys: tuple[Column, ...], source: exp.Query, what: str) -> None:
    con = scope.con
    ev = parse_query(node.evidence or "", f"{what}: EVIDENCE query")
    cols = bind_columns(con, ev, f"{what}: EVIDENCE query", scope.relations | set(scope.keys))
    if len(cols) != len(keys) + 1:
        raise CatalogError(
            f"{what}: the EVIDENCE query yields {len(cols)} column(s) ({', '.join(c.name for c in cols)}); "
            f"it must yield the {len(keys)} key column(s) then one value column"
        )
    _check_key_columns(keys, cols[:-1], node.columns, f"{what}: EVIDENCE query")
    value_col = cols[-1]
    allowed, wording = _VALUE_FAMILIES[node.domain.kind]
    if types.family(value_col.type) not in allowed:
        raise CatalogError(
            f"{what}: the EVIDENCE value column '{value_col.name}' is {value_col.type}; "
            f"a {node.domain.kind.name} domain needs {wording}"
        )
    names = [k.name for k in keys]
    rows = _renamed(ev, "_pdbq_ev", names + [_VALUE])
    value = _col(_VALUE)
    present = value.is_(exp.null()).not_()
    bad = _domain_violation(node.domain, value, value_col.type)
    if bad is not None:
        row = _first_row(
            con,
            exp.select(*[_col(n) for n in names], value).from_(rows).where(exp.and_(present, bad)).limit(1),
            f"{what}: EVIDENCE query",
        )
        if row is not None:
            raise EvidenceError(
                f"{what}: evidence value {row[-1]!r} (for {_show_row(names, row)}) is not in the domain"
            )
    conflict = _first_row(
        con,
        exp.select(*[_col(n) for n in names]).from_(rows).where(present).group_by(*[_col(n) for n in names])
        .having(exp.GT(this=exp.Count(this=exp.Distinct(expressions=[value])), expression=exp.Literal.number(1)))
        .limit(1),
        f"{what}: EVIDENCE query",
    )
    if conflict is not None:
        raise EvidenceError(f"{what}: the EVIDENCE query gives conflicting values for ({_show_row(names, conflict)})")
    matches = exp.and_(*[exp.EQ(this=_col(n, "_pdbq_ev"), expression=_col(n, "_pdbq_src")) for n in names])
    variables = _renamed(source, "_pdbq_src", source_names(node, keys))
    orphan_query = (
        exp.select(*[_col(n) for n in names]).from_(rows)
        .where(exp.and_(present, exp.Not(this=exp.Exists(this=exp.select("1").from_(variables).where(matches)))))
        .limit(1)
    )
    orphan = _first_row(con, orphan_query, f"{what}: EVIDENCE query")
    if orphan is not None:
        raise EvidenceError(
            f"{what}: evidence row ({_show_row(names, orphan)}) names no variable (its key is not in the FROM query)"
        )
    if node.per_row_cardinality:
        beyond = _first_row(
            con,
            exp.select(*[_col(n, "_pdbq_ev") for n in names], _col(_VALUE)).from_(rows)
            .join(variables.copy(), on=matches.copy())
            .where(exp.GTE(this=_col(_VALUE), expression=_col(CARDINALITY))).limit(1),
            f"{what}: EVIDENCE query",
        )
        if beyond is not None:
            raise EvidenceError(
                f"{what}: evidence value {beyond[-1]!r} (for {_show_row(names, beyond)}) is not below "
                "that variable's own cardinality"
            )


# ----------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class _Resolved:
    random: bool
    columns: tuple[Column, ...]
    what: str  # "variable relation 'x'" | "table 'x'"


def _resolve(scope: Scope, atom: Atom, rule_what: str) -> _Resolved:
    name = normalize(atom.relation)
    if name in scope.keys:
        return _Resolved(True, scope.keys[name], f"variable relation '{name}'")
    if name.startswith(RESERVED_PREFIX):
        raise CatalogError(
            f"{rule_what}: atom {atom_sql(atom)} names '{name}', which is reserved for pdbq's own tables"
        )
    if name in scope.rules:
        raise CatalogError(f"{rule_what}: atom {atom_sql(atom)} names rule '{name}'; atoms name tables or variables")
    cols = None
    if "." in name or name in scope.relations:
        table_expr(name)
        try:
            cols = relation_columns(scope.con, name)
        except duckdb.Error as e:
            raise CatalogError(f"{rule_what}: relation '{name}' cannot be read: {explain_duckdb_error(e)}") from e
    if cols is None:
        known = set(scope.relations) | set(scope.keys)
        raise CatalogError(f"{rule_what}: unknown relation '{name}' in atom {atom_sql(atom)}.{suggest(name, known)}")
    return _Resolved(False, cols, f"table '{name}'")


def _literal_type(con: duckdb.DuckDBPyConnection, text: str, where: str) -> tuple[exp.Expression, str]:
    """The tree of a constant and its DuckDB type (a constant is evaluated, so it must be a literal)."""
    try:
        tree = sqlglot.parse_one(text, read="duckdb")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError) as e:
        raise CatalogError(f"{where}: constant {text} does not parse") from e
    if tree is None or tree.find(exp.Query, exp.Column, exp.Star) is not None:
        raise CatalogError(f"{where}: {text} is not a constant")
    try:
        row = fetch_one(con, exp.select(exp.func("typeof", tree.copy())).sql(dialect="duckdb"))
    except duckdb.Error as e:
        raise CatalogError(f"{where}: constant {text} is not a value: {explain_duckdb_error(e)}") from e
    return tree, str(row[0]) if row else "NULL"


def _check_constant(con: duckdb.DuckDBPyConnection, text: str, column: Column, where: str) -> None:
    tree, ctype = _literal_type(con, text, where)
    if ctype == '"NULL"' or isinstance(tree, exp.Null):
        raise CatalogError(f"{where}: the constant NULL never matches; use a condition with IS NULL")
    if isinstance(tree, exp.Literal) and tree.is_string and types.family(column.type) != "string":
        target = exp.DataType.build(column.type, dialect="duckdb")
        cast = exp.select(exp.TryCast(this=tree.copy(), to=target).is_(exp.null()))
        try:
            row = fetch_one(con, cast.sql(dialect="duckdb"))
        except duckdb.Error as e:
            raise CatalogError(
                f"{where}: constant {text} cannot be compared with column '{column.name}' ({column.type})"
            ) from e
        if row and row[0]:
            raise CatalogError(f"{where}: constant {text} is not of type {column.type} (column '{column.name}')")
        return
    if not types.comparable(column.type, ctype):
        raise CatalogError(
            f"{where}: constant {text} ({ctype}) cannot be compared with column '{column.name}' ({column.type})"
        )


def _expression_symbols(sql: str, what: str) -> tuple[exp.Expression, list[str]]:
    """The tree of a condition/weight expression and the symbols (unqualified columns) it uses."""
    try:
        trees = [t for t in sqlglot.parse(sql, read="duckdb") if t is not None]
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError) as e:
        raise CatalogError(f"{what} does not parse: {first_line(e)}") from e
    if len(trees) != 1:
        raise CatalogError(f"{what} must be one expression")
    tree = trees[0]
    symbols: list[str] = []
    for col in tree.find_all(exp.Column):
        if isinstance(col.this, exp.Star):
            raise CatalogError(f"{what}: '*' is not a symbol")
        lam = col.find_ancestor(exp.Lambda)
        bound_by_lambda = False
        while lam is not None:
            if any(p.name.lower() == col.name.lower() for p in lam.expressions):
                bound_by_lambda = True
                break
            lam = lam.find_ancestor(exp.Lambda)
        if bound_by_lambda:
            continue
        if col.table:
            raise CatalogError(f"{what}: '{col.sql(dialect='duckdb')}' is qualified; conditions use bare symbols")
        name = col.name.lower()
        if name not in symbols:
            symbols.append(name)
    return tree, symbols


def rule_relations(node: CreateRule) -> tuple[str, ...]:
    """Every relation the rule's head and body atoms name, lower-cased, in first-seen order."""
    out: list[str] = []
    for atom in (*node.head.atoms, *node.body):
        name = normalize(atom.relation)
        if name not in out:
            out.append(name)
    return tuple(out)


def _check_head_value(node: CreateRule, domain: Domain, con: duckdb.DuckDBPyConnection, what: str) -> None:
    text = node.head.value or ""
    atom = atom_sql(node.head.atoms[0])
    tree, _ = _literal_type(con, text, f"{what}: head {atom}")
    if domain.kind is DomainKind.VALUES:
        ok = isinstance(tree, exp.Literal) and tree.is_string and tree.this in domain.values
        if not ok:
            shown = tree.this if isinstance(tree, exp.Literal) else text
            raise CatalogError(
                f"{what}: head {atom} = {text} compares with a value outside the domain "
                f"({', '.join(repr(v) for v in domain.values)}).{suggest(str(shown), domain.values)}"
            )
        return
    literal = tree.sql(dialect="duckdb").lower() if isinstance(tree, (exp.Literal, exp.Boolean)) else None
    if isinstance(tree, exp.Literal) and tree.is_string:
        literal = None
    if domain.kind is DomainKind.BOOLEAN:
        inside = literal in ("true", "false", "0", "1")
    else:  # 0 .. k-1 by value: a domain may have billions of values, never listed
        inside = literal is not None and literal.isdigit() and str(int(literal)) == literal and int(literal) < domain.size
    if not inside:
        kind = "BOOLEAN" if domain.kind is DomainKind.BOOLEAN else f"CATEGORICAL({domain.size})"
        raise CatalogError(f"{what}: head {atom} = {text} compares with a value outside its {kind} domain")


def check_rule(scope: Scope, node: CreateRule, *, check_name: bool = True) -> tuple[str, ...]:
    """Validate ``CREATE RULE``; return the relations it names (for DROP dependency checks)."""
    con = scope.con
    name = normalize(node.name)
    what = f"rule '{name}'"
    if check_name:
        scope.check_name(name, "rule", node.or_replace)
    head = node.head
    expected_atoms = 2 if head.kind is HeadKind.EQUAL else 1
    if len(head.atoms) != expected_atoms:
        raise CatalogError(f"{what}: a {head.kind.value} head has {expected_atoms} atom(s), not {len(head.atoms)}")
    if head.kind is HeadKind.COMPARE and head.value is None:
        raise CatalogError(f"{what}: the head comparison has no value")
    check_cluster_rule(node, scope.variables, what)
    check_model_weight(con, node, scope.variables, what)

    # symbol -> [(atom text, column)] for every binding occurrence in a positive or random body atom
    bound: dict[str, list[tuple[str, Column]]] = {}
    for atom in node.body:
        res = _resolve(scope, atom, what)
        _check_arity(atom, res, what)
        if atom.negated and not res.random:
            raise CatalogError(
                f"{what}: NOT {atom_sql(atom)[4:]}: negation applies to random atoms only, and {res.what} is observed"
            )
        for term, column in zip(atom.terms, res.columns):
            where = f"{what}, atom {atom_sql(atom)}"
            if term.kind is TermKind.SYMBOL:
                bound.setdefault(term.text.lower(), []).append((atom_sql(atom), column))
            elif term.kind is TermKind.CONSTANT:
                _check_constant(con, term.text, column, where)

    for sym, occurrences in bound.items():
        for occ in occurrences[1:]:
            _check_join_types(sym, occ, occurrences[:1], what)

    head_domains: list[Domain] = []
    for atom in head.atoms:
        res = _resolve(scope, atom, what)
        if not res.random:
            raise CatalogError(
                f"{what}: the head {atom_sql(atom)} names {res.what}, an observed table; "
                "a head must be a random-variable relation"
            )
        _check_arity(atom, res, what)
        head_domains.append(scope.variables[normalize(atom.relation)].domain)
        for term, column in zip(atom.terms, res.columns):
            where = f"{what}, head {atom_sql(atom)}"
            if term.kind is TermKind.WILDCARD:
                raise CatalogError(f"{where}: '_' cannot stand in a head")
            if term.kind is TermKind.CONSTANT:
                _check_constant(con, term.text, column, where)
                continue
            sym = term.text.lower()
            if sym not in bound:
                raise CatalogError(
                    f"{where}: head symbol '{sym}' is not bound by any body atom.{suggest(sym, bound)}"
                )
            _check_join_types(sym, (atom_sql(atom), column), bound[sym], what)

    if head.kind is HeadKind.COMPARE:
        _check_head_value(node, head_domains[0], con, what)
    if head.kind is HeadKind.EQUAL and head_domains[0] != head_domains[1]:
        raise CatalogError(
            f"{what}: the two sides of {atom_sql(head.atoms[0])} = {atom_sql(head.atoms[1])} have different domains"
        )

    for sym in node.head_symbols:
        if sym.lower() not in bound:
            raise CatalogError(f"{what}: head symbol '{sym}' is not bound by any body atom.{suggest(sym, bound)}")

    typed: dict[str, str] = {s: occ[0][1].type for s, occ in bound.items()}
    checks: list[tuple[str, exp.Expression, str]] = []  # (label, tree, kind)
    for cond in node.conditions:
        label = f"{what}: condition {cond}"
        tree, symbols = _expression_symbols(cond, label)
        _require_bound(symbols, bound, label)
        checks.append((label, tree, "condition"))

    weight = node.weight
    weight_symbols: list[str] = []
    if weight.kind is WeightKind.TIED:
        if not weight.symbols:
            raise CatalogError(f"{what}: WEIGHT ?() names no symbols")
        weight_symbols = [s.lower() for s in weight.symbols]
        _require_bound(weight_symbols, bound, f"{what}: WEIGHT ?({', '.join(weight.symbols)})")
    if weight.kind in (WeightKind.LEARNABLE, WeightKind.TIED) and weight.expression is not None:
        label = f"{what}: WEIGHT {weight_sql(weight)}"
        tree, feature_symbols = _expression_symbols(weight.expression, label)
        _require_bound(feature_symbols, bound, label)
        checks.append((label, tree, "weight"))
    elif weight.kind is WeightKind.EXPRESSION:
        label = f"{what}: WEIGHT = {weight.expression}"
        tree, weight_symbols = _expression_symbols(weight.expression or "", label)
        _require_bound(weight_symbols, bound, label)
        checks.append((label, tree, "weight"))
    if node.semantics in (Semantics.LOGICAL, Semantics.RATIO):
        heads = {s.lower() for s in node.head_symbols} or {
            t.text.lower() for a in head.atoms for t in a.terms if t.kind is TermKind.SYMBOL
        }
        outside = [s for s in weight_symbols if s not in heads]
        if outside:
            raise CatalogError(
                f"{what}: with SEMANTICS {node.semantics.name} the weight may depend on head symbols only "
                f"({', '.join(sorted(heads)) or 'none'}); it uses {', '.join(outside)}"
            )
    _bind_expressions(con, checks, typed)
    return rule_relations(node)


def _check_arity(atom: Atom, res: _Resolved, what: str) -> None:
    if len(atom.terms) != len(res.columns):
        noun = "key column" if res.random else "column"
        raise CatalogError(
            f"{what}: atom {atom_sql(atom)} has {len(atom.terms)} argument(s) but {res.what} has "
            f"{len(res.columns)} {noun}(s) ({', '.join(c.name for c in res.columns)})"
        )


def _check_join_types(sym: str, occ: tuple[str, Column], others: list[tuple[str, Column]], what: str) -> None:
    atom_text, column = occ
    for other_atom, other_col in others:
        if not types.comparable(column.type, other_col.type):
            raise CatalogError(
                f"{what}: symbol '{sym}' joins {other_atom} (column '{other_col.name}', {other_col.type}) "
                f"with {atom_text} (column '{column.name}', {column.type}): incompatible types"
            )


def _require_bound(symbols: list[str], bound: Mapping[str, object], label: str) -> None:
    for sym in symbols:
        if sym not in bound:
            raise CatalogError(f"{label}: symbol '{sym}' is not bound by any body atom.{suggest(sym, bound)}")


_NOT_TEXT = {"integer", "float", "boolean", "date", "timestamp", "time", "interval"}
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ)


def _check_comparisons(con: duckdb.DuckDBPyConnection, tree: exp.Expression, frame: exp.Expression, label: str) -> None:
    """Refuse comparisons between a text operand and a number, boolean or date (``x = 3`` with x
    TEXT): DuckDB binds them with an implicit cast that fails only on the data, at query time,
    with a message about pdbq's internal tables. An explicit CAST states the intent."""
    for node in tree.find_all(*_COMPARISONS):
        sides = [node.this, node.expression]
        query = exp.select(*[exp.alias_(e.copy(), f"_pdbq_{i}") for i, e in enumerate(sides)]).from_(frame).limit(0)
        try:
            kinds = [str(t) for t in con.sql(query.sql(dialect="duckdb")).types]
        except duckdb.Error:
            continue  # the whole expression's binding reports it
        fams = [types.family(t) for t in kinds]
        if "string" in fams and set(fams) - {"string"} <= _NOT_TEXT and len(set(fams)) == 2:
            text = node.sql(dialect="duckdb")
            raise CatalogError(
                f"{label}: '{text}' compares {kinds[0]} with {kinds[1]}; DuckDB would convert the text "
                "row by row and fail on the first value that is not a number. Compare values of one type, "
                "or CAST one side explicitly"
            )


def _bind_expressions(con: duckdb.DuckDBPyConnection, checks: list[tuple[str, exp.Expression, str]],
                      typed: Mapping[str, str]) -> None:
    """Bind each condition/weight over typed NULL symbols (LIMIT 0) so DuckDB checks names and types."""
    if not checks:
        return
    symbols = [
        exp.alias_(exp.cast(exp.null(), exp.DataType.build(t, dialect="duckdb")), exp.to_identifier(s, quoted=True))
        for s, t in typed.items()
    ] or [exp.alias_(exp.null(), "_pdbq_none")]
    frame = exp.select(*symbols).subquery("_pdbq_symbols")
    for label, tree, kind in checks:
        query = exp.select(exp.alias_(tree.copy(), "_pdbq_x")).from_(frame).limit(0).sql(dialect="duckdb")
        try:
            rel = con.sql(query)
        except duckdb.Error as e:
            raise CatalogError(f"{label}: {explain_duckdb_error(e)}") from e
        _check_comparisons(con, tree, frame, label)
        result_type = str(rel.types[0])
        fam = types.family(result_type)
        if kind == "condition" and fam != "boolean":
            raise CatalogError(f"{label}: a condition must be BOOLEAN, this one is {result_type}")
        if kind == "weight" and fam not in ("integer", "float"):
            raise CatalogError(f"{label}: a weight must be numeric, this one is {result_type}")
