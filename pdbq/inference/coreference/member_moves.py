"""Mention moves whose cost is proportional to the factors they score (seed 000 at wall time).

The mention move of `pdbq.inference.coreference.entity_moves` needs c_s and c_t (m's candidate neighbours
in its source and target entity) for its proposal ratio, so every step scans m's whole
candidate row — O(row) work that no factor subsampling can remove. The *witness* proposal here
has a ratio built from entity sizes only, and its score change is a sum over entity members
that an estimator can sample directly:

Witness proposal. Pick a mention m uniformly; with probability p_new (1 when m has no candidate
neighbours) the target is a new singleton, else a uniformly drawn candidate neighbour j names
the target t = label[j] (t = s: no-op). When |s| > 1, also draw a *witness* w uniformly from
s \\ {m}: it is the neighbour the reverse move would have to pick to send m back. On the space
extended by (j, w) the move (y, j, w) → (y', w, j) is an involution, so MH with

    q_fwd = [t new ? p_new : (1 − p_new)/deg] · [|s| > 1 ? 1/(|s| − 1) : 1]
    q_rev = [|s| = 1 ? p_new : (1 − p_new)/deg · 1{w ∈ N(m)}] · [t new ? 1 : 1/|t|]

satisfies detailed balance for every (j, w), hence for the partition chain (deg is m's, the
same both ways). w ∉ N(m) makes the reverse impossible: rejected without scoring. The
bookkeeping is O(1) (sizes, one binary search for w in m's sorted row); the score change is

    Δ = Σ_{x ∈ t} w(m, x) − Σ_{x ∈ s∖{m}} w(m, x),   w(m, x) = 0 for a non-candidate pair,

a sum over K = |s| − 1 + |t| member pairs, each found by binary search in m's row — or, with a
`pdbq.coref.tokens.TokenModel`, computed on demand for *every* member pair (the paper's model:
all pairs inside an entity are factors; the candidate graph then only shapes the proposals).
Every member pair scored counts as one factor evaluation (on stored scores a non-candidate pair
is looked up and scores 0; the witness lookup is part of the proposal and not counted). `SubsampleConfig` applies as in
`pdbq.inference.coreference.subsample`: exact (all K, in member order), uniform ⌈p·K⌉ or sequential to the
confidence rule, drawn without replacement by a sparse Fisher–Yates shuffle over 0..K−1 that
never touches the K positions it does not draw — so a subsampled step costs O(|S| log deg).

Layout. `Members` (one per chain, beside an `entity_moves.EntityState` whose linked lists stay
authoritative):
    pool   int32[4n + 16]  every entity's members in one block pool[off[e] : off[e] + size[e]]
    off    int64[n]        block start of entity e
    cap    int32[n]        block capacity (0: no block)
    idx    int32[n]        position of mention m inside its entity's block
    perm   int32[n]        sparse Fisher–Yates values (valid where stamp == meta[1])
    stamp  int64[n]
    meta   int64[2]        [0] first free pool slot, [1] draw epoch
Removal swaps the block's last member into the hole; a full block moves to the pool's end with
twice the capacity; when the pool runs out every block is rebuilt from the linked lists with
capacity 2·size (≤ 2n), which leaves room for any single block: amortised O(1) per update.
Split/merge steps (`entity_moves.split_merge_move`) update the linked lists only; the two
entities they touch get their blocks rebuilt after an accepted one.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pdbq.coref.layout import CorefInputError, PairGraph
from pdbq.coref.tokens import pair_score
from pdbq.inference.coreference.entity_moves import (
    C_ACCEPTED,
    C_EVALS,
    EntityState,
    _group_in,
    _accept,
    _link,
    _pop_free,
    _propose_mention,
    _unlink,
    split_merge_move,
)
from pdbq.inference.mcmc.rng import bounded, next_state, uniform
from pdbq.inference.coreference.subsample import decision_mean, stop_now, uniform_count

__all__ = ["Members", "check_members", "check_sorted_rows", "members_of", "pair_position", "run_witness_moves", "witness_move"]

_EXACT, _UNIFORM = 0.0, 1.0


class Members(NamedTuple):
    pool: np.ndarray
    off: np.ndarray
    cap: np.ndarray
    idx: np.ndarray
    perm: np.ndarray
    stamp: np.ndarray
    meta: np.ndarray


def members_of(st: EntityState) -> Members:
    """Member blocks for the clustering in `st` (built from its linked lists)."""
    n = st.label.shape[0]
    mb = Members(
        np.empty(4 * n + 16, np.int32), np.zeros(max(n, 1), np.int64), np.zeros(max(n, 1), np.int32),
        np.zeros(max(n, 1), np.int32), np.zeros(max(n, 1), np.int32), np.full(max(n, 1), -1, np.int64),
        np.zeros(2, np.int64),
    )
    _compact(st, mb)
    return mb


def check_sorted_rows(g: PairGraph) -> PairGraph:
    """The witness moves binary-search rows: raise `CorefInputError` unless every row of the
    graph is strictly increasing (as `pdbq.coref.layout.pair_graph` builds it)."""
    if g.nbr.size > 1:
        rising = np.diff(g.nbr.astype(np.int64)) > 0
        starts = g.indptr[1:-1]
        starts = starts[(starts > 0) & (starts < g.nbr.size)]
        rising[starts - 1] = True  # a new row may start lower
        if not rising.all():
            raise CorefInputError("PairGraph rows must be sorted and free of duplicates for proposal = 'witness'")
    return g


@njit(cache=True)
def _compact(st, mb):
    """Rebuild every block from the linked lists, capacity max(2, 2·size), from pool slot 0."""
    n = st.label.shape[0]
    top = 0
    for e in range(n):
        sz = st.size[e]
        if sz == 0:
            mb.cap[e] = 0
            continue
        mb.off[e] = top
        mb.cap[e] = max(2, 2 * sz)
        k = 0
        x = st.head[e]
        while x >= 0:
            mb.pool[top + k] = x
            mb.idx[x] = k
            k += 1
            x = st.nxt[x]
        top += mb.cap[e]
    mb.meta[0] = top


@njit(cache=True)
def _grow(st, mb, e, need, keep):
    """Give entity e a block of capacity >= need at the pool's end, copying its `keep` current
    members (compacting when the pool is full: then every block is rebuilt from the lists)."""
    newcap = max(4, 2 * need)
    if mb.meta[0] + newcap > mb.pool.shape[0]:
        _compact(st, mb)
        if mb.cap[e] >= need:
            return
    top = mb.meta[0]
    for k in range(keep):
        mb.pool[top + k] = mb.pool[mb.off[e] + k]
    mb.off[e] = top
    mb.cap[e] = newcap
    mb.meta[0] = top + newcap


@njit(cache=True, inline="always")
def _mb_remove(st, mb, m):
    """Take m out of its entity's block (call before `_unlink`)."""
    e = st.label[m]
    last = mb.pool[mb.off[e] + st.size[e] - 1]
    i = mb.idx[m]
    mb.pool[mb.off[e] + i] = last
    mb.idx[last] = i
    if st.size[e] == 1:
        mb.cap[e] = 0


