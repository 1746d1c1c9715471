"""Records of several sources in one table: keep only the candidate pairs across sources.

`pdbq.link` stacks its sources with a source column; under link_only, `dedupe` drops the
within-source pairs with `cross_source` before clustering, and `cross_source_prior` re-estimates
the match prior over the pairs that can match: λ = P(a record of one source and a record of the
other are one entity), over the n_left × n_right cross-source pairs (each source being free of
duplicates, no within-source pair matches), instead of the prior over all n(n−1)/2 pairs that
deduplication uses.
"""

from __future__ import annotations

import numpy as np
from sqlglot import exp

from pdbq.coref.estimate import mutual_best, refine_prior
from pdbq.coref.levels import VALUES
from pdbq.coref.model import MENTION, RECORDS, PairFeatures
from pdbq.coref.pair_model import PairModel, PairScores

__all__ = ["cross_source", "cross_source_prior", "duplicate_free", "exclusive_prior", "source_groups"]


def _q(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def source_groups(con, column: str) -> np.ndarray:
    """Each loaded record's source as a dense int32 code (in mention order): the cannot-link
    groups of a one-to-one link (no entity holds two records of one source)."""
    q = exp.select(exp.column(_q(column))).from_(RECORDS).order_by(exp.column(_q(MENTION)))
    src = np.asarray(next(iter(con.execute(q.sql(dialect="duckdb")).fetchnumpy().values())))
    return np.unique(src, return_inverse=True)[1].reshape(-1).astype(np.int32)


def cross_source(con, column: str, pairs):
    """The candidate pairs of `pairs` (a `PairFeatures` or `PairScores`: dense indices a, b and
    per-pair rows) whose records differ in `column` of the loaded records."""
    q = exp.select(exp.column(_q(column))).from_(RECORDS).order_by(exp.column(_q(MENTION)))
    src = np.asarray(next(iter(con.execute(q.sql(dialect="duckdb")).fetchnumpy().values())))
    keep = src[pairs.a] != src[pairs.b]
    if isinstance(pairs, PairFeatures):
        return PairFeatures(pairs.a[keep], pairs.b[keep], pairs.x[keep], pairs.names)
    return PairScores(pairs.a[keep], pairs.b[keep], pairs.levels[keep], pairs.contributions[keep],
                      pairs.match_weight[keep], pairs.prior_bits)


def cross_source_prior(con, column: str, model: PairModel, scores: PairScores,
                       recall: float | None) -> tuple[PairModel, PairScores, list[str]]:
    """(model, scores, warnings) with the prior re-estimated over the cross-source pairs
    (module docstring): EM for λ with m and u fixed over the candidate pairs `scores` (already
    cross-source) and the n_left × n_right pairs in all, blocking's `recall` (None: 1) counting
    the matches it missed. The scores' match weights move by the change in log2 prior odds; the
    model keeps the all-pairs prior in `diagnostics["prior_all_pairs"]`."""
    q = exp.select(exp.func("count", exp.Star())).from_(RECORDS).group_by(exp.column(_q(column)))
    sizes = np.asarray([r[0] for r in con.execute(q.sql(dialect="duckdb")).fetchall()], dtype=np.int64)
    cross = int((int(sizes.sum()) ** 2 - int((sizes ** 2).sum())) // 2)
    lam, ok = refine_prior(scores.match_weight - scores.prior_bits, cross, 1.0 if recall is None else recall, model.prior)
    if not ok:
        return model, scores, ["the match prior did not converge over the cross-source pairs; the prior over all "
                               "pairs is kept"]
    linked = PairModel(model.fields, lam, model.source, dict(model.diagnostics, prior_all_pairs=model.prior))
    shift = linked.prior_bits - scores.prior_bits
    return linked, PairScores(scores.a, scores.b, scores.levels, scores.contributions, scores.match_weight + shift,
                              linked.prior_bits), []


def exclusive_prior(scores: PairScores, n: int, n_left: int, n_right: int, max_iter: int = 50) -> tuple[float, int]:
    """(log2 prior odds of a link, the mutual best matches K it rests on) of a one-to-one link.

    Each source being free of duplicates, a link is a matching between the two sources. Under a
    prior P(matching M) ∝ ρ^|M| over partial matchings, K links are most probable when
    ρ ≈ (K + 1) / ((n_left − K)(n_right − K)): when most records of both sources have a partner,
    the few left unmatched are few candidates, and a link between two of them is far more likely
    than the per-pair prior of independent pairs (about K / (n_left · n_right)) says. K is read
    from the data: the mutual best matches with a positive weight, solved as a fixed point from
    the pair model's prior (which it never lowers); the odds stay at most 1, so a link still
    needs evidence for it."""
    evidence = scores.match_weight - scores.prior_bits
    bits = scores.prior_bits
    k = 0
    for _ in range(max_iter):
        k = int(mutual_best(scores.a, scores.b, evidence + bits, n).sum())
        rho = (k + 1) / max((n_left - k) * (n_right - k), 1)
        new = min(max(float(np.log2(rho)), scores.prior_bits), 0.0)
        if abs(new - bits) < 1e-9:
            break
        bits = new
    return bits, k


# a source is detected free of duplicates when, on some identifying field, its own record pairs
# agree exactly at most this share as often as pairs across the sources do
DUPLICATE_FREE_RATIO = 0.2
# ... on a field where at least this many cross-source pairs agree (fewer say nothing)
_MIN_CROSS_EQUAL = 10


def source_count(con, column: str) -> int:
    """How many distinct non-NULL values `column` takes in the loaded records."""
    q = exp.select(exp.func("count", exp.Distinct(expressions=[exp.column(_q(column))]))).from_(RECORDS)
    return int(con.execute(q.sql(dialect="duckdb")).fetchall()[0][0])


def duplicate_free(con, column: str, model: PairModel) -> tuple[bool, dict]:
    """Whether each of the two sources (the two values of `column` in the loaded records, the
    values prepared for `model`'s fields) is free of duplicates, read from the data: (verdict,
    evidence per source: the field and the ratio that decided).

    Two records of one source that agree exactly on an identifying field (a phone, a model
    number) are duplicates or a coincidence; two records of different sources that agree are
    matches or a coincidence. Where a source holds duplicates at the rate the sources share
    entities, its own pairs agree about as often as cross-source pairs (per pair); where it holds
    none, far less often (coincidences only). So per source, over the fields on which at least
    `_MIN_CROSS_EQUAL` cross-source pairs agree, the smallest ratio of the within-source to the
    cross-source agreement rate decides: at most `DUPLICATE_FREE_RATIO` is duplicate-free."""
    src = exp.column(_q(column)).sql(dialect="duckdb")
    evidence: dict = {}
    best = [(np.inf, None), (np.inf, None)]
    for k, fm in enumerate(model.fields):
        if fm.levels.kind == "list":
            continue
        row = con.execute(
            f"WITH v AS (SELECT x.v{k} AS v, CASE WHEN r.{src} = (SELECT min({src}) FROM {RECORDS}) THEN 0 ELSE 1 END AS s FROM {VALUES} x JOIN {RECORDS} r ON r.{_q(MENTION).sql(dialect='duckdb')} = x.m "
            f"WHERE x.v{k} IS NOT NULL), c AS (SELECT count(*) FILTER (s = 0) AS a, count(*) FILTER (s = 1) AS b FROM v GROUP BY v) "
            f"SELECT sum(a * (a - 1) / 2), sum(b * (b - 1) / 2), sum(a * b), sum(a), sum(b) FROM c").fetchall()[0]
        wa, wb, cr, na, nb = (float(x or 0) for x in row)
        if cr < _MIN_CROSS_EQUAL or na < 2 or nb < 2:
            continue
        rate_x = cr / (na * nb)
        for s, (w, m) in enumerate(((wa, na), (wb, nb))):
            ratio = (w / (m * (m - 1) / 2)) / rate_x
            if ratio < best[s][0]:
                best[s] = (ratio, fm.field)
    for s in (0, 1):
        evidence[s] = {"field": best[s][1], "ratio": None if best[s][1] is None else float(best[s][0])}
    verdict = all(b[1] is not None and b[0] <= DUPLICATE_FREE_RATIO for b in best)
    return verdict, evidence
