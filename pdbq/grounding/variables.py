"""Variable ids: one dense global integer id (vid) per key row of every variable relation.

Relations are laid out in name order: relation ``r`` owns vids ``base_r .. base_r + n_r - 1``, and
inside a relation vids follow the key order (``ORDER BY`` the key columns). The map table
``pdbq_fs_vars__<r>(vid, key columns..., [cardinality])`` holds the correspondence. Rows of the FROM
query with a NULL key are skipped and counted in a warning; duplicate keys give one variable.

>>> # relation_info(con)['is_popular'].base, keys_to_vids(con, 'is_popular', [('Up',)])
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pyarrow as pa
import sqlglot
import sqlglot.expressions as exp

from pdbq.errors import EvidenceError, GroundingError, suggest
from pdbq.grounding.fingerprint import definition_hash, fingerprint_query
from pdbq.grounding.limits import GroundingConfig
from pdbq.grounding.registry import REGISTRY_ITEMS, registry_rows
from pdbq.grounding.store import col, ensure_schema, ident, sql_text, table_ref, table_sql, var_table
from pdbq.language.nodes import CreateVariable, Domain, DomainKind

__all__ = [
    "RelationInfo",
    "VariableSync",
    "sync_variables",
    "relation_info",
    "keys_to_vids",
    "vids_to_keys",
    "stored_evidence",
    "domain_index",
    "cardinalities",
]


@dataclass(frozen=True)
class RelationInfo:
    relation: str
    base: int
    n: int
    cardinality: int
    per_row: bool
    map_version: int


@dataclass
class VariableSync:
    """What `sync_variables` did: relations whose vid map was rebuilt, relations whose vids moved by
    a constant (old base, new base), and warnings (NULL keys, unmatched evidence keys)."""

    rebuilt: set[str] = field(default_factory=set)
    shifted: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # rel -> (old_base, n, new_base)
    dropped: dict[str, tuple[int, int]] = field(default_factory=dict)  # rel -> (old_base, n)
    warnings: list[str] = field(default_factory=list)
    # every relation's vid range after the sync (what `relation_info` would read back)
    info: dict[str, RelationInfo] = field(default_factory=dict)
    previous: dict[str, tuple[int, int]] = field(default_factory=dict)  # rel -> (base, n) before the sync


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'")
    return text


def domain_index(domain: Domain, literal: str, *, what: str) -> int:
    """Internal value of a SQL literal (``"'PER'"``, ``"TRUE"``, ``"3"``) in a domain."""
    node = sqlglot.parse_one(literal, read="duckdb")
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        raw = "-" + node.this.this
    elif isinstance(node, exp.Boolean):
        raw = "true" if node.this else "false"
    elif isinstance(node, exp.Literal):
        raw = node.this
    else:
        raw = _unquote(literal)
    if domain.kind is DomainKind.BOOLEAN:
        low = raw.lower()
        if low in ("true", "1", "t"):
            return 1
        if low in ("false", "0", "f"):
            return 0
    elif domain.kind is DomainKind.VALUES:
        values = [_unquote(v) for v in domain.values]
        if raw in values:
            return values.index(raw)
        raise GroundingError(f"{what}: value {literal} is not in the domain {tuple(values)}.{suggest(raw, values)}")
    else:
        try:
            k = int(raw)
        except ValueError:
            k = -1
        if 0 <= k < domain.size:
            return k
    raise GroundingError(f"{what}: value {literal} is outside the domain {domain.kind.value} (size {domain.size})")


def _key_names(v: CreateVariable) -> list[str]:
    return [c.name for c in v.columns]


def _source_select(v: CreateVariable) -> exp.Select:
    """SELECT CAST(k AS type)..., [cardinality] FROM (<FROM query>) AS s(k..., [cardinality])."""
    names = _key_names(v) + (["cardinality"] if v.per_row_cardinality else [])
    src = sqlglot.parse_one(v.source, read="duckdb")
    alias = exp.TableAlias(this=ident("s"), columns=[ident(n) for n in names])
    sub = exp.Subquery(this=src, alias=alias)
    cols = [exp.Cast(this=col(c.name, "s"), to=exp.DataType.build(c.type, dialect="duckdb")).as_(ident(c.name)) for c in v.columns]
    if v.per_row_cardinality:
        cols.append(exp.Cast(this=col("cardinality", "s"), to=exp.DataType.build("INTEGER")).as_(ident("cardinality")))
    return exp.select(*cols).from_(sub)


def _build_map(con: duckdb.DuckDBPyConnection, v: CreateVariable) -> tuple[int, int, int]:
    """(Re)build the relation's map table with vids 0 .. n-1; returns (n, null_keys, cardinality)."""
    keys = _key_names(v)
    src = _source_select(v)
    not_null = exp.and_(*[exp.Not(this=exp.Is(this=col(k), expression=exp.Null())) for k in keys])
    staged = exp.select("*").from_(exp.Subquery(this=src, alias=exp.TableAlias(this=ident("src")))).where(not_null)
    total = con.execute(sql_text(exp.select(exp.Count(this=exp.Star())).from_(exp.Subquery(this=src, alias=exp.TableAlias(this=ident("src")))))).fetchall()[0][0]
    order = [exp.Ordered(this=col(k)) for k in keys]
    rownum = exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=order))
    vid = exp.Cast(this=exp.Sub(this=rownum, expression=exp.Literal.number(1)), to=exp.DataType.build("INTEGER")).as_(ident("vid"))
    if v.per_row_cardinality:
        dedup = (
            exp.select(*[col(k) for k in keys], exp.Max(this=col("cardinality")).as_(ident("cardinality")),
                       exp.Min(this=col("cardinality")).as_(ident("card_min")))
            .from_(exp.Subquery(this=staged, alias=exp.TableAlias(this=ident("nn"))))
            .group_by(*[col(k) for k in keys])
        )
        body = exp.select(vid, *[col(k) for k in keys], col("cardinality"), col("card_min")).from_(
            exp.Subquery(this=dedup, alias=exp.TableAlias(this=ident("d")))
        )
    else:
        dedup = exp.select(*[col(k) for k in keys]).distinct().from_(exp.Subquery(this=staged, alias=exp.TableAlias(this=ident("nn"))))
        body = exp.select(vid, *[col(k) for k in keys]).from_(exp.Subquery(this=dedup, alias=exp.TableAlias(this=ident("d"))))
    create = exp.Create(this=table_ref(var_table(v.name)), kind="TABLE", expression=body, replace=True)
    con.execute(sql_text(create))
    t = sql_text(table_ref(var_table(v.name)))
    n = con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0]
    with_null = con.execute(sql_text(exp.select(exp.Count(this=exp.Star())).from_(exp.Subquery(this=staged, alias=exp.TableAlias(this=ident("x")))))).fetchall()[0][0]
    null_keys = int(total - with_null)
    card = v.domain.size if v.domain.kind is not DomainKind.BOOLEAN else 2
    if v.per_row_cardinality:
        bad = con.execute(f"SELECT count(*) FROM {t} WHERE cardinality IS NULL OR cardinality < 2 OR cardinality <> card_min").fetchall()[0][0]
        if bad:
            raise GroundingError(
                f"variable relation '{v.name}': {bad} variables have a NULL, < 2 or conflicting per-row cardinality"
            )
        con.execute(f"ALTER TABLE {t} DROP COLUMN card_min")
        card = int(con.execute(f"SELECT coalesce(max(cardinality), 2) FROM {t}").fetchall()[0][0])
    if card < 2:
        raise GroundingError(f"variable relation '{v.name}': domain size {card} < 2")
    return int(n), null_keys, card