@njit(cache=True, inline="always")
def _mb_add(st, mb, m, e):
    """Append m to entity e's block (call before `_link`, with m in no linked list)."""
    sz = st.size[e]
    if sz >= mb.cap[e]:
        _grow(st, mb, e, sz + 1, sz)
    mb.pool[mb.off[e] + sz] = m
    mb.idx[m] = sz


@njit(cache=True)
def _rebuild(st, mb, e):
    """Entity e's block from its linked list (after a split/merge step changed it)."""
    sz = st.size[e]
    if sz == 0:
        mb.cap[e] = 0
        return
    if mb.cap[e] < sz:
        _grow(st, mb, e, sz, 0)
    k = 0
    x = st.head[e]
    while x >= 0:
        mb.pool[mb.off[e] + k] = x
        mb.idx[x] = k
        k += 1
        x = st.nxt[x]


@njit(cache=True, inline="always")
def pair_position(g, m, x):
    """CSR position of the pair (m, x) in m's sorted row, or −1 when it is not a candidate."""
    lo = g.indptr[m]
    hi = g.indptr[m + 1]
    while lo < hi:
        mid = (lo + hi) >> 1
        v = g.nbr[mid]
        if v < x:
            lo = mid + 1
        elif v > x:
            hi = mid
        else:
            return mid
    return -1


