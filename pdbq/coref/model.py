"""A coreference model over a DuckDB table of records: blocking, comparisons, pair scores.

    score(a, b) = Σ_k weight_k · (sim_k(a, b) − center_k) − bias

over the candidate pairs that blocking yields (never all pairs). `sim_k` ∈ [0, 1] is computed
once, in DuckDB, per candidate pair and comparison (a NULL on either side contributes 0), and
kept as a feature matrix, so re-weighting (hand or learned) is a matrix product, not a query.

Blocking: each `Blocking.key` is a DuckDB expression over one record's columns; two records
are a candidate pair when some key gives them an equal non-NULL value. A LIST-valued key (e.g.
`string_split(lower(title), ' ')`) blocks on any shared element; values shared by more than
`max_key_size` records (stop words) are skipped. The number of pairs is counted before any is
built and refused above `max_pairs`.

All SQL is built as sqlglot trees; names are quoted identifiers, never pasted text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import sqlglot
from numba import njit
from sqlglot import exp

from pdbq.coref.layout import CorefInputError, PairGraph, pair_graph

__all__ = [
    "Comparison",
    "Blocking",
    "CorefModel",
    "Records",
    "PairFeatures",
    "METHODS",
    "load_records",
    "candidate_pairs",
    "pair_features",
    "default_comparisons",
]

METHODS = ("jaro_winkler", "levenshtein", "jaccard", "token_jaccard", "token_cosine", "exact", "numeric")
# similarity at which a comparison is neutral, by method (above: evidence for a match)
_CENTERS = {
    "jaro_winkler": 0.85,
    "levenshtein": 0.7,
    "jaccard": 0.7,
    "token_jaccard": 0.5,
    "token_cosine": 0.6,
    "exact": 0.5,
    "numeric": 0.5,
}
RECORDS = "pdbq_coref_records"
PAIRS = "pdbq_coref_pairs"
MENTION = "__pdbq_m"


@dataclass(frozen=True)
class Comparison:
    """One field comparison. method: one of `METHODS` or "auto" (by column type and length);
    weight: score per unit of similarity; center: the neutral similarity (default per method)."""

    field: str
    method: str = "auto"
    weight: float = 1.0
    center: float | None = None


@dataclass(frozen=True)
class Blocking:
    """A blocking key: a DuckDB expression over a record's columns (module docstring).
    min_shared: for a LIST-valued key, a pair must share at least this many values."""

    key: str
    max_key_size: int = 200
    min_shared: int = 1


@dataclass(frozen=True)
class CorefModel:
    """Comparisons and bias: score = Σ weight·(sim − center) − bias (module docstring)."""

    comparisons: tuple[Comparison, ...]
    blocking: tuple[Blocking, ...]
    bias: float = 0.0
    max_pairs: int = 20_000_000

    def centers(self) -> np.ndarray:
        return np.array([c.center if c.center is not None else _CENTERS[c.method] for c in self.comparisons])

    def weights(self) -> np.ndarray:
        return np.array([c.weight for c in self.comparisons], dtype=np.float64)

    def scores(self, features: np.ndarray) -> np.ndarray:
        """Pair scores from a (pairs × comparisons) similarity matrix (NaN = NULL = 0)."""
        x = np.nan_to_num(features - self.centers(), nan=0.0)
        return x @ self.weights() - self.bias


@dataclass(frozen=True, eq=False)
class Records:
    """Records loaded into DuckDB table `pdbq_coref_records` with a dense mention index."""

    ids: np.ndarray
    id_column: str
    columns: dict[str, str]
    null_counts: dict[str, int] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.ids.size)


@dataclass(frozen=True, eq=False)
class PairFeatures:
    """Candidate pairs (dense mention indices a < b) and their similarities per comparison."""

    a: np.ndarray
    b: np.ndarray
    x: np.ndarray
    names: tuple[str, ...]

    def graph(self, n: int, scores: np.ndarray) -> PairGraph:
        return pair_graph(n, self.a, self.b, scores)


def _ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def _col(name: str, table: str | None = None) -> exp.Column:
    return exp.Column(this=_ident(name), table=_ident(table) if table else None)


def _sql(tree: exp.Expression) -> str:
    return tree.sql(dialect="duckdb")


def source_relation(con, source, *, file_noun: str = "file", name_noun: str = "table or view", suffix: str = ""):
    """A DuckDB relation for `source`: a .csv/.tsv/.parquet path, a table or view name, or a
    relation (returned as it is). A missing file or name is a `CorefInputError` ("no such
    {file_noun}: path{suffix}" / "no {name_noun} named 'x'{suffix}")."""
    if isinstance(source, (str, Path)) and Path(str(source)).suffix.lower() in (".csv", ".tsv", ".parquet", ".pq"):
        path = Path(str(source))
        if not path.exists():
            raise CorefInputError(f"no such {file_noun}: {path}{suffix}")
        return con.read_parquet(str(path)) if path.suffix.lower() in (".parquet", ".pq") else con.read_csv(str(path))
    if isinstance(source, str):
        try:
            return con.table(source)
        except Exception as exc:  # duckdb raises CatalogException
            raise CorefInputError(f"no {name_noun} named {source!r}{suffix}") from exc
    return source


def load_records(con, source, id: str, fields: list[str] | None = None) -> Records:
    """Load `source` (a .csv/.parquet path, a DuckDB table or view name, or a DuckDB relation)
    into `pdbq_coref_records` with a dense index ordered by id. Errors: unknown id or field
    column, NULL or duplicate ids."""
    rel = source_relation(con, source)
    cols = dict(zip(rel.columns, [str(t) for t in rel.types]))
    for name in [id, *(fields or [])]:
        if name not in cols:
            from pdbq.errors import suggest

            what = "id column" if name == id else "field"
            raise CorefInputError(f"{what} {name!r} is not a column of the records.{suggest(name, cols)}")
    con.register("__pdbq_coref_src", rel)
    try:
        src = exp.to_table("__pdbq_coref_src")
        idc = _col(id)
        n_null = con.execute(_sql(exp.select(exp.func("count", exp.Star())).from_(src).where(idc.is_(exp.null())))).fetchall()[0][0]
        if n_null:
            raise CorefInputError(f"id column {id!r} has {n_null} NULL value(s); every record needs an id")
        dup = con.execute(
            _sql(exp.select(idc, exp.func("count", exp.Star())).from_(src).group_by(idc).having("count(*) > 1").limit(1))
        ).fetchall()
        dup = dup[0] if dup else None
        if dup is not None:
            raise CorefInputError(f"id column {id!r} is not unique: {dup[0]!r} appears {dup[1]} times")
        m = exp.alias_(
            exp.Sub(this=exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=[exp.Ordered(this=idc)])),
                    expression=exp.Literal.number(1)),
            MENTION,
        )
        create = exp.Create(
            this=exp.to_table(RECORDS), kind="TABLE", replace=True,
            properties=exp.Properties(expressions=[exp.TemporaryProperty()]),
            expression=exp.select(exp.Star(), m).from_(src),
        )
        con.execute(_sql(create))
    finally:
        con.unregister("__pdbq_coref_src")
    ids = con.execute(_sql(exp.select(idc).from_(RECORDS).order_by(_col(MENTION)))).fetchnumpy()[id]
    nulls = {}
    for f in fields or []:
        nulls[f] = con.execute(
            _sql(exp.select(exp.func("count", exp.Star())).from_(RECORDS).where(_col(f).is_(exp.null())))
        ).fetchall()[0][0]
    return Records(np.asarray(ids), id, cols, nulls)


