"""x_e for one query: stored evidence plus ``GIVEN``, with GIVEN overriding stored values.

Every problem is an `EvidenceError` naming the relation and key: a GIVEN relation that is not a
variable relation, a key that names no variable, a value outside the domain, or one variable
given two different values in the same query. Call after the vid maps are synced.

>>> # resolve_evidence(con, variables, [GivenAtom('is_fan', ("'bart'",), 'TRUE')]).given
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import sqlglot
import sqlglot.expressions as exp

from pdbq.errors import EvidenceError, GroundingError, suggest
from pdbq.grounding.variables import domain_index, keys_to_vids, stored_evidence
from pdbq.language.nodes import CreateVariable, DomainKind, GivenAtom, GivenQuery

__all__ = ["EvidenceSet", "resolve_evidence", "python_literal", "value_label"]


@dataclass(frozen=True)
class EvidenceSet:
    """The evidence of one query as sorted global vids and their internal values.

    ``n_stored``: stored evidence rows; ``given``: vids fixed by GIVEN (sorted);
    ``overridden``: stored evidence vids whose value GIVEN replaced.
    """

    vids: np.ndarray  # int64, sorted
    values: np.ndarray  # int32
    n_stored: int
    given: np.ndarray  # int64, sorted
    overridden: int

    def as_tuple(self) -> tuple[np.ndarray, np.ndarray]:
        return self.vids, self.values


def python_literal(value: Any) -> str:
    """SQL literal text of a Python value (``True`` -> ``TRUE``, ``'a'`` -> ``'a'``)."""
    if isinstance(value, np.generic):
        value = value.item()
    return exp.convert(value).sql(dialect="duckdb")


def value_label(v: CreateVariable, index: int) -> str:
    """The domain value with internal index ``index`` as SQL text (TRUE, 'PER', 3)."""
    d = v.domain
    if d.kind is DomainKind.BOOLEAN:
        return "TRUE" if index else "FALSE"
    if d.kind is DomainKind.VALUES:
        raw = d.values[index]
        raw = raw[1:-1].replace("''", "'") if len(raw) >= 2 and raw[0] == raw[-1] == "'" else raw
        return python_literal(raw)
    return str(index)


def _key_text(relation: str, key: Sequence[Any]) -> str:
    return f"{relation}({', '.join(python_literal(k) for k in key)})"


def _variable(variables: Mapping[str, CreateVariable], relation: str) -> CreateVariable:
    v = variables.get(relation.lower())
    if v is None:
        known = ", ".join(sorted(variables)) or "none"
        raise EvidenceError(
            f"GIVEN {relation}: '{relation}' is not a variable relation.{suggest(relation, variables)} "
            f"Variable relations: {known}"
        )
    return v


def _domain_value(v: CreateVariable, literal: str, where: str) -> int:
    try:
        return domain_index(v.domain, literal, what=where)
    except GroundingError as e:
        raise EvidenceError(str(e)) from None


def _atom_rows(con: duckdb.DuckDBPyConnection, v: CreateVariable, atom: GivenAtom) -> tuple[list[tuple], list[str]]:
    n = len(v.columns)
    if len(atom.keys) != n:
        raise EvidenceError(
            f"GIVEN {atom.relation}({', '.join(atom.keys)}): {v.name} has {n} key column"
            f"{'s' if n != 1 else ''} ({', '.join(c.name for c in v.columns)}), got {len(atom.keys)}"
        )
    select = exp.select(*[sqlglot.parse_one(k, read="duckdb") for k in atom.keys])
    key = con.execute(select.sql(dialect="duckdb")).fetchall()[0]
    return [tuple(key)], [atom.value]


def _query_rows(con: duckdb.DuckDBPyConnection, v: CreateVariable, given: GivenQuery) -> tuple[list[tuple], list[str]]:
    try:
        rel = con.sql(given.query)
        rows = rel.fetchall()
    except duckdb.Error as exc:
        raise EvidenceError(f"GIVEN (...) AS {given.relation}: the query fails: "
                            f"{' '.join(str(exc).splitlines()[0].split())}") from None
    n = len(v.columns)
    if len(rel.columns) != n + 1:
        raise EvidenceError(
            f"GIVEN (...) AS {given.relation}: the query must return the {n} key column"
            f"{'s' if n != 1 else ''} of {v.name} ({', '.join(c.name for c in v.columns)}) and then the value; "
            f"it returns {len(rel.columns)} columns"
        )
    keys, values = [], []
    for row in rows:
        if row[-1] is None:
            raise EvidenceError(f"GIVEN (...) AS {given.relation}: NULL value for {_key_text(v.name, row[:-1])}")
        keys.append(tuple(row[:-1]))
        values.append(python_literal(row[-1]))
    return keys, values


# GIVEN atoms whose keys one SELECT evaluates (one column per key): a statement per atom cost
# about 3 ms each (a minute for 20,000 atoms)
_ATOM_BATCH = 512


def _atom_keys(con: duckdb.DuckDBPyConnection, variables: Mapping[str, CreateVariable], atoms: list[GivenAtom],
               check: Callable[[], None] | None) -> list[tuple]:
    """The key tuples of ``atoms`` (already checked against their relations' key columns), in
    order, evaluated `_ATOM_BATCH` atoms per statement; ``check()`` between statements."""
    out: list[tuple] = []
    for lo in range(0, len(atoms), _ATOM_BATCH):
        if check is not None:
            check()
        part = atoms[lo : lo + _ATOM_BATCH]
        # each key is one constant the parser accepted (or `python_literal` wrote): parenthesised,
        # the texts join into one select list without re-parsing each
        text = "SELECT " + ", ".join(f"({k})" for a in part for k in a.keys)
        try:
            # fetchall, not fetchone: the result is finished, so the next statement on this
            # connection (a GIVEN query) may run (DuckDB refuses one while a result is open)
            row = con.execute(text).fetchall()[0]
        except duckdb.Error:  # one of them is bad: find and name it
            for a in part:
                out.extend(_atom_rows(con, _variable(variables, a.relation), a)[0])
            continue
        at = 0
        for a in part:
            out.append(tuple(row[at : at + len(a.keys)]))
            at += len(a.keys)
    return out


def resolve_evidence(
    con: duckdb.DuckDBPyConnection,
    variables: Mapping[str, CreateVariable],
    given: Iterable[GivenAtom | GivenQuery],
    stored: tuple[np.ndarray, np.ndarray] | None = None,
    check: Callable[[], None] | None = None,
) -> EvidenceSet:
    """Stored evidence merged with ``given`` (GIVEN wins over stored values, never over itself).
    ``stored``: the store's evidence when the caller has it (`stored_evidence`). ``check()``: called
    between the statements that read the GIVEN keys (a cancelled statement raises from it). GIVEN
    atoms are read in batches, their vids looked up once per relation."""
    ev_v, ev_x = stored_evidence(con) if stored is None else stored
    items = list(given)
    atoms = [g for g in items if isinstance(g, GivenAtom)]
    for a in atoms:
        v = _variable(variables, a.relation)
        if len(a.keys) != len(v.columns):
            _atom_rows(con, v, a)  # raises the EvidenceError naming the atom
    atom_keys = iter(_atom_keys(con, variables, atoms, check))
    rows: list[tuple[CreateVariable, list[tuple], list[str]]] = []
    for item in items:
        v = _variable(variables, item.relation)
        if isinstance(item, GivenAtom):
            rows.append((v, [next(atom_keys)], [item.value]))
        else:
            if check is not None:
                check()
            rows.append((v, *_query_rows(con, v, item)))
    # one vid lookup per relation (in the order the rows came)
    per_rel: dict[str, list[tuple]] = {}
    for v, keys, _ in rows:
        per_rel.setdefault(v.name, []).extend(keys)
    found = {}
    for name, keys in per_rel.items():
        if check is not None:
            check()
        found[name] = iter(keys_to_vids(con, name, keys).tolist() if keys else [])
    chosen: dict[int, tuple[int, str, str]] = {}  # vid -> (value, value text, key text)
    for v, keys, literals in rows:
        for key, literal in zip(keys, literals):
            vid = next(found[v.name])
            where = f"GIVEN {_key_text(v.name, key)} = {literal}"
            if vid < 0:
                raise EvidenceError(f"{where}: no variable of {v.name} has the key {_key_text(v.name, key)[len(v.name):]}")
            value = _domain_value(v, literal, where)
            prev = chosen.get(vid)
            if prev is not None and prev[0] != value:
                raise EvidenceError(
                    f"conflicting evidence for {_key_text(v.name, key)}: GIVEN sets it to "
                    f"{value_label(v, prev[0])} and to {value_label(v, value)}"
                )
            chosen[vid] = (value, literal, _key_text(v.name, key))
    gv = np.fromiter(chosen.keys(), dtype=np.int64, count=len(chosen))
    gx = np.fromiter((c[0] for c in chosen.values()), dtype=np.int32, count=len(chosen))
    stored_v = np.asarray(ev_v, dtype=np.int64)
    keep = ~np.isin(stored_v, gv)
    vids = np.concatenate([stored_v[keep], gv])
    values = np.concatenate([np.asarray(ev_x, dtype=np.int32)[keep], gx])
    order = np.argsort(vids, kind="stable")
    return EvidenceSet(vids[order], values[order], int(stored_v.size), np.sort(gv), int((~keep).sum()))