def _evidence_rows(con: duckdb.DuckDBPyConnection, v: CreateVariable, warnings: list[str]) -> None:
    """Replace the relation's stored evidence from its EVIDENCE query (vids already final)."""
    con.execute("DELETE FROM pdbq_fs_evidence WHERE relation = ?", [v.name])
    if not v.evidence:
        return
    keys = _key_names(v)
    names = keys + ["pdbq_value"]
    ev = sqlglot.parse_one(v.evidence, read="duckdb")
    sub = exp.Subquery(this=ev, alias=exp.TableAlias(this=ident("e"), columns=[ident(n) for n in names]))
    on = exp.and_(*[
        exp.EQ(this=col(c.name, "m"), expression=exp.Cast(this=col(c.name, "e"), to=exp.DataType.build(c.type, dialect="duckdb")))
        for c in v.columns
    ])
    val = col("pdbq_value", "e")
    d = v.domain
    if d.kind is DomainKind.BOOLEAN:
        value = exp.Cast(this=exp.Cast(this=val, to=exp.DataType.build("BOOLEAN")), to=exp.DataType.build("INTEGER"))
    elif d.kind is DomainKind.VALUES:
        arr = exp.Array(expressions=[exp.Literal.string(_unquote(x)) for x in d.values])
        pos = exp.func("list_position", arr, exp.Cast(this=val, to=exp.DataType.build("VARCHAR")))
        value = exp.Sub(this=exp.func("coalesce", pos, exp.Literal.number(0)), expression=exp.Literal.number(1))
    else:
        value = exp.Cast(this=val, to=exp.DataType.build("INTEGER"))
    card = col("cardinality", "m") if v.per_row_cardinality else exp.Literal.number(d.size if d.kind is not DomainKind.BOOLEAN else 2)
    q = (
        exp.select(
            col("vid", "m").as_(ident("vid")),
            value.as_(ident("value")),
            card.as_(ident("card")),
            exp.Cast(this=val, to=exp.DataType.build("VARCHAR")).as_(ident("raw")),
            *[exp.Cast(this=col(k, "e"), to=exp.DataType.build("VARCHAR")).as_(ident("k_" + k)) for k in keys],
        )
        .from_(sub)
        .join(table_ref(var_table(v.name), "m"), on=on, join_type="LEFT")
    )
    con.execute("CREATE OR REPLACE TEMP TABLE pdbq_fs_ev_stage AS " + sql_text(q))
    try:
        unmatched, null_vals = con.execute(
            "SELECT count(*) FILTER (WHERE vid IS NULL), count(*) FILTER (WHERE vid IS NOT NULL AND raw IS NULL) FROM pdbq_fs_ev_stage"
        ).fetchall()[0]
        if unmatched:
            warnings.append(
                f"variable relation '{v.name}': {unmatched} EVIDENCE rows name no variable (NULL or unknown keys) and were skipped"
            )
        if null_vals:
            warnings.append(f"variable relation '{v.name}': {null_vals} EVIDENCE rows with a NULL value were skipped")
        kcols = ", ".join(sql_text(ident(f"k_{k}")) for k in keys)
        bad = con.execute(
            f"SELECT raw, {kcols} FROM pdbq_fs_ev_stage WHERE vid IS NOT NULL AND raw IS NOT NULL "
            "AND (value IS NULL OR value < 0 OR value >= card) LIMIT 1"
        ).fetchall()
        bad = bad[0] if bad else None  # fetchall: no result left open (DuckDB 2)
        if bad:
            raise EvidenceError(
                f"variable relation '{v.name}': EVIDENCE value {bad[0]!r} for key {tuple(bad[1:])} is outside the domain"
            )
        clash = con.execute(
            f"SELECT {kcols}, list(DISTINCT raw ORDER BY raw) FROM pdbq_fs_ev_stage WHERE vid IS NOT NULL AND raw IS NOT NULL "
            f"GROUP BY vid, {kcols} HAVING count(DISTINCT value) > 1 LIMIT 1"
        ).fetchall()
        clash = clash[0] if clash else None  # fetchall: no result left open (DuckDB 2)
        if clash:
            raise EvidenceError(
                f"variable relation '{v.name}': EVIDENCE gives key {tuple(clash[:-1])} two values {clash[-1]}"
            )
        con.execute(
            "INSERT INTO pdbq_fs_evidence SELECT DISTINCT ?, vid, value FROM pdbq_fs_ev_stage WHERE vid IS NOT NULL AND raw IS NOT NULL",
            [v.name],
        )
    finally:
        con.execute("DROP TABLE IF EXISTS pdbq_fs_ev_stage")