def default_comparisons(con, records: Records, fields: list[str]) -> tuple[Comparison, ...]:
    """One comparison per field: numbers, dates and booleans by equality; strings averaging
    more than 30 characters (titles, citations) by token cosine, shorter ones (names, phones,
    cities) by Jaro–Winkler."""
    out = []
    for f in fields:
        t = records.columns[f].upper()
        if t.startswith("VARCHAR") or t in ("TEXT", "STRING"):
            avg = con.execute(_sql(exp.select(exp.func("avg", exp.func("length", _col(f)))).from_(RECORDS))).fetchall()[0][0]
            out.append(Comparison(f, "token_cosine" if (avg or 0) > 30 else "jaro_winkler"))
        else:
            out.append(Comparison(f, "exact"))
    return tuple(out)


def _key_expr(key: str, table: str | None = None) -> exp.Expression:
    try:
        tree = sqlglot.parse_one(key, read="duckdb")
    except sqlglot.errors.ParseError as exc:
        raise CorefInputError(f"blocking key {key!r} does not parse: {exc}") from exc
    if table is not None:
        tree = tree.transform(lambda n: _col(n.name, table) if isinstance(n, exp.Column) else n)
    return tree


def candidate_pairs(con, records: Records, model: CorefModel) -> int:
    """Build `pdbq_coref_pairs(a, b)` (a < b dense indices) as the union over blocking keys.
    Refuses (CorefInputError) when the keys would yield more than `model.max_pairs` pairs."""
    if not model.blocking:
        raise CorefInputError("a coreference model needs at least one blocking key (all pairs is O(n²))")
    parts = []
    total = 0
    for k, blk in enumerate(model.blocking):
        key = _key_expr(blk.key)
        cols = {c.name for c in key.find_all(exp.Column)}
        unknown = sorted(cols - set(records.columns))
        if unknown:
            from pdbq.errors import suggest

            raise CorefInputError(f"blocking key {blk.key!r} names unknown column {unknown[0]!r}.{suggest(unknown[0], records.columns)}")
        kind = con.execute(_sql(exp.select(exp.func("typeof", key)).from_(RECORDS).limit(1))).fetchall()
        kind = kind[0] if kind else None
        is_list = kind is not None and str(kind[0]).endswith("[]")
        value = exp.Unnest(expressions=[key]) if is_list else key
        keyed = exp.select(exp.alias_(value, "k"), exp.alias_(_col(MENTION), "m")).from_(RECORDS)
        keyed = exp.select("k", "m").from_(keyed.subquery("s")).where(exp.column("k").is_(exp.null()).not_()).distinct()
        sizes = exp.select("k", exp.alias_(exp.func("count", exp.Star()), "c")).from_(keyed.subquery("t")).group_by("k")
        count_q = exp.select(exp.func("coalesce", exp.func("sum", exp.column("c") * (exp.column("c") - 1) / 2), 0)).from_(
            sizes.subquery("z")).where(exp.column("c") <= blk.max_key_size)
        n_pairs = int(con.execute(_sql(count_q)).fetchall()[0][0])
        total += n_pairs
        if total > model.max_pairs:
            raise CorefInputError(
                f"blocking key {blk.key!r} yields {n_pairs:,} candidate pairs (all keys so far {total:,}), above "
                f"max_pairs = {model.max_pairs:,}; use a more selective key or a smaller max_key_size"
            )
        name = f"__pdbq_blk{k}"
        kt = exp.Create(this=exp.to_table(name), kind="TABLE", replace=True,
                        properties=exp.Properties(expressions=[exp.TemporaryProperty()]),
                        expression=exp.select("t.k", "t.m").from_(keyed.subquery("t")).join(
                            sizes.subquery("z"), on="t.k = z.k").where(exp.column("c", "z") <= blk.max_key_size))
        con.execute(_sql(kt))
        joined = (
            exp.select(exp.alias_(exp.column("m", "l"), "a"), exp.alias_(exp.column("m", "r"), "b"))
            .from_(exp.alias_(exp.to_table(name), "l"))
            .join(exp.alias_(exp.to_table(name), "r"), on="l.k = r.k AND l.m < r.m")
        )
        if blk.min_shared > 1:
            joined = joined.group_by("l.m", "r.m").having(
                exp.GTE(this=exp.func("count", exp.Star()), expression=exp.Literal.number(blk.min_shared)))
        parts.append(joined)
    union = parts[0]
    for p in parts[1:]:
        union = exp.union(union, p, distinct=False)
    create = exp.Create(
        this=exp.to_table(PAIRS), kind="TABLE", replace=True,
        properties=exp.Properties(expressions=[exp.TemporaryProperty()]),
        expression=exp.select("a", "b").from_(union.subquery("u")).distinct(),
    )
    con.execute(_sql(create))
    for k in range(len(model.blocking)):
        con.execute(_sql(exp.Drop(tables=[exp.to_table(f"__pdbq_blk{k}")], kind="TABLE", exists=True)))
    return int(con.execute(f"SELECT count(*) FROM {PAIRS}").fetchall()[0][0])


