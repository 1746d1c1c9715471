"""The cross-entropy-method split/merge proposer (seed 002, Algorithms 2–3, Eq. 10–11).

A parameterised split/merge proposal over the current clustering Y of a `PairGraph`:

    J(Y; λ) = β · Q_split(E | Y) + (1 − β) · Q_merge(E, F | Y)
    Q_split(E) ∝ exp(λ_s · φ_w(E))         over entities with ≥ 2 members
    Q_merge(E, F) ∝ exp(λ_m · φ_b(E, F))   over entity pairs joined by ≥ 1 candidate pair

φ_w(E) (within-entity *disparity*): [min, mean of the within-entity pair scores, fraction of them
< 0, log |E|]; φ_b(E, F) (between-entity *affinity*): [max, mean of the cross pair scores,
fraction of them > 0, log |E||F|]. λ = 0 is the uniform split/merge proposer. A chosen entity is
split as the entity-move kernels split (`pdbq.inference.coreference.entity_moves`: two anchors, the other
members allocated sequentially ∝ exp(affinity to each side)); a merge joins the two entities.

`cem_optimize` (Algorithm 2) draws N jumps from J(Y_t; λ), keeps the top ρ by a performance
F (the model score change Δψ, or the change in B³ F1 against a gold clustering), and refits λ by
maximum likelihood of the elite jumps under J (a concave multinomial-logit fit, by damped
Newton steps, with a small L2 term so separable elites keep λ finite), smoothed:
λ ← α λ̄ + (1 − α) λ. `cem_decode` (Algorithm 3, with the experiment protocol of seed 002 §5)
hill-climbs ψ: every `learn_every` steps it runs `iterations` CEM rounds of `samples` jumps and
proposes the best of them, other steps the best of `per_step` jumps; a jump is taken when it
raises ψ. The uniform baseline draws as many jumps at the same steps with λ = 0 (seed 002 gives
it the same samples). Both count *jumps* (taken moves) and *proposals* (jumps drawn) until the
clustering reaches a target B³ F1 against the gold clustering.

Entity statistics are recomputed after every jump in O(candidate pairs) (numba), so this is for
small and medium sets (the comparison), not for the 1M-mention path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from pdbq.coref.layout import PairGraph, validate_pair_graph
from pdbq.coref.metrics import b_cubed
from pdbq.errors import LearningError, OptionError
from pdbq.inference.coreference.entity_moves import _allocate, _clear_sides, _members_shuffled, new_scratch, state_from_labels
from pdbq.inference.mcmc.rng import chain_states

__all__ = ["CEMConfig", "DecodeResult", "EntityStats", "entity_stats", "cem_optimize", "cem_decode"]

N_FEAT = 4


@dataclass(frozen=True)
class CEMConfig:
    """beta: P(split) in the mixture (Eq. 10); samples: N jumps per CEM round; iterations: CEM
    rounds per learning step; rho: elite fraction; alpha: smoothing of λ; reg: L2 weight of the
    λ fit; learn_every: a learning step every this many steps (others draw `per_step` jumps);
    target: the B³ F1 to reach; max_steps: give up after this many steps; performance:
    ``'model'`` (Δψ) or ``'gold'`` (ΔB³ F1) for the elite; seed: the random stream."""

    beta: float = 0.5
    samples: int = 50
    iterations: int = 20
    rho: float = 0.1
    alpha: float = 0.7
    reg: float = 0.1
    learn_every: int = 5
    per_step: int = 5
    target: float = 0.95
    max_steps: int = 10_000
    performance: str = "model"
    seed: int = 0

    def check(self) -> CEMConfig:
        for name in ("samples", "iterations", "learn_every", "per_step", "max_steps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise OptionError(f"option '{name}' must be a positive integer, got {v!r}")
        for name in ("beta", "rho", "alpha", "target"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
                raise OptionError(f"option '{name}' must be a number in [0, 1], got {v!r}")
        if not (isinstance(self.reg, (int, float)) and self.reg > 0):
            raise OptionError(f"option 'reg' must be a positive number, got {self.reg!r}")
        if self.performance not in ("model", "gold"):
            raise OptionError(f"option 'performance' must be 'model' or 'gold', got {self.performance!r}")
        return self


@dataclass(frozen=True, eq=False)
class EntityStats:
    """Per state: split candidates `ents` with features `fw` (rows), merge candidates
    (`ea`, `eb`) with features `fb` and their score change `gain` (Σ cross pair scores)."""

    ents: np.ndarray
    fw: np.ndarray
    ea: np.ndarray
    eb: np.ndarray
    fb: np.ndarray
    gain: np.ndarray


@njit(cache=True)
def _within(indptr, nbr, score, label, n_ent):
    """Per entity id: within-pair count, sum, min, negatives (each unordered pair once)."""
    cnt = np.zeros(n_ent, np.int64)
    tot = np.zeros(n_ent)
    lo = np.full(n_ent, np.inf)
    neg = np.zeros(n_ent)
    for m in range(indptr.shape[0] - 1):
        for e in range(indptr[m], indptr[m + 1]):
            j = nbr[e]
            if j > m and label[j] == label[m]:
                k = label[m]
                cnt[k] += 1
                tot[k] += score[e]
                if score[e] < lo[k]:
                    lo[k] = score[e]
                if score[e] < 0:
                    neg[k] += 1
    return cnt, tot, lo, neg


@njit(cache=True)
def _cross_edges(indptr, nbr, score, label):
    """The cross-entity pairs (each once) as (entity a < entity b, score)."""
    k = 0
    for m in range(indptr.shape[0] - 1):
        for e in range(indptr[m], indptr[m + 1]):
            if nbr[e] > m and label[nbr[e]] != label[m]:
                k += 1
    a = np.empty(k, np.int64)
    b = np.empty(k, np.int64)
    s = np.empty(k)
    k = 0
    for m in range(indptr.shape[0] - 1):
        for e in range(indptr[m], indptr[m + 1]):
            j = nbr[e]
            if j > m and label[j] != label[m]:
                la = label[m]
                lb = label[j]
                a[k] = min(la, lb)
                b[k] = max(la, lb)
                s[k] = score[e]
                k += 1
    return a, b, s


def entity_stats(g: PairGraph, label: np.ndarray) -> EntityStats:
    """The split and merge candidates of clustering `label` (int32 entity ids < n) and their
    features (module docstring)."""
    n = label.shape[0]
    size = np.bincount(label, minlength=n)
    cnt, tot, lo, neg = _within(g.indptr, g.nbr, g.score, label, n)
    ents = np.flatnonzero(size >= 2)
    c = np.maximum(cnt[ents], 1)
    fw = np.column_stack([
        np.where(cnt[ents] > 0, lo[ents], 0.0), tot[ents] / c, neg[ents] / c, np.log(size[ents]),
    ])
    a, b, s = _cross_edges(g.indptr, g.nbr, g.score, label)
    if a.size:
        key = a * n + b
        uk, inv = np.unique(key, return_inverse=True)
        inv = inv.reshape(-1)
        gain = np.bincount(inv, weights=s)
        k = np.bincount(inv).astype(np.float64)
        hi = np.full(uk.size, -np.inf)
        np.maximum.at(hi, inv, s)
        pos = np.bincount(inv, weights=(s > 0).astype(np.float64))
        ea, eb = uk // n, uk % n
        fb = np.column_stack([hi, gain / k, pos / k, np.log(size[ea] * size[eb])])
    else:
        ea = eb = np.zeros(0, np.int64)
        gain = np.zeros(0)
        fb = np.zeros((0, N_FEAT))
    return EntityStats(ents, fw, ea, eb, fb, gain)


def _softmax(f: np.ndarray, lam: np.ndarray) -> np.ndarray:
    z = f @ lam
    z = z - z.max()
    p = np.exp(z)
    return p / p.sum()


def _normalise(f: np.ndarray) -> np.ndarray:
    """Features standardised within the candidate set (λ then generalises across states)."""
    if f.shape[0] == 0:
        return f
    sd = f.std(axis=0)
    return (f - f.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


@njit(cache=True)
def _split_entity(g, st, sc, rng_state, e, i, j):
    """Split entity e as the split/merge kernel does (i and j on different sides, the other
    members allocated sequentially in random order). Returns (members of j's side, Δψ); the
    state is unchanged."""
    rng, km = _members_shuffled(st, sc, rng_state[0], e, e, i, j)
    counters = np.zeros(4, np.int64)
    rng, _ = _allocate(g, st, sc, rng, i, j, e, e, km, True, counters)
    rng_state[0] = rng
    out = np.empty(km + 2, np.int64)
    n_out = 0
    delta = 0.0
    x = st.head[e]
    while x >= 0:
        if sc.side[x] == 1:
            out[n_out] = x
            n_out += 1
            for ed in range(g.indptr[x], g.indptr[x + 1]):
                y = g.nbr[ed]
                if st.label[y] == e and sc.side[y] == 0:
                    delta -= g.score[ed]
        x = st.nxt[x]
    _clear_sides(sc, i, j, km)
    return out[:n_out], delta


class _Walker:
    """Current clustering, its candidates, and jump sampling under λ = (λ_s, λ_m)."""

    def __init__(self, g: PairGraph, label: np.ndarray, gold: np.ndarray, beta: float, rng_state: np.ndarray):
        self.g = g
        self.label = np.asarray(label, dtype=np.int32).copy()
        self.gold = gold
        self.beta = beta
        self.rng_state = rng_state
        self.sc = new_scratch(g)
        self.gen = np.random.default_rng(int(rng_state[0] >> np.uint64(1)))
        self.refresh()

    def refresh(self) -> None:
        self.state = state_from_labels(self.label)
        self.label = self.state.label  # dense entity ids
        self.st = entity_stats(self.g, self.label)
        self.fw = _normalise(self.st.fw)
        self.fb = _normalise(self.st.fb)
        order = np.argsort(self.label, kind="stable")
        self.bounds = np.searchsorted(self.label[order], np.arange(self.label.shape[0] + 1))
        self.order = order

    def members(self, e: int) -> np.ndarray:
        return self.order[self.bounds[e]:self.bounds[e + 1]]

    def draw(self, lam_s: np.ndarray, lam_m: np.ndarray, k: int) -> list[tuple]:
        """k jumps: (kind, candidate index, members moved or None, Δψ)."""
        out = []
        n_s, n_m = self.st.ents.size, self.st.ea.size
        if n_s + n_m == 0:
            return out
        ps = _softmax(self.fw, lam_s) if n_s else None
        pm = _softmax(self.fb, lam_m) if n_m else None
        beta = self.beta if (n_s and n_m) else (1.0 if n_s else 0.0)
        for _ in range(k):
            if self.gen.random() < beta:
                c = int(self.gen.choice(n_s, p=ps))
                e = int(self.st.ents[c])
                mem = self.members(e)
                ii, jj = self.gen.choice(mem.size, size=2, replace=False)
                moved, d = _split_entity(self.g, self.state, self.sc, self.rng_state, e, int(mem[ii]), int(mem[jj]))
                out.append(("split", c, moved, d))
            else:
                c = int(self.gen.choice(n_m, p=pm))
                out.append(("merge", c, None, float(self.st.gain[c])))
        return out

    def apply(self, jump) -> None:
        kind, c, moved, _ = jump
        if kind == "split":
            self.label = self.label.copy()
            self.label[moved] = self.label.shape[0]
        else:
            a, b = int(self.st.ea[c]), int(self.st.eb[c])
            self.label = np.where(self.label == b, a, self.label)
        self.refresh()

    def gold_delta(self, jump) -> float:
        before = b_cubed(self.label, self.gold).f1
        lab = self.label.copy()
        kind, c, moved, _ = jump
        if kind == "split":
            lab[moved] = self.label.shape[0]
        else:
            lab[lab == int(self.st.eb[c])] = int(self.st.ea[c])
        return b_cubed(lab, self.gold).f1 - before


def _fit(f: np.ndarray, chosen: np.ndarray, lam: np.ndarray, reg: float) -> np.ndarray:
    """argmax_λ Σ_elite log softmax(fλ)[chosen] − reg/2 |λ|² by damped Newton steps."""
    if chosen.size == 0 or f.shape[0] == 0:
        return lam
    x = lam.copy()
    target = f[chosen].sum(axis=0)
    m = chosen.size
    for _ in range(25):
        p = _softmax(f, x)
        mean = p @ f
        grad = target - m * mean - reg * x
        cov = (f * p[:, None]).T @ f - np.outer(mean, mean)
        h = m * cov + reg * np.eye(f.shape[1])
        step = np.linalg.solve(h, grad)
        x = x + np.clip(step, -2.0, 2.0)
        if np.abs(step).max() < 1e-6:
            break
    return x


def cem_optimize(w: _Walker, lam_s: np.ndarray, lam_m: np.ndarray, config: CEMConfig):
    """Algorithm 2 at the walker's current state; returns (λ_s, λ_m, all jumps drawn)."""
    pool = []
    for _ in range(config.iterations):
        jumps = w.draw(lam_s, lam_m, config.samples)
        if not jumps:
            break
        pool.extend(jumps)
        perf = np.array([j[3] if config.performance == "model" else w.gold_delta(j) for j in jumps])
        gamma = np.quantile(perf, 1.0 - config.rho)
        elite = [j for j, p in zip(jumps, perf) if p >= gamma]
        cs = np.array([j[1] for j in elite if j[0] == "split"], dtype=np.int64)
        cm = np.array([j[1] for j in elite if j[0] == "merge"], dtype=np.int64)
        if cs.size:
            lam_s = config.alpha * _fit(w.fw, cs, lam_s, config.reg) + (1 - config.alpha) * lam_s
        if cm.size:
            lam_m = config.alpha * _fit(w.fb, cm, lam_m, config.reg) + (1 - config.alpha) * lam_m
    return lam_s, lam_m, pool


@dataclass(frozen=True, eq=False)
class DecodeResult:
    labels: np.ndarray
    reached: bool  # the target B³ F1 was reached
    jumps: int  # taken moves until the target (or the end)
    proposals: int  # jumps drawn until then
    steps: int
    b3: float
    lam_split: np.ndarray
    lam_merge: np.ndarray


def cem_decode(g: PairGraph, gold: np.ndarray, config: CEMConfig = CEMConfig(), *, adaptive: bool = True,
               initial: np.ndarray | None = None) -> DecodeResult:
    """Hill-climb ψ with the CEM proposer (``adaptive``) or the uniform split/merge proposer
    (λ fixed at 0, the same number of jumps drawn per step) from ``initial`` (default:
    singletons) until B³ F1 against ``gold`` reaches ``config.target``."""
    config = config.check()
    validate_pair_graph(g)
    n = g.n_mentions
    gold = np.asarray(gold)
    if gold.shape != (n,):
        raise LearningError(f"gold needs one label per mention ({n}), got shape {gold.shape}")
    label = np.arange(n) if initial is None else np.unique(np.asarray(initial), return_inverse=True)[1].reshape(-1)
    if label.shape != (n,):
        raise LearningError(f"initial needs one label per mention ({n})")
    rng_state = chain_states(config.seed, 1)[:1].copy()
    w = _Walker(g, label, gold, config.beta, rng_state)
    lam_s = np.zeros(N_FEAT)
    lam_m = np.zeros(N_FEAT)
    jumps = proposals = 0
    b3 = b_cubed(w.label, gold).f1
    step = 0
    stuck = 0
    while b3 < config.target and step < config.max_steps:
        if step % config.learn_every == 0:
            if adaptive:
                lam_s, lam_m, pool = cem_optimize(w, lam_s, lam_m, config)
            else:
                pool = w.draw(lam_s, lam_m, config.samples * config.iterations)
        else:
            pool = w.draw(lam_s, lam_m, config.per_step)
        step += 1
        proposals += len(pool)
        if not pool:
            break
        best = max(pool, key=lambda j: j[3])
        if best[3] > 1e-12:
            w.apply(best)
            jumps += 1
            b3 = b_cubed(w.label, gold).f1
            stuck = 0
        else:
            stuck += 1
            if stuck >= 4 * config.learn_every:  # a local maximum of ψ
                break
    return DecodeResult(w.label.astype(np.int64), b3 >= config.target, jumps, proposals, step, b3, lam_s, lam_m)
