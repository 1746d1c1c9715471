"""Level vectors of record pairs: SQL for most kinds, numba for token sets.

`pair_levels(con, fields, pairs_sql)` returns, for the pairs (a, b) a SELECT yields over
`pdbq_fs_values`, the level of every field (int8, -1 = NULL); `record_tf` each record's term
frequency per field (a pair's exact level is weighed by its left record's). Strings, codes, dates and numbers are compared in DuckDB;
token-set fields (`text`, `list`) by intersecting each record's sorted token ids in numba
(DuckDB's per-pair `list_intersect` costs ~50 µs a pair, this ~0.1 µs).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pdbq.coref.levels import VALUES, FieldLevels, gamma_sql, values_generation
from pdbq.coref.model import sorted_overlap

__all__ = ["pair_levels", "record_tf", "TOKEN_KINDS"]

TOKEN_KINDS = ("text", "list")
_CACHE: dict = {}


def _token_csr(con, k: int, kind: str, n: int):
    key = (id(con), k, values_generation())
    if key in _CACHE:
        return _CACHE[key]
    for old in [x for x in _CACHE if x[2] != key[2]]:
        del _CACHE[old]  # token sets of older values are never asked for again
    col = {"text": f"t{k}", "list": f"v{k}"}.get(kind, f"list_distinct(string_split(v{k}, ' '))")
    res = con.execute(
        f"SELECT m, dense_rank() OVER (ORDER BY w) AS t FROM (SELECT m, unnest({col}) AS w FROM {VALUES}) ORDER BY m, t"
    ).fetchnumpy()
    m = np.asarray(res["m"], np.int64)
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(m, minlength=n), out=indptr[1:])
    null = np.asarray(con.execute(f"SELECT v{k} IS NULL AS x FROM {VALUES} ORDER BY m").fetchnumpy()["x"], np.bool_)
    out = (indptr, np.asarray(res["t"], np.int64), null)
    _CACHE[key] = out
    return out


@njit(cache=True)
def _set_levels(indptr, tok, null, a, b, thresholds, out):
    """Level of each pair from the Jaccard of its token sets: -1 either NULL, 0 equal sets,
    i (1-based) the first threshold reached (a threshold 0 means "> 0"), else len + 1."""
    nt = thresholds.shape[0]
    for p in range(a.shape[0]):
        i = a[p]
        j = b[p]
        if null[i] or null[j]:
            out[p] = -1
            continue
        x, xe = indptr[i], indptr[i + 1]
        y, ye = indptr[j], indptr[j + 1]
        na = xe - x
        nb = ye - y
        inter = sorted_overlap(tok, x, xe, y, ye)
        if inter == na and inter == nb:
            out[p] = 0
            continue
        jac = inter / max(na + nb - inter, 1)
        lev = nt + 1
        for t in range(nt):
            th = thresholds[t]
            if (th > 0 and jac >= th) or (th <= 0 and jac > 0):
                lev = t + 1
                break
        out[p] = lev


@njit(cache=True)
def _words_levels(indptr, tok, a, b, threshold, level, out):
    """Pairs at `level` (the words level or else, not told apart in SQL) stay there when their
    word sets' Jaccard reaches `threshold`, else go to `level + 1` (else)."""
    for p in range(a.shape[0]):
        if out[p] != level:
            continue
        i = a[p]
        j = b[p]
        x, xe = indptr[i], indptr[i + 1]
        y, ye = indptr[j], indptr[j + 1]
        inter = sorted_overlap(tok, x, xe, y, ye)
        union = (xe - x) + (ye - y) - inter
        if union <= 0 or inter / union < threshold:
            out[p] = level + 1


def pair_levels(con, fields: tuple[FieldLevels, ...], pairs_sql: str, n: int):
    """(a, b, levels int8[pairs, fields]) (module docstring)."""
    sql_ks = [k for k, fl in enumerate(fields) if fl.kind not in TOKEN_KINDS]
    col_of = {fl.field: k for k, fl in enumerate(fields)}
    for fl in fields:
        if fl.swap_with is not None and fl.swap_with not in col_of:
            from pdbq.coref.layout import CorefInputError  # noqa: PLC0415

            raise CorefInputError(f"field {fl.field!r} swaps with {fl.swap_with!r}, which is not a compared field")
    cols = [f"{gamma_sql(k, fields[k], partner=col_of.get(fields[k].swap_with), words=False)} AS g{k}" for k in sql_ks]
    if cols:
        q = (f"SELECT p.a, p.b, {', '.join(cols)} FROM ({pairs_sql}) p "
             f"JOIN {VALUES} l ON l.m = p.a JOIN {VALUES} r ON r.m = p.b")
    else:
        q = f"SELECT p.a, p.b FROM ({pairs_sql}) p"
    res = con.execute(q).fetchnumpy()
    a = np.asarray(res.pop("a"), np.int64)
    b = np.asarray(res.pop("b"), np.int64)
    levels = np.empty((a.size, len(fields)), np.int8)
    for k in sql_ks:
        levels[:, k] = np.asarray(res.pop(f"g{k}"), np.int8)
    del res
    for k, fl in enumerate(fields):
        if fl.kind in TOKEN_KINDS:
            indptr, tok, null = _token_csr(con, k, fl.kind, n)
            _set_levels(indptr, tok, null, a, b, np.asarray(fl.thresholds, np.float64), levels[:, k])
    for k, fl in enumerate(fields):
        if fl.kind == "string" and fl.words is not None:
            indptr, tok, _ = _token_csr(con, k, fl.kind, n)
            _words_levels(indptr, tok, a, b, float(fl.words), fl.n_levels - 2, levels[:, k])
    return a, b, levels


def record_tf(con, n_fields: int) -> np.ndarray:
    """float64[records, fields]: each record's term frequency per field (column `f{k}` of
    `pdbq_fs_values`, NaN where the value is NULL), in record order. A pair's exact-level term
    frequency is its left record's row: read per record once, not per pair."""
    if n_fields == 0:
        n = int(con.execute(f"SELECT count(*) FROM {VALUES}").fetchall()[0][0])
        return np.zeros((n, 0))
    res = con.execute(f"SELECT {', '.join(f'f{k}' for k in range(n_fields))} FROM {VALUES} ORDER BY m").fetchnumpy()
    return np.stack([np.ma.filled(np.ma.asarray(res[f"f{k}"], np.float64), np.nan) for k in range(n_fields)], axis=1)