@njit(cache=True, inline="always")
def _factor(g, tm, st, mb, m, s, t, ns, r):
    """Signed score of the r-th changed member pair: r < ns are s∖{m} (−), the rest t (+).
    With a token model (tm has fields) the pair is scored now from the token sets, else its
    stored score is looked up (0 for a non-candidate pair)."""
    if r < ns:
        p = r if r < mb.idx[m] else r + 1
        x = mb.pool[mb.off[s] + p]
        sign = -1.0
    else:
        x = mb.pool[mb.off[t] + r - ns]
        sign = 1.0
    if tm.weight.shape[0] > 0:
        return sign * pair_score(tm, m, x)
    e = pair_position(g, m, x)
    return sign * g.score[e] if e >= 0 else 0.0


@njit(cache=True, inline="always")
def _sparse_draw(mb, k, r, srng):
    """Position drawn uniformly from r..k−1 of a lazily initialised permutation of 0..k−1
    (one Fisher–Yates step touching two entries; stale entries read as the identity)."""
    srng = next_state(srng)
    q = r + bounded(srng, k - r)
    ep = mb.meta[1]
    vq = mb.perm[q] if mb.stamp[q] == ep else q
    vr = mb.perm[r] if mb.stamp[r] == ep else r
    mb.perm[q] = vr
    mb.stamp[q] = ep
    return srng, vq


@njit(cache=True)
def _estimate(g, tm, st, mb, sub, m, s, t, ns, k, rng, temp, lqr):
    """(estimated Δ, member pairs scored) — the rules of `subsample.estimate_delta` over the k
    member pairs of a witness move."""
    mode = sub.params[0]
    if mode == _EXACT or k <= 1:
        total = 0.0
        for r in range(k):
            total += _factor(g, tm, st, mb, m, s, t, ns, r)
        return total, k
    mb.meta[1] += 1
    srng = sub.rng[0]
    if mode == _UNIFORM:
        c = uniform_count(sub.params[1], k)
        if c >= k:
            total = 0.0
            for r in range(k):
                total += _factor(g, tm, st, mb, m, s, t, ns, r)
            return total, k
        total = 0.0
        for r in range(c):
            srng, q = _sparse_draw(mb, k, r, srng)
            total += _factor(g, tm, st, mb, m, s, t, ns, q)
        sub.rng[0] = srng
        return total * (k / c), c
    decide = sub.params[3] != 0.0
    mu0 = decision_mean(rng, temp, lqr, k) if decide else 0.0
    mean = 0.0
    m2 = 0.0
    c = 0
    for r in range(k):
        srng, q = _sparse_draw(mb, k, r, srng)
        x = _factor(g, tm, st, mb, m, s, t, ns, q)
        c = r + 1
        d = x - mean
        mean += d / c
        m2 += d * (x - mean)
        if stop_now(c, k, mean, m2, sub.params[2], decide, mu0):
            break
    sub.rng[0] = srng
    return mean * k, c


