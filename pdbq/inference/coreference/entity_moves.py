"""Entity moves for coreference: Metropolis–Hastings over partitions of mentions (seeds 000–002).

Target: π(y) ∝ exp(ψ(y) / τ) with ψ(y) = Σ over within-entity candidate pairs of their score
(`pdbq.coref.layout.PairGraph`). Each step is, with probability `p_split_merge`, a split/merge
move, otherwise a mention move; both are reversible, so their mixture is too.

Mention move. Pick a mention m uniformly. With probability p_new (1 when m has no candidate
neighbours) propose m as a new singleton, else pick one of m's candidate neighbours j uniformly
and propose m into j's entity t. Proposal probability of the move s → t: (1 − p_new)·c_t/deg(m)
with c_t = m's neighbours in t; of s → new: p_new. The reverse is m back into s\\{m}
((1 − p_new)·c_s/deg(m)), or to a new singleton when s = {m} (p_new).

Split/merge move (sequentially allocated merge-split, Dahl 2003). Pick a mention i uniformly
and a candidate neighbour j of i uniformly; the pick does not depend on the state, so each
(i, j) indexes its own reversible kernel. Draw a uniformly random order of the other members of
the entities of i and j. If i and j are in different entities A ∋ i, B ∋ j, propose the merge
A ∪ B; if in one entity M, propose a split of M: i on side 0, j on side 1, and every other
member, in the drawn order, on side s with probability ∝ exp(Σ scores to the members already
on side s). q(split)/q(merge) is that allocation's probability (for a merge: the probability
the allocation would have recreated A | B along the drawn order), so the MH ratio is exact.

Accept with min(1, exp(Δ/τ) · q_rev/q_fwd); τ = 0 is greedy (accept iff Δ > 0, or Δ = 0 for a
move that creates an entity).

Cannot-link groups (`Scratch.group`, −1 = none): two mentions of one group never share an
entity. A mention move into an entity holding a member of m's group, and a merge of two
entities with members of one group, are rejected before scoring. Both directions of every
remaining move stay possible (a split never creates a clash), so the chain is the same MH chain
restricted to the clusterings without a clash: its target is π conditioned on that set (it must
start inside it). Without groups every check is false and the chain is unchanged.

The score of every move is computed in two phases: the changed pair factors are *gathered*
(their CSR positions and signs: +1 a pair becomes within-entity, −1 it stops being), then
`pdbq.inference.coreference.subsample.estimate_delta` sums them — exactly (the default, bit-identical to
`score_changed`) or on a sample of them (seed 000, issue 15; `Scratch.sub` holds its config and
its own per-chain stream) — and reports how many it evaluated. Every gathered pair counts as one factor evaluation, and so
does every pair score the split/merge allocation reads.

Layouts. `EntityState` (one per chain, all int32[n] unless noted):
    label  entity id of each mention, in [0, n)
    size   members of each entity id (0: the id is free)
    head   first member of each entity id (−1: empty); members form a doubly linked list
    nxt    next member of the same entity (−1 at the end)
    prv    previous member (−1 at the head)
    free   stack of free entity ids; meta[0] is its height
    meta   int64[1]
`Scratch` (reused buffers): edges int64[cap], signs float64[cap] (cap ≥ the largest number of
pairs one move can change: nnz), side int8[n] (−1 outside a split/merge move), order int32[n], sub (`SubsampleState`), group int32[n] (cannot-link groups, −1 = none). `counters` int64[4]: factor evaluations,
proposals, accepted, no-op proposals. `log_score` float64[1]: the running ψ(y), updated by Δ.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pdbq.coref.layout import PairGraph
from pdbq.inference.mcmc.rng import bounded, next_state, uniform
from pdbq.inference.coreference.subsample import SubsampleState, estimate_delta, subsample_state

__all__ = [
    "EntityState",
    "Scratch",
    "new_state",
    "new_scratch",
    "state_from_labels",
    "score_changed",
    "mention_move",
    "split_merge_move",
    "step",
    "run_moves",
    "partition_score",
    "check_state",
    "check_groups",
    "C_EVALS",
    "C_PROPOSALS",
    "C_ACCEPTED",
    "C_NOOP",
]

C_EVALS, C_PROPOSALS, C_ACCEPTED, C_NOOP = 0, 1, 2, 3


class EntityState(NamedTuple):
    label: np.ndarray
    size: np.ndarray
    head: np.ndarray
    nxt: np.ndarray
    prv: np.ndarray
    free: np.ndarray
    meta: np.ndarray


class Scratch(NamedTuple):
    edges: np.ndarray
    signs: np.ndarray
    side: np.ndarray
    order: np.ndarray
    sub: SubsampleState
    group: np.ndarray


def new_scratch(g: PairGraph, sub: SubsampleState | None = None, group: np.ndarray | None = None) -> Scratch:
    """Buffers for the moves of `g`; `group` (int32[n], −1 = none): the cannot-link groups
    (module docstring), checked by the caller (`check_groups`)."""
    n = g.indptr.shape[0] - 1
    cap = max(int(g.nbr.shape[0]), 1)
    return Scratch(
        np.empty(cap, np.int64), np.empty(cap, np.float64), np.full(max(n, 1), -1, np.int8),
        np.empty(max(n, 1), np.int32), sub if sub is not None else subsample_state(),
        np.full(max(n, 1), -1, np.int32) if group is None else group,
    )


def check_groups(group, n: int) -> np.ndarray | None:
    """The cannot-link groups as int32[n] (None stays None); a `CorefInputError` otherwise."""
    from pdbq.coref.layout import CorefInputError  # noqa: PLC0415

    if group is None:
        return None
    arr = np.asarray(group)
    if arr.shape != (n,) or not np.issubdtype(arr.dtype, np.integer):
        raise CorefInputError(f"cannot_link must be an integer array with one group per mention ({n}), got "
                              f"{arr.dtype} of shape {arr.shape}")
    if arr.size and (arr.min() < -1 or arr.max() >= 2**31 - 1):
        raise CorefInputError("cannot_link groups must be −1 (none) or non-negative int32 values")
    return np.ascontiguousarray(arr, dtype=np.int32) if arr.size else np.full(1, -1, np.int32)


@njit(cache=True)
def _group_in(st, group, gm, e):
    """Whether entity e holds a member of cannot-link group gm (≥ 0)."""
    x = st.head[e]
    while x >= 0:
        if group[x] == gm:
            return True
        x = st.nxt[x]
    return False


@njit(cache=True)
def _groups_clash(st, group, a, b):
    """Whether some member of a and some member of b share a cannot-link group."""
    small = a if st.size[a] <= st.size[b] else b
    big = b if small == a else a
    x = st.head[small]
    while x >= 0:
        if group[x] >= 0 and _group_in(st, group, group[x], big):
            return True
        x = st.nxt[x]
    return False


def new_state(n: int) -> EntityState:
    """All mentions singletons (mention m in entity m)."""
    return state_from_labels(np.arange(n, dtype=np.int64))


def state_from_labels(labels: np.ndarray) -> EntityState:
    """The state of a given clustering; labels are any integers (equal = same entity)."""
    labels = np.asarray(labels)
    n = labels.shape[0]
    _, dense = np.unique(labels, return_inverse=True)
    st = EntityState(
        np.empty(n, np.int32), np.zeros(n, np.int32), np.full(n, -1, np.int32),
        np.full(n, -1, np.int32), np.full(n, -1, np.int32), np.empty(n, np.int32),
        np.zeros(1, np.int64),
    )
    _fill_state(dense.astype(np.int32).reshape(-1), st)
    return st


@njit(cache=True)
def _fill_state(dense, st):
    n = dense.shape[0]
    for m in range(n - 1, -1, -1):
        e = dense[m]
        st.label[m] = e
        h = st.head[e]
        st.nxt[m] = h
        st.prv[m] = -1
        if h >= 0:
            st.prv[h] = m
        st.head[e] = m
        st.size[e] += 1
    k = 0
    for e in range(n - 1, -1, -1):
        if st.size[e] == 0:
            st.free[k] = e
            k += 1
    st.meta[0] = k


@njit(cache=True, inline="always")
def _unlink(st, m):
    e = st.label[m]
    p = st.prv[m]
    q = st.nxt[m]
    if p >= 0:
        st.nxt[p] = q
    else:
        st.head[e] = q
    if q >= 0:
        st.prv[q] = p
    st.size[e] -= 1
    if st.size[e] == 0:
        st.free[st.meta[0]] = e
        st.meta[0] += 1


@njit(cache=True, inline="always")
def _link(st, m, e):
    h = st.head[e]
    st.nxt[m] = h
    st.prv[m] = -1
    if h >= 0:
        st.prv[h] = m
    st.head[e] = m
    st.size[e] += 1
    st.label[m] = e


@njit(cache=True, inline="always")
def _pop_free(st):
    st.meta[0] -= 1
    return st.free[st.meta[0]]


@njit(cache=True, inline="always")
def score_changed(score, edges, signs, k):
    """Σ_{i<k} signs[i]·score[edges[i]]: the score change of a move from its gathered pairs.

    The one place the changed pair factors are summed; a subsampled estimator replaces it."""
    total = 0.0
    for i in range(k):
        total += signs[i] * score[edges[i]]
    return total


@njit(cache=True, inline="always")
def _accept(rng, delta, log_q_ratio, temp, splits):
    """(rng, accepted) for an MH test at temperature temp. temp = 0 is greedy: accept iff
    delta > 0, or delta = 0 for a move that creates an entity (`splits`): a tie is broken
    toward the clustering that joins fewer mentions without evidence."""
    if temp <= 0.0:
        return rng, delta > 0.0 or (splits and delta == 0.0)
    a = delta / temp + log_q_ratio
    if a >= 0.0:
        return rng, True
    rng = next_state(rng)
    return rng, uniform(rng) < np.exp(a)


@njit(cache=True, inline="always")
def _propose_mention(g, st, rng, p_new, counters):
    """The proposal both mention moves share: a mention m of entity s, and either a new entity
    (``to_new``, probability ``pn``) or the entity t of one of m's pair neighbours. Returns
    (rng, m, s, t, lo, deg, pn, to_new, noop); ``noop``: the move changes nothing (counted)."""
    n = st.label.shape[0]
    rng = next_state(rng)
    m = bounded(rng, n)
    s = st.label[m]
    lo = g.indptr[m]
    deg = g.indptr[m + 1] - lo
    pn = p_new if deg > 0 else 1.0
    counters[C_PROPOSALS] += 1
    rng = next_state(rng)
    to_new = uniform(rng) < pn
    t = -1
    noop = False
    if not to_new:
        rng = next_state(rng)
        t = st.label[g.nbr[lo + bounded(rng, deg)]]
        noop = t == s
    else:
        noop = st.size[s] == 1
    if noop:
        counters[C_NOOP] += 1
    return rng, m, s, t, lo, deg, pn, to_new, noop


@njit(cache=True, inline="always")
def mention_move(g, st, sc, rng, temp, p_new, counters, log_score):
    """One mention move (module docstring). Returns the advanced rng state."""
    rng, m, s, t, lo, deg, pn, to_new, noop = _propose_mention(g, st, rng, p_new, counters)
    if noop:
        return rng
    if not to_new and sc.group[m] >= 0 and _group_in(st, sc.group, sc.group[m], t):
        return rng  # cannot-link: outside the state space, rejected unscored
    # gather: pairs (m, j) with j in s leave the entity, with j in t join it
    k = 0
    c_s = 0
    c_t = 0
    for e in range(lo, lo + deg):
        lj = st.label[g.nbr[e]]
        if lj == s:
            sc.edges[k] = e
            sc.signs[k] = -1.0
            k += 1
            c_s += 1
        elif lj == t:
            sc.edges[k] = e
            sc.signs[k] = 1.0
            k += 1
            c_t += 1
    if to_new:
        q_fwd = pn
    else:
        q_fwd = (1.0 - pn) * c_t / deg
    if st.size[s] == 1:
        q_rev = pn
    else:
        q_rev = (1.0 - pn) * c_s / deg if deg > 0 else 0.0
    if q_rev <= 0.0:  # the reverse move is impossible: rejected without scoring
        return rng
    lqr = np.log(q_rev / q_fwd)
    delta, used = estimate_delta(g.score, sc.edges, sc.signs, k, sc.sub, rng, temp, lqr)
    counters[C_EVALS] += used
    rng, ok = _accept(rng, delta, lqr, temp, to_new)
    if ok:
        _unlink(st, m)
        if to_new:
            t = _pop_free(st)
        _link(st, m, t)
        counters[C_ACCEPTED] += 1
        log_score[0] += delta
    return rng


@njit(cache=True)
def _allocate(g, st, sc, rng, i, j, a, b, k_members, sample, counters):
    """Sequential allocation (SAMS, Dahl 2003) of the members sc.order[:k_members] of a ∪ b
    (b = a for a split) to i's side (0) or j's side (1), each with probability ∝ exp(affinity
    to the members already placed). `sample`: draw the sides (split); else score the actual
    sides (label == a → 0) of a proposed merge. Returns (rng, log probability of the sides)."""
    sc.side[i] = 0
    sc.side[j] = 1
    logq = 0.0
    for r in range(k_members):
        x = sc.order[r]
        aff0 = 0.0
        aff1 = 0.0
        lo = g.indptr[x]
        hi = g.indptr[x + 1]
        for e in range(lo, hi):
            y = g.nbr[e]
            ly = st.label[y]
            if (ly == a or ly == b) and sc.side[y] >= 0:
                if sc.side[y] == 0:
                    aff0 += g.score[e]
                else:
                    aff1 += g.score[e]
        counters[C_EVALS] += hi - lo
        top = max(aff0, aff1)
        lse = top + np.log(np.exp(aff0 - top) + np.exp(aff1 - top))
        if sample:
            rng = next_state(rng)
            side = 0 if uniform(rng) < np.exp(aff0 - lse) else 1
        else:
            side = 0 if st.label[x] == a else 1
        sc.side[x] = side
        logq += (aff0 if side == 0 else aff1) - lse
    return rng, logq


@njit(cache=True)
def _members_shuffled(st, sc, rng, a, b, i, j):
    """Members of a (and b ≠ a) except i and j into sc.order, in uniformly random order."""
    k = 0
    x = st.head[a]
    while x >= 0:
        if x != i and x != j:
            sc.order[k] = x
            k += 1
        x = st.nxt[x]
    if b != a:
        x = st.head[b]
        while x >= 0:
            if x != i and x != j:
                sc.order[k] = x
                k += 1
            x = st.nxt[x]
    for r in range(k - 1, 0, -1):
        rng = next_state(rng)
        q = bounded(rng, r + 1)
        t = sc.order[r]
        sc.order[r] = sc.order[q]
        sc.order[q] = t
    return rng, k


@njit(cache=True)
def _clear_sides(sc, i, j, k):
    sc.side[i] = -1
    sc.side[j] = -1
    for r in range(k):
        sc.side[sc.order[r]] = -1


@njit(cache=True)
def split_merge_move(g, st, sc, rng, temp, counters, log_score):
    """One split/merge move (module docstring). Returns the advanced rng state."""
    n = st.label.shape[0]
    rng = next_state(rng)
    i = bounded(rng, n)
    lo = g.indptr[i]
    deg = g.indptr[i + 1] - lo
    counters[C_PROPOSALS] += 1
    if deg == 0:
        counters[C_NOOP] += 1
        return rng
    rng = next_state(rng)
    j = g.nbr[lo + bounded(rng, deg)]
    a = st.label[i]
    b = st.label[j]
    rng, km = _members_shuffled(st, sc, rng, a, b, i, j)
    k = 0
    if a != b and _groups_clash(st, sc.group, a, b):
        return rng  # cannot-link: the merged entity is outside the state space
    if a != b:
        # merge: the reverse split's probability along the drawn order, then the cross pairs
        rng, log_alloc = _allocate(g, st, sc, rng, i, j, a, b, km, False, counters)
        _clear_sides(sc, i, j, km)
        small = a
        big = b
        if st.size[a] > st.size[b]:
            small = b
            big = a
        x = st.head[small]
        while x >= 0:
            for e in range(g.indptr[x], g.indptr[x + 1]):
                if st.label[g.nbr[e]] == big:
                    sc.edges[k] = e
                    sc.signs[k] = 1.0
                    k += 1
            x = st.nxt[x]
        delta, used = estimate_delta(g.score, sc.edges, sc.signs, k, sc.sub, rng, temp, log_alloc)
        counters[C_EVALS] += used
        rng, ok = _accept(rng, delta, log_alloc, temp, False)
        if ok:
            x = st.head[small]
            while x >= 0:
                nx = st.nxt[x]
                _unlink(st, x)
                _link(st, x, big)
                x = nx
            counters[C_ACCEPTED] += 1
            log_score[0] += delta
        return rng
    # split entity a: i on side 0, j on side 1, the rest allocated sequentially
    rng, log_alloc = _allocate(g, st, sc, rng, i, j, a, a, km, True, counters)
    x = st.head[a]
    while x >= 0:
        if sc.side[x] == 0:
            for e in range(g.indptr[x], g.indptr[x + 1]):
                y = g.nbr[e]
                if st.label[y] == a and sc.side[y] == 1:
                    sc.edges[k] = e
                    sc.signs[k] = -1.0
                    k += 1
        x = st.nxt[x]
    delta, used = estimate_delta(g.score, sc.edges, sc.signs, k, sc.sub, rng, temp, -log_alloc)
    counters[C_EVALS] += used
    rng, ok = _accept(rng, delta, -log_alloc, temp, True)
    if ok:
        c = _pop_free(st)
        x = st.head[a]
        while x >= 0:
            nx = st.nxt[x]
            if sc.side[x] == 1:
                _unlink(st, x)
                _link(st, x, c)
            x = nx
        counters[C_ACCEPTED] += 1
        log_score[0] += delta
    _clear_sides(sc, i, j, km)
    return rng


@njit(cache=True, inline="always")
def step(g, st, sc, rng, temp, p_new, p_split_merge, counters, log_score):
    """One MH step: a split/merge move with probability p_split_merge, else a mention move."""
    if p_split_merge > 0.0:
        rng = next_state(rng)
        if uniform(rng) < p_split_merge:
            return split_merge_move(g, st, sc, rng, temp, counters, log_score)
    return mention_move(g, st, sc, rng, temp, p_new, counters, log_score)


@njit(cache=True, nogil=True)  # nogil: partitions of a distributed round run on threads
def run_moves(g, st, sc, rng_state, n_steps, temp, p_new, p_split_merge, counters, log_score):
    """`n_steps` MH steps at temperature `temp`; the chain's stream is rng_state[0] (uint64[1],
    advanced in place, so a Python caller never round-trips the state through a Python int)."""
    rng = rng_state[0]
    for _ in range(n_steps):
        rng = step(g, st, sc, rng, temp, p_new, p_split_merge, counters, log_score)
    rng_state[0] = rng


@njit(cache=True)
def partition_score(g, label):
    """ψ(y): the sum of the scores of within-entity candidate pairs (each pair once)."""
    n = label.shape[0]
    total = 0.0
    for m in range(n):
        for e in range(g.indptr[m], g.indptr[m + 1]):
            j = g.nbr[e]
            if j > m and label[j] == label[m]:
                total += g.score[e]
    return total


@njit(cache=True)
def _check_kernel(st):
    n = st.label.shape[0]
    seen = 0
    count = np.zeros(n, np.int64)
    for e in range(n):
        x = st.head[e]
        prev = -1
        while x >= 0:
            if st.label[x] != e or st.prv[x] != prev:
                return 1
            count[e] += 1
            seen += 1
            if seen > n:
                return 2
            prev = x
            x = st.nxt[x]
        if count[e] != st.size[e]:
            return 3
    if seen != n:
        return 4
    nfree = 0
    for e in range(n):
        if st.size[e] == 0:
            nfree += 1
    if nfree != st.meta[0]:
        return 5
    for k in range(st.meta[0]):
        if st.size[st.free[k]] != 0:
            return 6
    return 0


def check_state(st: EntityState) -> None:
    """Raise ValueError unless the lists, sizes, labels and free stack describe one partition."""
    code = _check_kernel(st)
    if code:
        raise ValueError(f"invalid entity state (code {code})")
