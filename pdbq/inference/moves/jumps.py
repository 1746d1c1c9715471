"""Mode jumps: Metropolis moves between local modes found during burn-in.

A model with a dense, strongly coupled core (UAI DBN_11: a complete bipartite 20 × 20 core with
couplings up to |J| = 12) has a few modes that differ in most of its variables; single-site moves
never cross between them, exact blocks cannot hold the core, and replica exchange crosses only
as often as a hot copy finds the other mode and survives the swaps down the ladder.

Given R stored states m_0 … m_{R−1} (local modes), σ_ab is the map that, on every sampled
variable where m_a and m_b differ, exchanges the values m_a[v] and m_b[v] (a variable holding
neither keeps its value); σ_ab = σ_ba and σ_ab ∘ σ_ab = id. A jump from state x:

1. a = the stored mode nearest x (Hamming distance over the sampled variables, ties to the lower
   index: a function of x alone);
2. b uniform among the other R − 1 modes;
3. x' = σ_ab(x); rejected outright unless the mode nearest x' is b;
4. accepted with probability min(1, exp(β · (E(x') − E(x)))).

The move x → x' is proposed with probability 1/(R − 1), and so is x' → x (nearest(x') = b,
partner a, σ_ba(x') = x, nearest(x) = a), so the Metropolis ratio has no proposal term and
p_β(x) ∝ exp(β · E(x)) stays invariant (E the energy of docs/factors.md with zero entries clamped
as in the kernels, the same as the swaps of `tempering`). A state in mode a goes to the matching
state of mode b with its thermal fluctuations kept, so a jump is accepted about as often as the
two modes' masses allow. Anchoring at the nearest mode matters: with R modes in a few families,
an unanchored pair (a, b) chosen uniformly rarely starts at the mode the state is in.

The stored states are *local modes*: states met during burn-in, each made a fixed point of
iterated conditional modes (`quench`), of which the ``max_modes`` with the highest energy are
kept (`ModePool`). They change during burn-in only; afterwards the jump set is fixed, so the
sampled chain is a time-homogeneous Markov chain (as the tempering ladder, which also adapts in
burn-in only).

>>> import numpy as np
>>> js = jump_set([np.array([0, 1, 1], dtype=np.uint8), np.array([1, 0, 1], dtype=np.uint8)], np.ones(3, bool))
>>> js.n_modes, js.movable.tolist(), js.off.tolist(), js.var.tolist()
(2, [0, 1, 2], [0, 0, 2, 2, 2], [0, 1])
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from pdbq.errors import InferenceError
from pdbq.inference.mcmc.kernels import ChainState, greedy_sweep, group_sums_into, log_score_kernel
from pdbq.inference.mcmc.rng import bounded, next_state, uniform
from pdbq.inference.mcmc.transition import Kernel
from pdbq.inference.moves.energy_paths import move_values
from pdbq.memory import check_bytes

__all__ = ["JumpSet", "ModePool", "empty_jumps", "jump_set", "jump_moves", "quench", "jump_kernel", "QUENCH_SWEEPS"]

QUENCH_SWEEPS = 50  # iterated conditional modes stops earlier at a fixed point (a few sweeps)


class JumpSet(NamedTuple):
    """R stored modes and, per unordered pair a < b, the sampled variables where they differ
    (CSR: pair index a·R + b, rows ``off[p]:off[p+1]`` of ``var``; other rows empty)."""

    modes: np.ndarray  # int32[R, n_vars]: the stored states
    movable: np.ndarray  # int32[M]: the sampled variables (the Hamming distance runs over them)
    off: np.ndarray  # int64[R·R + 1]
    var: np.ndarray  # int32[n_entries]
    longest: int  # the longest row (scratch size of `jump_moves`)

    @property
    def n_modes(self) -> int:
        return int(self.modes.shape[0])

    @property
    def n_pairs(self) -> int:
        """Pairs of stored modes that differ on some sampled variable."""
        return int(np.count_nonzero(np.diff(self.off)))


def empty_jumps(n_vars: int = 0) -> JumpSet:
    return JumpSet(np.zeros((0, n_vars), dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(1, dtype=np.int64),
                   np.zeros(0, dtype=np.int32), 0)


def jump_set(modes: list[np.ndarray], movable: np.ndarray) -> JumpSet:
    """The jump set over ``modes`` (full states) and the variables where ``movable`` is True
    (the sampled sites: evidence and unsampled variables never move). Its rows hold up to
    R(R − 1)/2 × (sampled variables) entries: they are counted first and checked against the
    memory left (`InferenceError` naming the sizes) before anything of that size is allocated."""
    r = len(modes)
    if r < 2:
        return empty_jumps(int(movable.shape[0]))
    mv = np.flatnonzero(movable).astype(np.int32)
    # the stacked modes and their sampled columns, before the rows
    check_bytes(2 * r * (int(movable.shape[0]) + mv.size) * 4,
                f"mode jumps between {r} local modes of {int(movable.shape[0]):,} variables", option="jumps")
    m = np.stack([np.asarray(x, dtype=np.int32) for x in modes])
    at = m[:, mv]
    sizes = np.zeros(r * r, dtype=np.int64)
    for a in range(r):
        for b in range(a + 1, r):
            sizes[a * r + b] = np.count_nonzero(at[a] != at[b])
    total = int(sizes.sum())
    check_bytes(total * 4, f"mode jumps between {r} local modes ({r * (r - 1) // 2:,} pairs differing in "
                f"{total:,} sampled variables in all)", option="jumps")
    off = np.zeros(r * r + 1, dtype=np.int64)
    off[1:] = np.cumsum(sizes)
    var = np.empty(total, dtype=np.int32)
    for a in range(r):
        for b in range(a + 1, r):
            p = a * r + b
            var[off[p]:off[p + 1]] = mv[at[a] != at[b]]
    return JumpSet(m, mv, off, var, int(sizes.max()))


@njit(cache=True)
def _nearest(modes, movable, values):
    best, best_d = 0, movable.shape[0] + 1
    for a in range(modes.shape[0]):
        d = 0
        for i in range(movable.shape[0]):
            v = movable[i]
            if values[v] != modes[a, v]:
                d += 1
        if d < best_d:
            best, best_d = a, d
    return best


@njit(cache=True, nogil=True)
def jump_moves(g, kg, values, gsums, beta, js, rng, n_tries):
    """``n_tries`` jump attempts on one state at inverse temperature ``beta`` (module
    docstring), in place; ``gsums`` (float64[n_groups]) is recomputed first and kept current;
    the stream is ``rng[0]`` (written back). Returns the number accepted. Needs at least two
    stored modes (checked by the caller)."""
    if gsums.shape[0] > 0:
        group_sums_into(g, kg.tables, values, gsums)
    modes, r = js.modes, js.modes.shape[0]
    news = np.empty(max(js.longest, 1), dtype=np.int64)
    olds = np.empty(max(js.longest, 1), dtype=np.int64)
    s = rng[0]
    accepted = 0
    for _ in range(n_tries):
        a = _nearest(modes, js.movable, values)
        s = next_state(s)
        b = bounded(s, r - 1)
        if b >= a:
            b += 1
        s = next_state(s)  # drawn every try: the stream does not depend on the outcome
        u = uniform(s)
        p = min(a, b) * r + max(a, b)
        lo, hi = js.off[p], js.off[p + 1]
        m = hi - lo
        if m == 0:
            continue
        for i in range(m):
            v = js.var[lo + i]
            x = np.int64(values[v])
            olds[i] = x
            xa, xb = np.int64(modes[a, v]), np.int64(modes[b, v])
            news[i] = xb if x == xa else (xa if x == xb else x)
        d = beta * move_values(g, kg, values, gsums, js.var[lo:hi], news, m)
        if _nearest(modes, js.movable, values) == b and (d >= 0.0 or u < np.exp(d)):
            accepted += 1
        else:
            move_values(g, kg, values, gsums, js.var[lo:hi], olds, m)
    rng[0] = s
    return accepted


def quench(g, kg, values: np.ndarray, sites: np.ndarray) -> tuple[np.ndarray, float]:
    """A local mode near ``values``: iterated conditional modes over ``sites`` from a copy of it
    until nothing changes (at most `QUENCH_SWEEPS` passes); returns (the mode, its energy)."""
    x = values.copy()
    gs = np.zeros(g.n_groups)
    if g.n_groups:
        group_sums_into(g, kg.tables, x, gs)
    st = ChainState(x, gs, np.zeros(1, dtype=np.uint64), np.zeros(1, dtype=np.int64))
    for _ in range(QUENCH_SWEEPS):
        changed, _ = greedy_sweep(g, kg, st, sites)
        if changed == 0:
            break
    return x, float(log_score_kernel(g, kg.tables, x))


class ModePool:
    """The ``max_modes`` distinct local modes of highest energy offered so far."""

    def __init__(self, max_modes: int):
        if max_modes < 2:
            raise InferenceError(f"mode jumps need at least 2 modes, got {max_modes}")
        self.max_modes = max_modes
        self._modes: dict[bytes, tuple[float, np.ndarray]] = {}

    def offer(self, mode: np.ndarray, energy: float) -> None:
        if not np.isfinite(energy):
            return  # a state the hard constraints forbid is no mode to jump to
        key = mode.tobytes()
        if key in self._modes:
            return
        if len(self._modes) >= self.max_modes:
            worst = min(self._modes, key=lambda k: self._modes[k][0])
            if self._modes[worst][0] >= energy:
                return
            del self._modes[worst]
        self._modes[key] = (energy, mode)

    def modes(self) -> list[np.ndarray]:
        """The stored modes, highest energy first (ties by content: a function of the offers)."""
        items = sorted(self._modes.items(), key=lambda kv: (-kv[1][0], kv[0]))
        return [m for _, (_, m) in items]

    def __len__(self) -> int:
        return len(self._modes)


def jump_kernel(log_energy: np.ndarray, states: np.ndarray, js: JumpSet, beta: float = 1.0, *,
                anchored: bool = True) -> Kernel:
    """The jump move as an explicit matrix over enumerated states (``states``: int[n_states,
    n_vars], row s = the values of state s; ``log_energy[s]`` = E of state s), written from the
    module docstring independently of `jump_moves`. For `transition.check_kernel` (tests).
    ``anchored=False`` leaves out step 3 (x' nearest its partner mode): the broken move the
    tests show failing the check."""
    n = states.shape[0]
    r = js.n_modes
    index = {tuple(int(x) for x in row): s for s, row in enumerate(states)}
    mv = js.movable

    def nearest(x):
        d = [(int(np.count_nonzero(x[mv] != js.modes[a][mv])), a) for a in range(r)]
        return min(d)[1]

    cols = np.zeros((n, r), dtype=np.int64)
    vals = np.zeros((n, r))
    for s in range(n):
        a = nearest(states[s])
        stay = 1.0
        k = 0
        for b in range(r):
            if b == a:
                continue
            y = states[s].copy()
            diff = np.flatnonzero((js.modes[a] != js.modes[b]))
            diff = diff[np.isin(diff, mv)]
            for v in diff:
                if y[v] == js.modes[a][v]:
                    y[v] = js.modes[b][v]
                elif y[v] == js.modes[b][v]:
                    y[v] = js.modes[a][v]
            t = index[tuple(int(x) for x in y)]
            gap = float(log_energy[t]) - float(log_energy[s]) if np.isfinite(log_energy[s]) else -np.inf
            acc = min(1.0, math.exp(min(beta * gap, 0.0))) if not anchored or nearest(y) == b else 0.0
            cols[s, k] = t
            vals[s, k] = acc / (r - 1)
            stay -= acc / (r - 1)
            k += 1
        cols[s, k] = s
        vals[s, k] = stay
    return Kernel(cols, vals)