@njit(cache=True, inline="always")
def witness_move(g, tm, st, mb, sc, rng, temp, p_new, counters, log_score):
    """One witness mention move (module docstring). Returns the advanced move stream."""
    rng, m, s, t, lo, deg, pn, to_new, noop = _propose_mention(g, st, rng, p_new, counters)
    if noop:
        return rng
    if not to_new and sc.group[m] >= 0 and _group_in(st, sc.group, sc.group[m], t):
        return rng  # cannot-link (entity_moves): rejected unscored
    ns = st.size[s] - 1
    if ns > 0:
        rng = next_state(rng)
        r = bounded(rng, ns)
        w = mb.pool[mb.off[s] + (r if r < mb.idx[m] else r + 1)]
        if pair_position(g, m, w) < 0:  # the reverse move cannot pick w: rejected unscored
            return rng
        log_q = np.log((1.0 - pn) / deg) + np.log(ns)
    else:
        log_q = np.log(pn)
    if to_new:
        nt = 0
        log_q -= np.log(pn)
    else:
        nt = st.size[t]
        log_q -= np.log((1.0 - pn) / deg) + np.log(nt)
    delta, used = _estimate(g, tm, st, mb, sc.sub, m, s, t, ns, ns + nt, rng, temp, log_q)
    counters[C_EVALS] += used
    rng, ok = _accept(rng, delta, log_q, temp, to_new)
    if ok:
        _mb_remove(st, mb, m)
        _unlink(st, m)
        if to_new:
            t = _pop_free(st)
        _mb_add(st, mb, m, t)
        _link(st, m, t)
        counters[C_ACCEPTED] += 1
        log_score[0] += delta
    return rng


@njit(cache=True, nogil=True)
def run_witness_moves(g, tm, st, mb, sc, rng_state, n_steps, temp, p_new, p_split_merge, counters, log_score):
    """`n_steps` MH steps: a split/merge move (`entity_moves.split_merge_move`) with probability
    p_split_merge, else a witness mention move; rng_state uint64[1] advanced in place. `tm` is a
    `pdbq.coref.tokens.TokenModel` scoring every member pair on demand, or one without fields
    (`empty_token_model()`) for the graph's stored scores; split/merge steps score the graph's
    stored pairs, so callers run them (p_split_merge > 0) only without a token model."""
    rng = rng_state[0]
    n = st.label.shape[0]
    for _ in range(n_steps):
        if p_split_merge > 0.0:
            rng = next_state(rng)
            if uniform(rng) < p_split_merge:
                # the mentions split_merge_move will pick (its first two draws), to find the
                # entities whose blocks an accepted move changes
                r1 = next_state(rng)
                i = bounded(r1, n)
                lo = g.indptr[i]
                deg = g.indptr[i + 1] - lo
                before = counters[C_ACCEPTED]
                a = st.label[i]
                b = a
                if deg > 0:
                    b = st.label[g.nbr[lo + bounded(next_state(r1), deg)]]
                rng = split_merge_move(g, st, sc, rng, temp, counters, log_score)
                if counters[C_ACCEPTED] != before:
                    _rebuild(st, mb, a)
                    if b != a:
                        _rebuild(st, mb, b)
                    else:
                        j = g.nbr[lo + bounded(next_state(r1), deg)]
                        _rebuild(st, mb, st.label[j])
                continue
        rng = witness_move(g, tm, st, mb, sc, rng, temp, p_new, counters, log_score)
    rng_state[0] = rng


@njit(cache=True)
def _check_members_kernel(st, mb):
    n = st.label.shape[0]
    top = mb.meta[0]
    for m in range(n):
        e = st.label[m]
        if mb.cap[e] < st.size[e] or mb.off[e] + mb.cap[e] > top:
            return 1
        if mb.idx[m] >= st.size[e] or mb.pool[mb.off[e] + mb.idx[m]] != m:
            return 2
    return 0


def check_members(st: EntityState, mb: Members) -> None:
    """Raise ValueError unless every mention sits at its recorded place in its entity's block."""
    code = _check_members_kernel(st, mb)
    if code:
        raise ValueError(f"invalid member blocks (code {code})")