def _fn(name: str, *args: exp.Expression) -> exp.Expression:
    # an opaque DuckDB call: sqlglot must not reinterpret its arguments (regexp flags, lambdas)
    return exp.Anonymous(this=name, expressions=list(args))


def _tokens(e: exp.Expression) -> exp.Expression:
    # lower-cased word tokens without punctuation, as a distinct list
    s = exp.Literal.string
    cleaned = _fn("regexp_replace", _fn("lower", e), s("[^a-z0-9 ]"), s(" "), s("g"))
    split = _fn("string_split_regex", _fn("trim", cleaned), s(" +"))
    x = exp.to_identifier("x")
    nonempty = exp.Lambda(this=exp.NEQ(this=exp.Column(this=x.copy()), expression=s("")), expressions=[x])
    return _fn("list_distinct", _fn("list_filter", split, nonempty))


def _similarity(method: str, l: exp.Expression, r: exp.Expression) -> exp.Expression:
    """sim ∈ [0, 1] of two values; token methods take the token lists (`_tokens`) of each side."""
    if method == "jaro_winkler":
        return exp.func("jaro_winkler_similarity", exp.func("lower", l), exp.func("lower", r))
    if method == "jaccard":
        return exp.func("jaccard", exp.func("lower", l), exp.func("lower", r))
    if method == "levenshtein":
        lev = exp.func("levenshtein", exp.func("lower", l), exp.func("lower", r))
        longest = exp.func("greatest", exp.func("length", l), exp.func("length", r), exp.Literal.number(1))
        return exp.Literal.number(1) - exp.Cast(this=lev, to=exp.DataType.build("DOUBLE")) / longest
    if method in ("token_jaccard", "token_cosine"):
        inter = _fn("len", _fn("list_intersect", l, r))
        if method == "token_jaccard":
            union = _fn("len", _fn("list_distinct", _fn("list_concat", l, r)))
            return exp.Cast(this=inter, to=exp.DataType.build("DOUBLE")) / _fn("greatest", union, exp.Literal.number(1))
        denom = _fn("sqrt", _fn("greatest", exp.Mul(this=_fn("len", l), expression=_fn("len", r)), exp.Literal.number(1)))
        return exp.Cast(this=inter, to=exp.DataType.build("DOUBLE")) / denom
    if method == "exact":
        return exp.Cast(this=exp.EQ(this=l, expression=r), to=exp.DataType.build("DOUBLE"))
    if method == "numeric":
        diff = exp.func("abs", exp.Cast(this=l, to=exp.DataType.build("DOUBLE")) - exp.Cast(this=r, to=exp.DataType.build("DOUBLE")))
        return exp.Literal.number(1) / (exp.Literal.number(1) + diff)
    raise CorefInputError(f"unknown comparison method {method!r}; expected one of {', '.join(METHODS)}")


