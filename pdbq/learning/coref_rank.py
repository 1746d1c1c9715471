"""SampleRank for coreference (seed 002, Algorithm 1): learn per-comparison pair weights and a
bias from a gold clustering, by ranking neighbouring clusterings along a walk of entity moves.

The model is the coreference model of docs/coreference.md with a linear pair score,

    w_ij = Σ_k θ_k · x_ijk + θ_bias,       ψ(y) = Σ_{within-entity candidate pairs} w_ij,

so the feature vector of a clustering is φ(y) = Σ_{within-entity pairs} [x_ij, 1], and a move's
feature change is the signed sum of the rows of the pairs whose within-entity status it changes.
`x_ijk` is a comparison's similarity minus its center (a NULL field: 0, no evidence), so learned
θ_k are the front door's comparison weights and −θ_bias its `bias`.

Moves are the proposals of `pdbq.inference.coreference.entity_moves` (mention moves: a uniform mention to a
uniform neighbour's entity or a new singleton; split/merge: a uniform mention and a uniform
neighbour, merged when apart, else split by sequential allocation on the current pair scores).
The allocation reads the pair scores under the weights SampleRank last reported (refreshed
every `refresh` steps through `samplerank`'s `on_weights` hook: recomputing all pair scores
after every update would cost O(pairs) per step). Every move is "a set M of mentions leaves entity s for entity t (or a new
one)", so one routine gives its feature change and its change in B³ F1 or pairwise F1 against
the gold clustering, both in O(|s| + |t| + pairs touched), from kept per-entity sums
(Σ_g c_{e,g}²) and global sums (B³ precision/recall sums, true and predicted pair counts).

Layouts: `PairTable` (a int64[P], b int64[P] dense mention indices, x float64[P, K] features);
gold int64[n] dense entity labels. The walk's stream is one xorshift state seeded from the
`np.random.Generator` SampleRank passes to the first `propose`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit

from pdbq.coref.layout import PairGraph, pair_graph
from pdbq.coref.metrics import b_cubed, pairwise
from pdbq.errors import LearningError, OptionError
from pdbq.inference.coreference.resolve import CorefConfig, resolve_map
from pdbq.inference.coreference.entity_moves import (
    EntityState,
    Scratch,
    _allocate,
    _clear_sides,
    _link,
    _members_shuffled,
    _pop_free,
    _unlink,
    new_scratch,
    new_state,
)
from pdbq.inference.mcmc.rng import bounded, next_state, uniform
from pdbq.learning.samplerank import SampleRankConfig, SampleRankResult, samplerank

__all__ = ["PairTable", "CorefRanking", "CorefLearnResult", "learn_coref_weights", "pair_scores", "resolve_with_weights", "scores_against", "pair_table", "subset"]

OBJECTIVES = ("b3", "pairwise")


class PairTable(NamedTuple):
    """Candidate pairs (a[p] < b[p], dense mention indices) and their features x[p, k]."""

    a: np.ndarray
    b: np.ndarray
    x: np.ndarray


def _check_pairs(n: int, pairs: PairTable) -> PairTable:
    a = np.asarray(pairs.a, dtype=np.int64)
    b = np.asarray(pairs.b, dtype=np.int64)
    x = np.asarray(pairs.x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] != a.shape[0] or a.shape != b.shape:
        raise LearningError("pair features must be a (pairs × features) matrix aligned with the pair arrays")
    x = np.where(np.isnan(x), 0.0, x)  # a NULL comparison is no evidence
    if not np.all(np.isfinite(x)):
        raise LearningError("pair features must be finite (NaN is read as 0: no evidence)")
    return PairTable(a, b, np.ascontiguousarray(x))


def pair_scores(pairs: PairTable, theta: np.ndarray) -> np.ndarray:
    """w_p = x_p · θ[:-1] + θ[-1] (NaN features count 0)."""
    x = np.where(np.isnan(pairs.x), 0.0, pairs.x)
    return x @ theta[:-1] + theta[-1]


@njit(cache=True)
def _gather_objective(size, head, nxt, gold, gsize, sq, moved, n_moved, s, t, cnt_s, cnt_t, cnt_m, out):
    """Changes of the kept sums when moved[:n_moved] (all in entity s) join entity t (−1: new):
    out = [sq_s', sq_t', ΔPsum, ΔRsum, ΔTP, ΔPP]. cnt_* are zeroed scratch (one per gold label),
    left zeroed."""
    for r in range(n_moved):
        cnt_m[gold[moved[r]]] += 1
    x = head[s]
    while x >= 0:
        cnt_s[gold[x]] += 1
        x = nxt[x]
    if t >= 0:
        x = head[t]
        while x >= 0:
            cnt_t[gold[x]] += 1
            x = nxt[x]
    d_sq_s = 0.0
    d_sq_t = 0.0
    d_r = 0.0
    for r in range(n_moved):
        g = gold[moved[r]]
        cm = cnt_m[g]
        if cm == 0:  # this gold label was already counted
            continue
        cs = cnt_s[g]
        ct = cnt_t[g]
        ds = (cs - cm) * (cs - cm) - cs * cs
        dt = (ct + cm) * (ct + cm) - ct * ct
        d_sq_s += ds
        d_sq_t += dt
        d_r += (ds + dt) / gsize[g]
        cnt_m[g] = 0
    for r in range(n_moved):
        cnt_s[gold[moved[r]]] = 0
    x = head[s]
    while x >= 0:
        cnt_s[gold[x]] = 0
        x = nxt[x]
    if t >= 0:
        x = head[t]
        while x >= 0:
            cnt_t[gold[x]] = 0
            x = nxt[x]
    ns = size[s]
    nt = size[t] if t >= 0 else 0
    sq_t = sq[t] if t >= 0 else 0.0
    sq_s2 = sq[s] + d_sq_s
    sq_t2 = sq_t + d_sq_t
    p_old = sq[s] / ns + (sq_t / nt if nt > 0 else 0.0)
    p_new = (sq_s2 / (ns - n_moved) if ns > n_moved else 0.0) + sq_t2 / (nt + n_moved)
    out[0] = sq_s2
    out[1] = sq_t2
    out[2] = p_new - p_old
    out[3] = d_r
    out[4] = (d_sq_s + d_sq_t) / 2.0
    pp_old = ns * (ns - 1) / 2.0 + nt * (nt - 1) / 2.0
    ns2 = ns - n_moved
    nt2 = nt + n_moved
    out[5] = ns2 * (ns2 - 1) / 2.0 + nt2 * (nt2 - 1) / 2.0 - pp_old


@njit(cache=True)
def _gather_features(indptr, nbr, epair, x, label, inm, moved, n_moved, s, t, dphi):
    """φ(y') − φ(y) into dphi (features, then the bias slot): pairs between M and s \\ M leave
    an entity (−1), pairs between M and t join one (+1)."""
    kf = x.shape[1]
    for c in range(kf + 1):
        dphi[c] = 0.0
    for r in range(n_moved):
        m = moved[r]
        for e in range(indptr[m], indptr[m + 1]):
            y = nbr[e]
            ly = label[y]
            sign = 0.0
            if ly == s and not inm[y]:
                sign = -1.0
            elif t >= 0 and ly == t:
                sign = 1.0
            if sign != 0.0:
                p = epair[e]
                for c in range(kf):
                    dphi[c] += sign * x[p, c]
                dphi[kf] += sign


@njit(cache=True)
def _propose(g, st, sc, rng_state, p_new, p_split_merge, moved, inm):
    """`_draw` on the stream rng_state[0] (uint64[1], advanced in place: a state round-tripped
    through a Python int could come back signed)."""
    rng, k, s, t = _draw(g, st, sc, rng_state[0], p_new, p_split_merge, moved, inm)
    rng_state[0] = rng
    return k, s, t


@njit(cache=True)
def _draw(g, st, sc, rng, p_new, p_split_merge, moved, inm):
    """Draw one entity move as the kernels do; returns (rng, n_moved, s, t) with moved[:n_moved]
    leaving s for t (t = −1: a new entity; n_moved = 0: a no-op). Sets inm for the moved."""
    n = st.label.shape[0]
    rng = next_state(rng)
    if uniform(rng) < p_split_merge:
        rng = next_state(rng)
        i = bounded(rng, n)
        lo = g.indptr[i]
        deg = g.indptr[i + 1] - lo
        if deg == 0:
            return rng, 0, -1, -1
        rng = next_state(rng)
        j = g.nbr[lo + bounded(rng, deg)]
        a = st.label[i]
        b = st.label[j]
        if a != b:  # merge the smaller entity into the larger
            small = a
            big = b
            if st.size[a] > st.size[b]:
                small = b
                big = a
            k = 0
            x = st.head[small]
            while x >= 0:
                moved[k] = x
                inm[x] = True
                k += 1
                x = st.nxt[x]
            return rng, k, small, big
        rng, km = _members_shuffled(st, sc, rng, a, a, i, j)
        dummy = np.zeros(4, np.int64)
        rng, _ = _allocate(g, st, sc, rng, i, j, a, a, km, True, dummy)
        k = 0
        x = st.head[a]
        while x >= 0:
            if sc.side[x] == 1:
                moved[k] = x
                inm[x] = True
                k += 1
            x = st.nxt[x]
        _clear_sides(sc, i, j, km)
        return rng, k, a, -1
    rng = next_state(rng)
    m = bounded(rng, n)
    s = st.label[m]
    lo = g.indptr[m]
    deg = g.indptr[m + 1] - lo
    pn = p_new if deg > 0 else 1.0
    rng = next_state(rng)
    if uniform(rng) < pn:
        if st.size[s] == 1:
            return rng, 0, -1, -1
        moved[0] = m
        inm[m] = True
        return rng, 1, s, -1
    rng = next_state(rng)
    t = st.label[g.nbr[lo + bounded(rng, deg)]]
    if t == s:
        return rng, 0, -1, -1
    moved[0] = m
    inm[m] = True
    return rng, 1, s, t


@njit(cache=True)
def _apply(st, sq, moved, n_moved, s, t, sq_s, sq_t):
    if n_moved == 0:
        return
    for r in range(n_moved):
        _unlink(st, moved[r])
    if t < 0:
        t = _pop_free(st)
    for r in range(n_moved):
        _link(st, moved[r], t)
    sq[s] = sq_s
    sq[t] = sq_t


def _f1(p: float, r: float) -> float:
    return 0.0 if p + r <= 0 else 2.0 * p * r / (p + r)


class CorefRanking:
    """A `RankingProblem` over entity moves on the pairs of `pairs` (n mentions), ranked by B³
    F1 (``objective='b3'``) or pairwise F1 (``'pairwise'``) against ``gold`` (one label per
    mention). Weights: one per feature column, then the bias. Starts from singletons."""

    def __init__(self, n: int, pairs: PairTable, gold: np.ndarray, *, objective: str = "b3",
                 p_new: float = 0.1, p_split_merge: float = 0.2):
        if objective not in OBJECTIVES:
            raise OptionError(f"option 'objective' must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
        for name, v in (("p_new", p_new), ("p_split_merge", p_split_merge)):
            if not (isinstance(v, (int, float)) and 0.0 <= v <= 1.0):
                raise OptionError(f"option '{name}' must be a number in [0, 1], got {v!r}")
        pairs = _check_pairs(n, pairs)
        gold = np.asarray(gold)
        if gold.shape != (n,):
            raise LearningError(f"gold needs one label per mention ({n}), got shape {gold.shape}")
        if pairs.a.size == 0:
            raise LearningError("nothing to learn from: there are no candidate pairs")
        _, dense = np.unique(gold, return_inverse=True)
        self.gold = dense.reshape(-1).astype(np.int64)
        self.gsize = np.bincount(self.gold).astype(np.float64)
        if self.gsize.max() < 2:
            raise LearningError("nothing to learn from: every gold entity is a singleton")
        self.n = n
        self.pairs = pairs
        self.objective = objective
        self.p_new = float(p_new)
        self.p_split_merge = float(p_split_merge)
        self.n_weights = pairs.x.shape[1] + 1
        # the CSR's edge → pair index: build it with the pair index as the score
        base = pair_graph(n, pairs.a, pairs.b, np.arange(pairs.a.size, dtype=np.float64))
        self.epair = base.score.astype(np.int64)
        self.g = PairGraph(base.indptr, base.nbr, np.zeros_like(base.score))
        self.state: EntityState = new_state(n)
        self.sq = np.ones(n)  # Σ_g c_{e,g}² per entity id (singletons: 1)
        self.sc: Scratch = new_scratch(self.g)
        self.moved = np.empty(max(n, 1), np.int32)
        self.inm = np.zeros(max(n, 1), np.bool_)
        self.cnt = np.zeros((3, self.gsize.size), np.int64)
        self.pending = np.zeros(6)
        self.dphi = np.zeros(self.n_weights)
        self.idx = np.arange(self.n_weights)
        # kept sums: B³ precision / recall sums, true and predicted within-entity pairs
        self.psum = float(n)
        self.rsum = float(np.sum(1.0 / self.gsize[self.gold]))
        self.tp = 0.0
        self.pp = 0.0
        self.gp = float(np.sum(self.gsize * (self.gsize - 1) / 2))
        self.rng = None
        self._move = (0, -1, -1)

    def set_weights(self, theta: np.ndarray) -> None:
        """Refresh the pair scores the split allocation reads."""
        self.g.score[:] = (self.pairs.x @ theta[:-1] + theta[-1])[self.epair]

    def labels(self) -> np.ndarray:
        return self.state.label.astype(np.int64)

    def objective_value(self, psum=None, rsum=None, tp=None, pp=None) -> float:
        psum = self.psum if psum is None else psum
        rsum = self.rsum if rsum is None else rsum
        tp = self.tp if tp is None else tp
        pp = self.pp if pp is None else pp
        if self.objective == "b3":
            return _f1(psum / self.n, rsum / self.n)
        return 1.0 if pp + self.gp == 0 else 2.0 * tp / (pp + self.gp)

    def propose(self, rng: np.random.Generator):
        if self.rng is None:
            self.rng = np.array([rng.integers(1, 2**63)], dtype=np.uint64)
        k0 = self._move[0]
        self.inm[self.moved[:k0]] = False
        k, s, t = _propose(self.g, self.state, self.sc, self.rng, self.p_new, self.p_split_merge, self.moved, self.inm)
        self._move = (k, s, t)
        if k:
            st = self.state
            c = self.cnt
            _gather_objective(st.size, st.head, st.nxt, self.gold, self.gsize, self.sq,
                              self.moved, k, s, t, c[0], c[1], c[2], self.pending)
            _gather_features(self.g.indptr, self.g.nbr, self.epair, self.pairs.x, st.label, self.inm,
                             self.moved, k, s, t, self.dphi)
        else:
            self.dphi[:] = 0.0
            self.pending[2:] = 0.0
        return self._move

    def feature_delta(self, move):
        return self.idx, self.dphi

    def objective_delta(self, move) -> float:
        if move[0] == 0:
            return 0.0
        d = self.pending
        return self.objective_value(self.psum + d[2], self.rsum + d[3], self.tp + d[4], self.pp + d[5]) - self.objective_value()

    def accept(self, move) -> None:
        k, s, t = move
        if k == 0:
            return
        d = self.pending
        _apply(self.state, self.sq, self.moved, k, s, t, d[0], d[1])
        self.psum += d[2]
        self.rsum += d[3]
        self.tp += d[4]
        self.pp += d[5]


@dataclass(frozen=True, eq=False)
class CorefLearnResult:
    weights: np.ndarray  # per feature, then the bias (the pair score's constant)
    names: tuple[str, ...]
    samplerank: SampleRankResult
    train_objective: float  # the walk's final F against the gold clustering

    @property
    def bias(self) -> float:
        """The front door's `bias` (subtracted from every pair score)."""
        return float(-self.weights[-1])


def learn_coref_weights(
    n: int,
    pairs: PairTable,
    gold: np.ndarray,
    config: SampleRankConfig = SampleRankConfig(steps=50_000),
    *,
    objective: str = "b3",
    names: tuple[str, ...] | None = None,
    p_new: float = 0.1,
    p_split_merge: float = 0.2,
    refresh: int = 1000,
) -> CorefLearnResult:
    """SampleRank (margin, optimizer, averaging from `config`; FACTORIE: margin 1, AdaGrad,
    averaged) of per-feature pair weights and a bias against the gold clustering."""
    problem = CorefRanking(n, pairs, gold, objective=objective, p_new=p_new, p_split_merge=p_split_merge)
    if isinstance(refresh, bool) or not isinstance(refresh, int) or refresh < 1:
        raise OptionError(f"option 'refresh' must be a positive integer, got {refresh!r}")
    sr = samplerank(problem, config, on_weights=problem.set_weights, weights_every=refresh)
    if not np.all(np.isfinite(sr.weights)):
        raise LearningError("SampleRank diverged: a weight is not finite")
    k = pairs.x.shape[1]
    nm = tuple(names) if names is not None else tuple(f"x{c}" for c in range(k))
    if len(nm) != k:
        raise LearningError(f"{len(nm)} feature names for {k} feature columns")
    return CorefLearnResult(sr.weights, nm + ("bias",), sr, problem.objective_value())


def resolve_with_weights(n: int, pairs: PairTable, theta: np.ndarray, config: CorefConfig = CorefConfig()):
    """The MAP clustering (`resolve_map`) under pair scores x·θ + bias."""
    pairs = _check_pairs(n, pairs)
    return resolve_map(pair_graph(n, pairs.a, pairs.b, pair_scores(pairs, theta)), config)


def scores_against(pred: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    b3, pw = b_cubed(pred, gold), pairwise(pred, gold)
    return {"b3_p": b3.precision, "b3_r": b3.recall, "b3_f1": b3.f1, "pw_p": pw.precision, "pw_r": pw.recall, "pw_f1": pw.f1}



def pair_table(con, source, id: str, comparisons, blocking, max_pairs: int = 20_000_000):
    """(record ids in mention order, `PairTable`, feature names) of a record source under the
    front door's comparisons and blocking: features are similarity − center (NULL → 0)."""
    from pdbq.coref.model import CorefModel, candidate_pairs, load_records, pair_features

    records = load_records(con, source, id, list(dict.fromkeys(c.field for c in comparisons)))
    model = CorefModel(tuple(comparisons), tuple(blocking), max_pairs=max_pairs)
    candidate_pairs(con, records, model)
    feats = pair_features(con, records, model)
    x = np.nan_to_num(feats.x - model.centers(), nan=0.0)
    return records.ids, PairTable(feats.a, feats.b, x), feats.names


def subset(pairs: PairTable, keep: np.ndarray) -> tuple[int, PairTable, np.ndarray]:
    """The pairs among the mentions where `keep` (bool[n]) holds, re-indexed densely:
    (mentions kept, their pairs, the kept mentions' old indices)."""
    keep = np.asarray(keep, dtype=bool)
    old = np.flatnonzero(keep)
    new = np.full(keep.size, -1, np.int64)
    new[old] = np.arange(old.size)
    both = keep[pairs.a] & keep[pairs.b]
    return int(old.size), PairTable(new[pairs.a[both]], new[pairs.b[both]], pairs.x[both]), old
