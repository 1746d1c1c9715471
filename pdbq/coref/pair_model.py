"""The fitted Fellegi–Sunter pair model: the interface other parts build on.

A `PairModel` is frozen. Per field (`FieldModel`): its comparison levels
(`pdbq.coref.levels.FieldLevels`), `m[l]` = P(level l | the two records are one entity) and
`u[l]` = P(level l | they are not), over non-NULL comparisons, and whether an exact match is
term-frequency adjusted. Plus `prior` = λ, the probability that two records drawn at random
from the table are one entity.

**Units.** Every weight here is a **log2 Bayes factor** (bits, as in Splink):

    contribution_f(pair) = log2(m_f[l] / u_f[l])        level l of the pair on field f
                         = log2(m_f[0] / tf_f(value))   exact match with term frequencies:
                                                        tf = share of non-NULL records holding the value
                         = 0                            NULL on either side (level -1)

Term frequencies are not stored in the model: they are those of the table being scored (column
`f{k}` of `pdbq_fs_values`, the share of the table's non-NULL records holding the value), so a
model fitted on one table and applied to another (`dedupe(model=...)`) weighs values by the
frequencies of the table it clusters.
    match_weight(pair)   = log2(λ / (1 − λ)) + Σ_f contribution_f(pair)
    match_probability    = 1 / (1 + 2^(−match_weight))

The coreference model's pair factor is the match weight in natural-log units
(`match_weight · ln 2`): a pair placed in one entity adds its posterior log-odds, so the MAP
clustering joins a pair only when that is worth more than keeping it apart, and the decision
threshold of a lone pair is match probability 0.5.

`score_pairs(con, model, pairs_table)` computes, for the candidate pairs in a DuckDB table
`(a, b)` of dense record indices (over `pdbq_fs_values`, made by
`pdbq.coref.levels.prepare_values`), a `PairScores`: per pair and field the level (int8) and
contribution (float64, bits), and the match weight (bits). The level vectors are computed in
DuckDB (token sets in numba: `pdbq.coref.pair_levels`); the weights are a table lookup in numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from pdbq.coref.groups import FieldGroup, correction_bits, u_correction
from pdbq.coref.layout import CorefInputError, PairGraph, pair_graph
from pdbq.coref.levels import VALUES, FieldLevels
from pdbq.coref.pair_levels import pair_levels, record_tf

__all__ = ["FieldModel", "PairModel", "PairScores", "score_pairs", "level_counts", "interaction_bits", "group_bits"]

LN2 = math.log(2.0)


@dataclass(frozen=True, eq=False)
class FieldModel:
    """One field of a `PairModel` (module docstring). `m`, `u`: float64[n_levels], each summing to 1."""

    levels: FieldLevels
    m: np.ndarray
    u: np.ndarray
    tf: bool = True

    @property
    def field(self) -> str:
        return self.levels.field

    def weights(self) -> np.ndarray:
        """log2(m/u) per level (bits)."""
        return np.log2(self.m) - np.log2(self.u)

    def describe(self) -> list[dict]:
        w = self.weights()
        return [{"field": self.field, "kind": self.levels.kind, "level": i, "name": nm, "m": float(self.m[i]),
                 "u": float(self.u[i]), "weight_bits": float(w[i]), "tf": bool(self.tf and i == 0)}
                for i, nm in enumerate(self.levels.names)]


@dataclass(frozen=True, eq=False)
class PairModel:
    """A fitted pair model (module docstring). `prior`: λ. `source`: how it was fitted
    ("em" or "labels"); `diagnostics`: what the fit measured (iterations, rules, ...);
    `interactions`: (i, j, bits) added to field j's contribution of a pair agreeing on fields i
    and j, which agree together more often among non-matches than independence says
    (`pdbq.coref.dependence`, `interaction_bits`); `groups`: fields that change together among
    matches, their levels modelled jointly (`pdbq.coref.groups`)."""

    fields: tuple[FieldModel, ...]
    prior: float
    source: str = "em"
    diagnostics: dict = field(default_factory=dict)
    interactions: tuple[tuple[int, int, float], ...] = ()
    groups: tuple[FieldGroup, ...] = ()

    def __post_init__(self):
        if not 0.0 < self.prior < 1.0:
            raise CorefInputError(f"the match prior must be in (0, 1), got {self.prior}")
        for f in self.fields:
            if f.m.shape != (f.levels.n_levels,) or f.u.shape != (f.levels.n_levels,):
                raise CorefInputError(f"field {f.field!r}: m and u need one entry per level ({f.levels.n_levels})")
            if np.any(f.m <= 0) or np.any(f.u <= 0):
                raise CorefInputError(f"field {f.field!r}: m and u must be positive")
        for i, j, bits in self.interactions:
            if not (0 <= i < j < len(self.fields)) or not math.isfinite(bits):
                raise CorefInputError(f"an interaction needs two field indices i < j and finite bits, got {(i, j, bits)}")
        for g in self.groups:
            size = int(np.prod([self.fields[k].levels.n_levels + 1 for k in g.members])) if g.members and \
                all(0 <= k < len(self.fields) for k in g.members) else -1
            if len(g.members) < 2 or list(g.members) != sorted(set(g.members)) or g.m.shape != (size,) \
                    or not np.all(g.m > 0) or (g.u_bits is not None and (g.u_bits.shape != (1 << len(g.members),)
                                                                         or not np.all(np.isfinite(g.u_bits)))):
                raise CorefInputError(f"a field group needs two or more distinct field indices in order and a positive "
                                      f"joint m per code, got members {g.members}")

    @property
    def prior_bits(self) -> float:
        return math.log2(self.prior / (1.0 - self.prior))

    def with_prior(self, prior: float) -> PairModel:
        return PairModel(self.fields, prior, self.source, self.diagnostics, self.interactions, self.groups)

    def interactions_table(self) -> list[dict]:
        """One row per interaction: the two fields and the bits a pair exact on both gets."""
        return [{"field": self.fields[i].field, "given": self.fields[j].field, "bits": float(b)}
                for i, j, b in self.interactions]

    def table(self) -> list[dict]:
        """One row per field and level: m, u, weight in bits, whether TF-adjusted."""
        return [row for f in self.fields for row in f.describe()]

    def to_dict(self) -> dict:
        """A JSON-able form (for storing); `from_dict` reads it back."""
        return {
            "prior": self.prior, "source": self.source,
            "fields": [{"field": f.field, "kind": f.levels.kind, "thresholds": list(f.levels.thresholds),
                        "date_format": f.levels.date_format, "swap_with": f.levels.swap_with, "words": f.levels.words, "sources": list(f.levels.sources), "tfidf": f.levels.tfidf, "m": f.m.tolist(), "u": f.u.tolist(), "tf": f.tf}
                       for f in self.fields],
            "interactions": [[self.fields[i].field, self.fields[j].field, float(b)] for i, j, b in self.interactions],
            "groups": [{"fields": [self.fields[k].field for k in g.members], "m": g.m.tolist(),
                        "u_bits": None if g.u_bits is None else g.u_bits.tolist()} for g in self.groups],
        }

    @staticmethod
    def from_dict(d: dict) -> PairModel:
        fields = tuple(FieldModel(FieldLevels(x["field"], x["kind"], tuple(x["thresholds"]), x.get("date_format"),
                                              x.get("swap_with"), x.get("words"), tuple(x.get("sources") or ()), bool(x.get("tfidf", False))),
                                  np.asarray(x["m"], float), np.asarray(x["u"], float), bool(x["tf"])) for x in d["fields"])
        col = {f.field: k for k, f in enumerate(fields)}
        inter = tuple(sorted((col[a], col[b], float(x)) for a, b, x in d.get("interactions", [])))
        groups = tuple(FieldGroup(tuple(col[f] for f in g["fields"]), np.asarray(g["m"], float),
                                  None if g.get("u_bits") is None else np.asarray(g["u_bits"], float)) for g in d.get("groups", []))
        return PairModel(fields, float(d["prior"]), d.get("source", "em"), interactions=inter, groups=groups)


@dataclass(frozen=True, eq=False)
class PairScores:
    """Candidate pairs (dense indices a < b) with per-field levels (int8, -1 = NULL) and
    contributions (bits), and the match weight (bits, prior included)."""

    a: np.ndarray
    b: np.ndarray
    levels: np.ndarray
    contributions: np.ndarray
    match_weight: np.ndarray
    prior_bits: float

    @property
    def match_probability(self) -> np.ndarray:
        return 1.0 / (1.0 + np.exp2(-self.match_weight))

    def graph(self, n: int) -> PairGraph:
        """The coreference pair graph: scores = match weight in nats."""
        return pair_graph(n, self.a, self.b, self.match_weight * LN2)


def interaction_bits(model: PairModel, levels: np.ndarray) -> np.ndarray:
    """Per pair and field, the model's interactions' bits (pairs × fields, float64): δ_ij goes to
    field j (the second agreement, whose u it conditions) of every pair that *agrees* on both i
    and j — a level that is evidence for a match (m > u: exact, or similar enough), not only the
    exact level the interaction was counted on, since two neighbours' shared address written
    with a typo is the same coincidence."""
    out = np.zeros(levels.shape, np.float64)
    agree = {}
    for k in {x for i, j, _ in model.interactions for x in (i, j)}:
        g = levels[:, k].astype(np.int64)
        pos = model.fields[k].m > model.fields[k].u
        agree[k] = (g >= 0) & pos[np.maximum(g, 0)]
    for i, j, bits in model.interactions:
        out[agree[i] & agree[j], j] += bits
    return out


def interpolated_bits(f: FieldModel, g: np.ndarray, sim: np.ndarray) -> np.ndarray:
    """Bits added within the similarity levels of a field compared by a continuous similarity
    (TF-IDF cosine): a pair at level l (threshold t_l) with similarity s gets the share
    (s − t_l) / (t_{l−1} − t_l) of the step up to the next level's weight, so the weight rises
    continuously with the similarity (it equals the level's weight at its threshold and the next
    level's where that begins; the first level rises toward exact at 1). Two offers of one
    model's colours compete for a partner by how similar they are, not by a tie."""
    th = np.asarray(f.levels.thresholds, np.float64)
    w = f.weights()
    out = np.zeros(g.size, np.float64)
    L = w.size
    mid = (g >= 1) & (g <= L - 2)
    idx = np.flatnonzero(mid)
    lv = g[idx].astype(np.int64)
    low = th[lv - 1]
    high = np.where(lv >= 2, th[np.maximum(lv - 2, 0)], 1.0)
    frac = np.clip((sim[idx] - low) / np.maximum(high - low, 1e-12), 0.0, 1.0)
    out[idx] = frac * np.maximum(w[lv - 1] - w[lv], 0.0)
    return out


def contributions(model: PairModel, levels: np.ndarray, a: np.ndarray, tf: np.ndarray | None,
                  similarity: dict | None = None) -> np.ndarray:
    """Bits per pair and field from levels (pairs × fields, -1 = NULL) and the term frequencies
    of each record (`tf`: records × fields, NaN = NULL; `pair_levels.record_tf`): an exact level
    is weighed by the term frequency of the pair's left record `a`; the model's interactions
    included; `similarity` (field index → the pairs' similarity) adds `interpolated_bits`."""
    out = np.zeros(levels.shape, np.float64)
    for k, f in enumerate(model.fields):
        g = levels[:, k]
        w = f.weights()
        ok = g >= 0
        out[ok, k] = w[g[ok]]
        if f.tf and tf is not None:
            ex = np.flatnonzero(g == 0)
            t = tf[a[ex], k]
            ex, t = ex[np.isfinite(t)], t[np.isfinite(t)]
            # a rarer exact value is stronger evidence: log2(m0 / tf) instead of log2(m0 / u0). A value
            # only the pair itself holds is as rare as values get: its agreement is never weaker
            # evidence than the next level, which the pair also reaches (where nearly every value is
            # unique, m0 is small and such a value's tf = 2/n is far above u0)
            held = t * np.isfinite(tf[:, k]).sum()
            floor = np.where(held <= 2.0 + 1e-9, w[1], -np.inf) if w.size > 2 else -np.inf
            out[ex, k] = np.maximum(np.log2(f.m[0]) - np.log2(np.maximum(t, 1e-12)), floor)
    for k, sim in (similarity or {}).items():
        out[:, k] += interpolated_bits(model.fields[k], levels[:, k], sim)
    if model.interactions:
        out += interaction_bits(model, levels)
    for grp in model.groups:
        out += group_bits(model, grp, levels)
    return out


def group_bits(model: PairModel, grp: FieldGroup, levels: np.ndarray) -> np.ndarray:
    """A group's correction (`pdbq.coref.groups`) per pair, spread evenly over its non-NULL members."""
    out = np.zeros(levels.shape, np.float64)
    bits = correction_bits(grp, [model.fields[k].m for k in grp.members], levels) - u_correction(grp, levels)
    sub = levels[:, list(grp.members)] >= 0
    share = np.where(sub, bits[:, None] / np.maximum(sub.sum(axis=1), 1)[:, None], 0.0)
    out[:, list(grp.members)] = share
    return out


def score_pairs(con, model: PairModel, pairs_table: str) -> PairScores:
    """Score the candidate pairs of DuckDB table `pairs_table(a, b)` (module docstring)."""
    fls = tuple(f.levels for f in model.fields)
    n = int(con.execute(f"SELECT count(*) FROM {VALUES}").fetchall()[0][0])
    sim: dict = {}
    a, b, lv = pair_levels(con, fls, f"SELECT a, b FROM {pairs_table} ORDER BY a, b", n, sim)
    contrib = contributions(model, lv, a, record_tf(con, len(fls)), sim)
    return PairScores(a, b, lv, contrib, model.prior_bits + contrib.sum(axis=1), model.prior_bits)


def level_counts(con, fields: tuple[FieldLevels, ...], pairs_sql: str) -> tuple[np.ndarray, np.ndarray]:
    """Distinct level vectors and their counts over the pairs of a SELECT yielding (a, b)."""
    n = int(con.execute(f"SELECT count(*) FROM {VALUES}").fetchall()[0][0])
    _, _, lv = pair_levels(con, fields, pairs_sql, n)
    if lv.shape[0] == 0:
        return np.zeros((0, len(fields)), np.int64), np.zeros(0)
    # one int64 key per level vector (mixed radix): a 1-D unique is ~20x faster than axis=0
    radix = np.array([f.n_levels + 1 for f in fields], np.int64)
    place = np.concatenate([[1], np.cumprod(radix[:-1])])
    keys, counts = np.unique((lv.astype(np.int64) + 1) @ place, return_counts=True)
    pats = (keys[:, None] // place[None, :]) % radix[None, :] - 1
    return pats.astype(np.int64), counts.astype(np.float64)