@njit(cache=True)
def sorted_overlap(tok, x, xe, y, ye):
    """How many ids the sorted, distinct runs ``tok[x:xe]`` and ``tok[y:ye]`` share (one merge pass)."""
    inter = 0
    while x < xe and y < ye:
        if tok[x] == tok[y]:
            inter += 1
            x += 1
            y += 1
        elif tok[x] < tok[y]:
            x += 1
        else:
            y += 1
    return inter


@njit(cache=True)
def _set_similarity(indptr, tok, null, a, b, cosine, out):
    """|A ∩ B| / sqrt(|A||B|) (cosine) or / |A ∪ B| (Jaccard) of sorted distinct token ids per
    record (CSR indptr/tok); NaN where either record's field is NULL."""
    for p in range(a.shape[0]):
        i = a[p]
        j = b[p]
        if null[i] or null[j]:
            out[p] = np.nan
            continue
        x, xe = indptr[i], indptr[i + 1]
        y, ye = indptr[j], indptr[j + 1]
        na = xe - x
        nb = ye - y
        inter = sorted_overlap(tok, x, xe, y, ye)
        if cosine:
            out[p] = inter / np.sqrt(max(na * nb, 1))
        else:
            out[p] = inter / max(na + nb - inter, 1)


def _token_csr(con, field_name: str, n: int):
    """Each record's distinct tokens of a field as sorted integer ids (tokenised by DuckDB)."""
    toks = _tokens(_col(field_name))
    exploded = exp.select(exp.alias_(_col(MENTION), "m"), exp.alias_(exp.Unnest(expressions=[toks]), "tok")).from_(RECORDS)
    ranked = exp.select(
        "m", exp.alias_(exp.Window(this=exp.func("dense_rank"), order=exp.Order(expressions=[exp.Ordered(this=exp.column("tok"))])), "t")
    ).from_(exploded.subquery("e")).order_by("m", "t")
    res = con.execute(_sql(ranked)).fetchnumpy()
    m = np.asarray(res["m"], dtype=np.int64)
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(m, minlength=n), out=indptr[1:])
    nulls = con.execute(_sql(exp.select(_col(field_name).is_(exp.null())).from_(RECORDS).order_by(_col(MENTION)))).fetchnumpy()
    null = np.asarray(next(iter(nulls.values())), dtype=np.bool_)
    return indptr, np.asarray(res["t"], dtype=np.int64), null