def sync_variables(
    con: duckdb.DuckDBPyConnection,
    variables: Mapping[str, CreateVariable],
    config: GroundingConfig = GroundingConfig(),
    fingerprints: Mapping[tuple[str, str], str] | None = None,
) -> VariableSync:
    """Bring every vid map and the stored evidence up to date with the definitions and data.

    A map is rebuilt when its definition or the FROM query's fingerprint changed; maps of other
    relations whose base moved are shifted in place. Call inside the caller's transaction.
    ``fingerprints``: FROM/EVIDENCE fingerprints (``("query", text)`` -> fingerprint, mode
    ``config.fingerprint``) the caller took in this transaction (`fingerprint_many`); the
    others are taken here. With the registry's own (``REGISTRY_ITEMS["relations"]``, mode
    "hash"), its rows may come from `registry_rows`' cache.
    """
    known = fingerprints or {}
    ensure_schema(con)
    # cluster relations are resolved by pdbq.coref, never stored as categorical variables
    variables = {k: v for k, v in variables.items() if v.domain.kind is not DomainKind.CLUSTER}
    out = VariableSync()
    old = {r[0]: r for r in registry_rows(con, "relations", known.get(REGISTRY_ITEMS["relations"]))}
    out.previous = {name: (int(r[1]), int(r[2])) for name, r in old.items()}
    for name in sorted(set(old) - set(variables)):
        out.dropped[name] = (int(old[name][1]), int(old[name][2]))
        con.execute(f"DROP TABLE IF EXISTS {sql_text(table_ref(var_table(name)))}")
        con.execute("DELETE FROM pdbq_fs_relations WHERE relation = ?", [name])
        con.execute("DELETE FROM pdbq_fs_evidence WHERE relation = ?", [name])
    state: dict[str, list] = {}
    for name in sorted(variables):
        v = variables[name]
        dh = definition_hash(v)
        sfp = known.get(("query", v.source)) or fingerprint_query(con, v.source, config.fingerprint)
        efp = (known.get(("query", v.evidence)) or fingerprint_query(con, v.evidence, config.fingerprint)) if v.evidence else ""
        prev = old.get(name)
        if prev is None or prev[5] != dh or prev[6] != sfp:
            n, nulls, card = _build_map(con, v)
            out.rebuilt.add(name)
            version = (prev[8] + 1) if prev else 1
            state[name] = [None, n, card, v.per_row_cardinality, dh, sfp, efp, version, nulls, prev]
        else:
            state[name] = [int(prev[1]), int(prev[2]), int(prev[3]), bool(prev[4]), dh, sfp, efp, int(prev[8]), int(prev[9]), prev]
    base = 0
    for name in sorted(variables):
        s = state[name]
        t = table_sql(var_table(name))
        if s[0] is None:  # fresh map: vids 0 .. n-1
            if base:
                con.execute(f"UPDATE {t} SET vid = vid + {base}")
        elif s[0] != base:
            con.execute(f"UPDATE {t} SET vid = vid + ({base - s[0]})")
            out.shifted[name] = (s[0], s[1], base)
        old_base = s[0]
        s[0] = base
        base += s[1]
        if s[8]:
            out.warnings.append(f"variable relation '{name}': {s[8]} FROM rows with a NULL key were skipped")
        prev = s[9]
        if name in out.rebuilt or name in out.shifted or prev is None or prev[7] != s[6] or old_base is None:
            ev_warn: list[str] = []
            _evidence_rows(con, variables[name], ev_warn)
        else:  # unchanged evidence: rows kept, its warnings repeated (never silent)
            ev_warn = list(prev[10])
        out.warnings += ev_warn
        row = [name, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], ev_warn]
        out.info[name] = RelationInfo(name, int(s[0]), int(s[1]), int(s[2]), bool(s[3]), int(s[7]))
        if prev is not None and list(prev) == row:
            continue  # nothing changed: no write (every query syncs; writes cost more than reads)
        con.execute("DELETE FROM pdbq_fs_relations WHERE relation = ?", [name])
        con.execute("INSERT INTO pdbq_fs_relations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
    if base >= 2**31 - 1:
        raise GroundingError(f"{base:,} variables: more than the 2^31 - 1 that int32 vids allow")
    return out


def relation_info(con: duckdb.DuckDBPyConnection) -> dict[str, RelationInfo]:
    """Registry of built vid maps: name -> RelationInfo (base, n, cardinality, ...)."""
    ensure_schema(con)
    return {
        r[0]: RelationInfo(r[0], int(r[1]), int(r[2]), int(r[3]), bool(r[4]), int(r[5]))
        for r in con.execute("SELECT relation, base, n, cardinality, per_row, map_version FROM pdbq_fs_relations").fetchall()
    }


def _check_relation(con: duckdb.DuckDBPyConnection, relation: str) -> RelationInfo:
    info = relation_info(con)
    if relation not in info:
        raise GroundingError(f"variable relation '{relation}' has no vid map (not synced or unknown).{suggest(relation, info)}")
    return info[relation]


def keys_to_vids(con: duckdb.DuckDBPyConnection, relation: str, keys: Sequence[Sequence[object]] | str) -> np.ndarray:
    """Global vids of key tuples, in the given order; -1 where a key names no variable.

    ``keys`` is a list of key tuples or the text of a SELECT returning the key columns in order.
    """
    _check_relation(con, relation)
    kcols = [r[0] for r in con.execute(f"SELECT * FROM {sql_text(table_ref(var_table(relation)))} LIMIT 0").description][1:]
    kcols = [k for k in kcols if k != "cardinality"]
    names = [f"q{i}" for i in range(len(kcols))]
    registered = None
    if isinstance(keys, str):
        src = sqlglot.parse_one(keys, read="duckdb")
        sub = exp.Subquery(this=src, alias=exp.TableAlias(this=ident("q"), columns=[ident(n) for n in names]))
        numbered = exp.Subquery(
            this=exp.select("*", exp.Window(this=exp.RowNumber()).as_("pdbq_ord")).from_(sub),
            alias=exp.TableAlias(this=ident("q")),
        )
    else:
        rows = [tuple(k) if isinstance(k, (tuple, list)) else (k,) for k in keys]
        if not rows:
            return np.zeros(0, dtype=np.int32)
        if any(len(r) != len(names) for r in rows):
            raise GroundingError(f"variable relation '{relation}' has {len(names)} key column(s); a key tuple has another length")
        # Keys travel as a registered Arrow table: a VALUES literal with one tuple per key costs
        # about 0.4 ms per key to build and parse, this costs microseconds.
        try:
            columns = {n: pa.array([r[i] for r in rows]) for i, n in enumerate(names)}
        except (OverflowError, pa.ArrowException) as exc:  # a key beyond 64 bits, or of mixed types
            raise EvidenceError(f"variable relation '{relation}': a key cannot be looked up ({exc})") from None
        columns["pdbq_ord"] = pa.array(np.arange(len(rows), dtype=np.int64))
        registered = f"pdbq_keys_{uuid.uuid4().hex}"
        con.register(registered, pa.table(columns))
        numbered = table_ref(registered, "q")
    on = exp.and_(*[exp.EQ(this=col(k, "m"), expression=col(n, "q")) for k, n in zip(kcols, names)])
    q = (
        exp.select(exp.func("coalesce", col("vid", "m"), exp.Literal.number(-1)).as_("vid"))
        .from_(numbered)
        .join(table_ref(var_table(relation), "m"), on=on, join_type="LEFT")
        .order_by(col("pdbq_ord", "q"))
    )
    try:
        return np.asarray(con.execute(sql_text(q)).fetchnumpy()["vid"], dtype=np.int32)
    except duckdb.ConversionException as exc:
        # a key of another type that DuckDB cannot cast to the key column (text for a BIGINT)
        types = con.execute(f"SELECT * FROM {sql_text(table_ref(var_table(relation)))} LIMIT 0").description[1:]
        shown = ", ".join(f"{d[0]} {d[1]}" for d in types if d[0] != "cardinality")
        raise EvidenceError(f"variable relation '{relation}': a key does not convert to its key columns ({shown}): "
                            f"{str(exc).splitlines()[0]}") from None
    finally:
        if registered is not None:
            con.unregister(registered)


def vids_to_keys(con: duckdb.DuckDBPyConnection, vids: np.ndarray | Sequence[int]) -> dict[str, "duckdb.DuckDBPyRelation"]:
    """Per relation, a DuckDB relation (pos, vid, key columns...) for the given global vids; ``pos``
    is the index in ``vids`` (so ``ORDER BY pos`` restores the input order)."""
    vids = np.asarray(vids, dtype=np.int64)
    out = {}
    for name, info in sorted(relation_info(con).items(), key=lambda kv: kv[1].base):
        mask = (vids >= info.base) & (vids < info.base + info.n)
        if not mask.any():
            continue
        pos = np.flatnonzero(mask)
        tbl = {"pos": pos, "vid": vids[mask]}
        arrow = pa.table(tbl)
        rel = con.from_arrow(arrow)
        # a quoted identifier: con.table() parses its argument, and a relation named '""' loses its quotes
        m = con.sql(f"SELECT * FROM {table_sql(var_table(name))}")
        out[name] = rel.join(m.set_alias("m"), "vid").order("pos")
    return out


def stored_evidence(con: duckdb.DuckDBPyConnection) -> tuple[np.ndarray, np.ndarray]:
    """Stored evidence as (vids int32, values int32), sorted by vid."""
    ensure_schema(con)
    d = con.execute("SELECT vid, value FROM pdbq_fs_evidence ORDER BY vid").fetchnumpy()
    return np.asarray(d["vid"], dtype=np.int32), np.asarray(d["value"], dtype=np.int32)


def cardinalities(con: duckdb.DuckDBPyConnection) -> np.ndarray:
    """int32[n_vars]: every variable's cardinality, indexed by global vid."""
    info = relation_info(con)
    n = sum(i.n for i in info.values())
    card = np.empty(n, dtype=np.int32)
    for name, i in info.items():
        if i.per_row:
            d = con.execute(f"SELECT vid, cardinality FROM {sql_text(table_ref(var_table(name)))}").fetchnumpy()
            card[np.asarray(d["vid"], dtype=np.int64)] = np.asarray(d["cardinality"], dtype=np.int32)
        else:
            card[i.base : i.base + i.n] = i.cardinality
    return card
