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

TOKEN_KINDS = ("text", "list", "codes")
_CACHE: dict = {}


def _token_csr(con, k: int, kind: str, n: int, column: str | None = None):
    key = (id(con), k, values_generation(), column)
    if key in _CACHE:
        return _CACHE[key]
    for old in [x for x in _CACHE if x[2] != key[2]]:
        del _CACHE[old]  # token sets of older values are never asked for again
    col = column or {"text": f"t{k}", "list": f"v{k}", "codes": f"t{k}"}.get(kind, f"list_distinct(string_split(v{k}, ' '))")
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


def _tfidf_csr(con, k: int, n: int):
    """A text field's records as L2-normalised TF-IDF vectors over its words and character
    3-grams (of the space-joined word set, so "pslx350h" and "ps lx350h" share most grams):
    (indptr int64[n+1], token ids int64 sorted within a record, weights float64, null bool[n]).
    A token's weight is its inverse document frequency ln(N / df) over the N non-NULL records:
    a word or gram most records hold says little about a pair sharing it."""
    key = (id(con), k, values_generation(), "tfidf")
    if key in _CACHE:
        return _CACHE[key]
    res = con.execute(
        f"WITH w AS (SELECT m, unnest(t{k}) AS w FROM {VALUES} WHERE v{k} IS NOT NULL), "
        f"g AS (SELECT m, '#' || substr(s, i, 3) AS w FROM (SELECT m, ' ' || v{k} || ' ' AS s FROM {VALUES} "
        f"WHERE v{k} IS NOT NULL), range(1, greatest(length(s) - 1, 1)) r(i)), "
        f"tok AS (SELECT DISTINCT m, w FROM (SELECT * FROM w UNION ALL SELECT * FROM g)), "
        f"nn AS (SELECT count(*) AS n FROM {VALUES} WHERE v{k} IS NOT NULL), "
        f"df AS (SELECT w, ln((SELECT n FROM nn) / count(*)) AS idf FROM tok GROUP BY w), "
        f"x AS (SELECT tok.m, dense_rank() OVER (ORDER BY tok.w) AS t, df.idf FROM tok JOIN df USING (w)) "
        f"SELECT m, t, idf / greatest(sqrt(sum(idf * idf) OVER (PARTITION BY m)), 1e-12) AS wt FROM x ORDER BY m, t"
    ).fetchnumpy()
    m = np.asarray(res["m"], np.int64)
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(m, minlength=n), out=indptr[1:])
    null = np.asarray(con.execute(f"SELECT v{k} IS NULL AS x FROM {VALUES} ORDER BY m").fetchnumpy()["x"], np.bool_)
    out = (indptr, np.asarray(res["t"], np.int64), np.asarray(res["wt"], np.float64), null)
    _CACHE[key] = out
    return out


@njit(cache=True)
def _cosine_levels(indptr, tok, wt, null, a, b, thresholds, out, sim):
    """Level of each pair of a text field from the cosine of its TF-IDF vectors: -1 either
    NULL, 0 is kept from the word-set level (equal word sets), i (1-based) the first threshold
    reached, else len + 1; `sim` gets the cosine (1 for equal word sets, 0 for NULL)."""
    nt = thresholds.shape[0]
    for p in range(a.shape[0]):
        if out[p] <= 0:
            sim[p] = 1.0 if out[p] == 0 else 0.0
            continue
        i = a[p]
        j = b[p]
        x, xe = indptr[i], indptr[i + 1]
        y, ye = indptr[j], indptr[j + 1]
        cos = 0.0
        while x < xe and y < ye:
            if tok[x] == tok[y]:
                cos += wt[x] * wt[y]
                x += 1
                y += 1
            elif tok[x] < tok[y]:
                x += 1
            else:
                y += 1
        lev = nt + 1
        for t in range(nt):
            if cos >= thresholds[t]:
                lev = t + 1
                break
        out[p] = lev
        sim[p] = cos


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


@njit(cache=True)
def _stem_levels(indptr, tok, a, b, out):
    """Codes pairs at level 2 (no shared code) sharing a code stem go to 2, the rest to 3 (else)."""
    for p in range(a.shape[0]):
        if out[p] != 2:
            continue
        i = a[p]
        j = b[p]
        if sorted_overlap(tok, indptr[i], indptr[i + 1], indptr[j], indptr[j + 1]) == 0:
            out[p] = 3


def pair_levels(con, fields: tuple[FieldLevels, ...], pairs_sql: str, n: int, similarity: dict | None = None):
    """(a, b, levels int8[pairs, fields]) (module docstring). `similarity`, when given, gets for
    each TF-IDF text field k its pairs' cosines (float64[pairs])."""
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
            # codes: the shared-code level is "Jaccard > 0" of the code sets; a TF-IDF text field's
            # Jaccard pass only finds its exact (equal word sets) and NULL pairs
            th = (0.0,) if fl.kind == "codes" else (1.0,) if fl.tfidf else fl.thresholds
            _set_levels(indptr, tok, null, a, b, np.asarray(th, np.float64), levels[:, k])
            if fl.kind == "text" and fl.tfidf:
                indptr, tok, wt, null = _tfidf_csr(con, k, n)
                sim = np.zeros(a.size, np.float64)
                _cosine_levels(indptr, tok, wt, null, a, b, np.asarray(fl.thresholds, np.float64), levels[:, k], sim)
                if similarity is not None:
                    similarity[k] = sim
    for k, fl in enumerate(fields):
        if fl.kind == "codes":  # no shared code: a shared stem moves the pair up from else
            indptr, tok, _ = _token_csr(con, k, fl.kind, n, f"s{k}")
            _stem_levels(indptr, tok, a, b, levels[:, k])
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
