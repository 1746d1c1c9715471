"""sqlglot rewrites of a probabilistic query's tree (``ProbQuery.tree``; never mutated, always copied).

Two rewrites serve the engine (docs/queries.md):

- `xq_selects`: the query variables of one alias — the estimate alias's scope with the select list
  replaced by the variables' vids, ORDER BY / LIMIT / GROUP BY / HAVING / QUALIFY / DISTINCT
  dropped, and every WHERE / JOIN ON conjunct that mentions an estimate dropped (an estimate is
  not known before inference, so such a conjunct cannot narrow x_q: dropping it gives a superset,
  which is always correct);
- `substitute`: the final query, each estimate alias's table reference replaced by a relation
  holding the key columns plus the ``__pdbq_est_<i>`` columns, which DuckDB then evaluates.

>>> import sqlglot
>>> t = sqlglot.parse_one("SELECT m.movie, m.__pdbq_est_0 FROM is_popular AS m "
...                       "WHERE m.movie <> 'x' AND m.__pdbq_est_0 > 0.5 ORDER BY 1 LIMIT 2", read="duckdb")
>>> sel = xq_selects(t, "m", lambda a: sqlglot.parse_one("SELECT 1 AS __pdbq_vid", read="duckdb").subquery(a))
>>> sel[0].sql("duckdb")
"SELECT DISTINCT m.__pdbq_vid FROM (SELECT 1 AS __pdbq_vid) AS m WHERE m.movie <> 'x'"
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import sqlglot.expressions as exp

from pdbq.errors import CatalogError, suggest

__all__ = [
    "PLACEHOLDER_PREFIX",
    "VID_COLUMN",
    "is_placeholder",
    "mentions_estimate",
    "alias_tables",
    "check_aliases",
    "xq_selects",
    "relax",
    "substitute",
]

PLACEHOLDER_PREFIX = "__pdbq_est_"
VID_COLUMN = "__pdbq_vid"

# Query modifiers that cannot narrow the set of rows an estimate is asked for.
_DROPPED = ("order", "limit", "offset", "group", "having", "qualify", "distinct", "exclude")


def is_placeholder(node: exp.Expression) -> bool:
    return isinstance(node, exp.Column) and node.name.lower().startswith(PLACEHOLDER_PREFIX)


def mentions_estimate(node: exp.Expression) -> bool:
    """True when ``node`` contains an estimate placeholder column."""
    return any(is_placeholder(c) for c in node.find_all(exp.Column))


def alias_tables(tree: exp.Expression, alias: str) -> list[exp.Table]:
    """The table references known in the query as ``alias`` (in document order)."""
    alias = alias.lower()
    return [t for t in tree.find_all(exp.Table) if t.alias_or_name.lower() == alias]


def check_aliases(tree: exp.Expression, aliases: Mapping[str, str], variable_names: set[str]) -> dict[str, str]:
    """Map each estimate alias to its variable relation; a `CatalogError` names an alias that is
    a subquery, a CTE or an ordinary table. ``aliases``: alias -> the estimate call's text."""
    cte_names = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    out: dict[str, str] = {}
    for alias, call in aliases.items():
        tables = alias_tables(tree, alias)
        if not tables:
            raise CatalogError(
                f"{call}: '{alias}' is a subquery, not a variable relation; estimates take a variable "
                f"relation (or its alias) from the query's FROM.{suggest(alias, variable_names)}"
            )
        names = {t.name.lower() for t in tables}
        for name in sorted(names):
            if name not in variable_names or name in cte_names:
                what = "a CTE" if name in cte_names else "not a variable relation"
                known = ", ".join(sorted(variable_names)) or "none"
                raise CatalogError(
                    f"{call}: '{alias}' names {name!r}, which is {what}; estimates take a variable "
                    f"relation.{suggest(name, variable_names)} Variable relations: {known}"
                )
        if len(names) > 1:
            raise CatalogError(f"{call}: the alias '{alias}' names several relations ({', '.join(sorted(names))})")
        out[alias] = names.pop()
    return out


def _strip_conjuncts(cond: exp.Expression | None) -> exp.Expression | None:
    """``cond`` without the AND-conjuncts that mention an estimate (None when nothing is left)."""
    if cond is None:
        return None
    kept = [c for c in cond.flatten() if not mentions_estimate(c)] if isinstance(cond, exp.And) else (
        [] if mentions_estimate(cond) else [cond]
    )
    if not kept:
        return None
    return exp.and_(*[k.copy() for k in kept]) if len(kept) > 1 else kept[0].copy()


def _relax(select: exp.Select, alias: str) -> exp.Select:
    return relax(select, [exp.Column(this=exp.to_identifier(VID_COLUMN), table=exp.to_identifier(alias))])


def relax(select: exp.Select, columns: list[exp.Expression]) -> exp.Select:
    """``select`` (mutated) as SELECT DISTINCT ``columns`` over the same rows or a superset:
    modifiers that cannot narrow the rows an estimate is asked for dropped, and every WHERE / JOIN
    ON conjunct that mentions an estimate dropped (module docstring)."""
    for key in _DROPPED:
        select.set(key, None)
    where = select.args.get("where")
    if where is not None:
        kept = _strip_conjuncts(where.this)
        select.set("where", exp.Where(this=kept) if kept is not None else None)
    for join in select.args.get("joins") or ():
        on = join.args.get("on")
        if on is not None:
            kept = _strip_conjuncts(on)
            join.set("on", kept if kept is not None else exp.true())
    select.set("expressions", list(columns))
    select.set("distinct", exp.Distinct())
    return select


def xq_selects(
    tree: exp.Expression, alias: str, source: Callable[[exp.TableAlias | str], exp.Expression]
) -> list[exp.Select]:
    """One SELECT per place ``alias`` occurs, each returning the DISTINCT vids (column
    ``__pdbq_vid``) of the variables that place selects.

    ``source(alias_node)`` builds the relation standing for the variable relation: it must have
    the columns ``__pdbq_vid``, the key columns and every ``__pdbq_est_<i>`` (as NULL) so that
    references elsewhere in the query still bind.
    """
    out = []
    for k in range(len(alias_tables(tree, alias))):
        copy = tree.copy()
        for t in alias_tables(copy, alias):
            node = source(t.args.get("alias") or alias)
            node.meta["pdbq_source"] = True
            t.replace(node)
        # The k-th occurrence's scope: the nearest SELECT around its (replaced) node.
        subs = [s for s in copy.find_all(exp.Subquery) if s.alias_or_name.lower() == alias.lower()
                and s.meta.get("pdbq_source")]
        found = subs[k].find_ancestor(exp.Select)
        if found is None:
            continue
        with_ = copy.args.get("with_") if isinstance(copy, exp.Query) else None
        scope = found.copy()
        if found is not copy and scope.args.get("with_") is None and with_ is not None:
            scope.set("with_", with_.copy())
        out.append(_relax(scope, alias))
    return out


def substitute(tree: exp.Expression, sources: Mapping[str, Callable[[exp.TableAlias | str], exp.Expression]]) -> exp.Expression:
    """A copy of ``tree`` with each alias's table references replaced by ``sources[alias](alias)``."""
    copy = tree.copy()
    for alias, source in sources.items():
        for t in alias_tables(copy, alias):
            t.replace(source(t.args.get("alias") or alias))
    return copy