def pair_features(con, records: Records, model: CorefModel) -> PairFeatures:
    """Similarities of every candidate pair under every comparison. String and equality
    comparisons run in one DuckDB query; token comparisons take each record's tokens from
    DuckDB once (tokenised there) and intersect the sorted token ids per pair in numba, which
    is ~20x faster than DuckDB's per-pair list_intersect."""
    sims = []
    token_ks = []
    for k, c in enumerate(model.comparisons):
        if c.field not in records.columns:
            from pdbq.errors import suggest

            raise CorefInputError(f"comparison field {c.field!r} is not a column of the records.{suggest(c.field, records.columns)}")
        if c.method not in METHODS:
            raise CorefInputError(f"unknown comparison method {c.method!r} for field {c.field!r}; expected one of {', '.join(METHODS)}")
        if c.method.startswith("token_"):
            token_ks.append(k)
        else:
            sims.append(exp.alias_(_similarity(c.method, _col(c.field, "l"), _col(c.field, "r")), f"s{k}"))
    q = exp.select(exp.column("a", "p"), exp.column("b", "p"), *sims).from_(exp.alias_(exp.to_table(PAIRS), "p"))
    if sims:
        q = (
            q.join(exp.alias_(exp.to_table(RECORDS), "l"), on=exp.EQ(this=_col(MENTION, "l"), expression=exp.column("a", "p")))
            .join(exp.alias_(exp.to_table(RECORDS), "r"), on=exp.EQ(this=_col(MENTION, "r"), expression=exp.column("b", "p")))
        )
    res = con.execute(_sql(q.order_by("p.a", "p.b"))).fetchnumpy()
    a = np.asarray(res["a"], dtype=np.int64)
    b = np.asarray(res["b"], dtype=np.int64)
    x = np.empty((a.size, len(model.comparisons)), dtype=np.float64)
    for k, c in enumerate(model.comparisons):
        if k in token_ks:
            indptr, tok, null = _token_csr(con, c.field, records.n)
            _set_similarity(indptr, tok, null, a, b, c.method == "token_cosine", x[:, k])
            continue
        col = res[f"s{k}"]
        x[:, k] = np.ma.filled(np.ma.asarray(col, dtype=np.float64), np.nan) if np.ma.isMaskedArray(col) else col
    return PairFeatures(a, b, x, tuple(f"{c.field}:{c.method}" for c in model.comparisons))
