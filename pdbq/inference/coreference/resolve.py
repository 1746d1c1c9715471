"""Coreference inference over a `PairGraph`: annealed MAP clustering and pairwise posteriors.

Both run the entity moves of `pdbq.inference.coreference.entity_moves`, one explicit xorshift stream per
chain (`pdbq.inference.mcmc.rng`). MAP anneals τ geometrically from `temperature` to
`min_temperature` over `sweeps` passes (one pass = n mention-level steps), keeps each chain's
best state at pass boundaries, finishes with zero-temperature passes until nothing is accepted
(at most `greedy_sweeps`) and best single-mention moves until none raises ψ
(`pdbq.inference.coreference.polish`), and returns the best chain, each entity split into
the connected components of its within-entity candidate pairs (a tie: no pair across them scores anything). Sampling runs at τ = 1 and counts, per
asked pair, the passes at which both mentions share an entity; the standard error is taken
across chains.

>>> import numpy as np
>>> from pdbq.coref.layout import pair_graph
>>> g = pair_graph(4, np.array([0, 2, 0]), np.array([1, 3, 2]), np.array([3.0, 3.0, -3.0]))
>>> resolve_map(g, CorefConfig(sweeps=20, seed=1)).labels.tolist()
[0, 0, 2, 2]
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from pdbq.coref.contract import find_root as _find
from pdbq.coref.layout import CorefInputError, PairGraph, validate_pair_graph
from pdbq.coref.tokens import TokenModel, empty_token_model, token_partition_score
from pdbq.arrays import unique
from pdbq.errors import InferenceError, OptionError
from pdbq.inference.coreference.entity_moves import (
    C_ACCEPTED,
    C_EVALS,
    C_PROPOSALS,
    check_groups,
    new_scratch,
    new_state,
    partition_score,
    run_moves,
    state_from_labels,
)
from pdbq.inference.coreference.polish import polish_passes
from pdbq.inference.coreference.member_moves import check_sorted_rows, members_of, run_witness_moves
from pdbq.inference.mcmc.rng import chain_states
from pdbq.inference.coreference.subsample import SubsampleConfig, subsample_seeds, subsample_state

PROPOSALS = ("neighbour", "witness")

__all__ = ["PROPOSALS", "CorefConfig", "CorefMapResult", "PairPosterior", "resolve_map", "sample_pairs", "sample_sizes", "stable_labels", "initial_labels", "group_clash",
           "candidate_components"]


class _Mover:
    """The chain's move kernel for ``config.proposal``: `run_moves`, or `run_witness_moves` with
    the member blocks of the chain's state (rebuilt by `reset` when the state is replaced) and
    the pair scores of the graph or of a token model (`tokens`)."""

    def __init__(self, g, config, st, tokens=None):
        self.g, self.config = g, config
        self.tm = tokens if tokens is not None else empty_token_model()
        self.reset(st)

    def reset(self, st):
        self.st = st
        self.mb = members_of(st) if self.config.proposal == "witness" else None

    def __call__(self, sc, rng, steps, temp, counters, log):
        c = self.config
        if self.mb is None:
            run_moves(self.g, self.st, sc, rng, steps, temp, c.p_new, c.p_split_merge, counters, log)
        else:
            run_witness_moves(self.g, self.tm, self.st, self.mb, sc, rng, steps, temp, c.p_new, c.p_split_merge,
                              counters, log)


def _scorer(g, tokens):
    """ψ of a labelling: the graph's stored pairs, or every within-entity pair of a token model."""
    if tokens is None:
        return lambda label: float(partition_score(g, label))
    return lambda label: float(token_partition_score(tokens, label))


def _graph_for(g, config, tokens=None):
    validate_pair_graph(g)
    config.check()
    if config.proposal == "witness":
        check_sorted_rows(g)
    if tokens is not None:
        if not isinstance(tokens, TokenModel) or tokens.n_fields == 0:
            raise OptionError("tokens must be a TokenModel with at least one field (pdbq.coref.tokens.token_model)")
        if tokens.n_mentions != g.indptr.shape[0] - 1:
            raise CorefInputError(f"the token model has {tokens.n_mentions} mentions, the pair graph "
                                  f"{g.indptr.shape[0] - 1}")
        if config.proposal != "witness" or config.p_split_merge != 0.0:
            raise OptionError("a token model (factors computed on demand) needs proposal = 'witness' and "
                              "p_split_merge = 0: the other moves read stored pair scores")
    return g


def _pos_int(name: str, v: object, zero: bool = False) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < (0 if zero else 1):
        raise OptionError(f"option '{name}' must be a {'non-negative' if zero else 'positive'} integer, got {v!r}")


def _prob(name: str, v: object) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
        raise OptionError(f"option '{name}' must be a number in [0, 1], got {v!r}")


@dataclass(frozen=True)
class CorefConfig:
    """Settings of a coreference run.

    sweeps: passes (n steps each) of annealing for MAP, or of sampling after burn-in for PROB.
    burn_in: passes discarded before sampling (PROB only).
    chains: independent chains (MAP: the best wins; PROB: the standard error is across them).
    seed: root of the per-chain streams.
    temperature / min_temperature: MAP annealing start and end (geometric in between).
    greedy_sweeps: at most this many zero-temperature passes after annealing (MAP).
    p_new: probability a mention move proposes a new singleton instead of a neighbour's entity.
    p_split_merge: probability a step is a split/merge move instead of a mention move.
    time_limit: seconds after which annealing/sampling stops at the end of a pass (a warning
        says so).
    init: "singletons" (every mention alone) or "components" (connected components of the pairs
        scoring above `init_threshold`): where every chain starts. Only the start changes; the
        moves and their acceptance are the same, so the chain's target is unchanged.
    init_threshold: see `init`.
    subsample: how each move's changed pair factors are scored (`SubsampleConfig`: exact, a
        uniform fraction, or sequential to a confidence interval; seed 000). When not exact, MAP
        re-scores the state exactly at pass boundaries to keep the best one.
    proposal: the mention move. "neighbour" (`entity_moves.mention_move`): its ratio counts m's
        neighbours in the source and target, a scan of m's candidate row per step. "witness"
        (`member_moves.witness_move`): same targets, a ratio from entity sizes and one random
        reverse witness, and a score change summed (or subsampled) over entity members — a
        step costs what it scores, which is what makes `subsample` pay in wall time.
    """

    sweeps: int = 60
    burn_in: int = 20
    chains: int = 2
    seed: int = 0
    temperature: float = 2.0
    min_temperature: float = 0.02
    greedy_sweeps: int = 10
    p_new: float = 0.1
    p_split_merge: float = 0.1
    time_limit: float | None = None
    init: str = "singletons"
    init_threshold: float = 0.0
    subsample: SubsampleConfig = SubsampleConfig()
    proposal: str = "neighbour"

    def check(self) -> CorefConfig:
        _pos_int("sweeps", self.sweeps)
        _pos_int("burn_in", self.burn_in, zero=True)
        _pos_int("chains", self.chains)
        _pos_int("seed", self.seed, zero=True)
        _pos_int("greedy_sweeps", self.greedy_sweeps, zero=True)
        for name in ("temperature", "min_temperature"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise OptionError(f"option '{name}' must be a positive number, got {v!r}")
        if self.min_temperature > self.temperature:
            raise OptionError("option 'min_temperature' must not exceed 'temperature'")
        _prob("p_new", self.p_new)
        _prob("p_split_merge", self.p_split_merge)
        if self.init not in ("singletons", "components"):
            raise OptionError(f"option 'init' must be 'singletons' or 'components', got {self.init!r}")
        if isinstance(self.init_threshold, bool) or not isinstance(self.init_threshold, (int, float)):
            raise OptionError(f"option 'init_threshold' must be a number, got {self.init_threshold!r}")
        if self.p_new == 0.0:
            raise OptionError("option 'p_new' must be > 0 (otherwise a mention can never leave an entity)")
        if self.time_limit is not None and (
            isinstance(self.time_limit, bool) or not isinstance(self.time_limit, (int, float)) or self.time_limit <= 0
        ):
            raise OptionError(f"option 'time_limit' must be a positive number, got {self.time_limit!r}")
        if not isinstance(self.subsample, SubsampleConfig):
            raise OptionError(f"option 'subsample' must be a SubsampleConfig, got {self.subsample!r}")
        self.subsample.check()
        if self.proposal not in PROPOSALS:
            raise OptionError(f"option 'proposal' must be one of {', '.join(PROPOSALS)}, got {self.proposal!r}")
        return self


@dataclass(frozen=True, eq=False)
class CorefMapResult:
    """The MAP clustering: `labels[m]` is the smallest mention index in m's entity."""

    labels: np.ndarray
    log_score: float
    chain_scores: np.ndarray
    factor_evaluations: int
    proposals: int
    accepted: int
    seconds: float
    warnings: tuple[str, ...] = field(default=())

    @property
    def n_entities(self) -> int:
        return int(unique(self.labels).size)


@dataclass(frozen=True, eq=False)
class PairPosterior:
    """P(same entity) per asked pair (mean over chains) and its standard error across chains."""

    prob: np.ndarray
    stderr: np.ndarray
    factor_evaluations: int
    proposals: int
    seconds: float
    warnings: tuple[str, ...] = field(default=())


@njit(cache=True)
def _stable(label):
    n = label.shape[0]
    first = np.full(n, -1, np.int64)
    out = np.empty(n, np.int64)
    for m in range(n):
        e = label[m]
        if first[e] < 0:
            first[e] = m
        out[m] = first[e]
    return out


@njit(cache=True)
def _components(g, joined):
    """Union-find components of the candidate pairs whose stored entry has ``joined[e]``
    (each root the component's smallest mention)."""
    n = g.indptr.shape[0] - 1
    parent = np.arange(n)
    for m in range(n):
        for e in range(g.indptr[m], g.indptr[m + 1]):
            j = g.nbr[e]
            if j > m and joined[e]:
                rm = _find(parent, m)
                rj = _find(parent, j)
                if rm != rj:
                    parent[max(rm, rj)] = min(rm, rj)
    out = np.empty(n, np.int64)
    for m in range(n):
        out[m] = _find(parent, m)
    return out


def _within_components(g, label):
    """Split every entity into the connected components of its within-entity candidate pairs.
    No candidate pair crosses two components, so ψ is unchanged: a MAP tie broken toward not
    joining mentions that no evidence links."""
    rows = np.repeat(np.arange(label.shape[0]), np.diff(g.indptr))
    return _components(g, label[rows] == label[g.nbr])


def candidate_components(g) -> np.ndarray:
    """The connected components of all candidate pairs (each mention's label: its component's
    smallest mention): no entity gains from spanning two of them."""
    return _components(g, np.ones(g.nbr.shape[0], np.bool_))


def _components_above(g, threshold):
    """Components of the candidate pairs scoring above ``threshold``."""
    return _components(g, g.score > threshold)


@njit(cache=True)
def _components_apart(g, order, group):
    """Union-find over the stored entries in `order` (best score first), skipping a union that
    would put two mentions of one cannot-link group (≥ 0) in one component."""
    n = g.indptr.shape[0] - 1
    parent = np.arange(n)
    nxt = np.full(n, -1, np.int64)  # members of a root's component: a linked list from the root
    tail = np.arange(n)
    rows = np.empty(g.nbr.shape[0], np.int64)
    for m in range(n):
        for e in range(g.indptr[m], g.indptr[m + 1]):
            rows[e] = m
    for e in order:
        rm = _find(parent, rows[e])
        rj = _find(parent, g.nbr[e])
        if rm == rj:
            continue
        clash = False
        x = rm
        while x >= 0 and not clash:
            if group[x] >= 0:
                y = rj
                while y >= 0:
                    if group[y] == group[x]:
                        clash = True
                        break
                    y = nxt[y]
            x = nxt[x]
        if clash:
            continue
        lo, hi = min(rm, rj), max(rm, rj)
        parent[hi] = lo
        nxt[tail[lo]] = hi
        tail[lo] = tail[hi]
    out = np.empty(n, np.int64)
    for m in range(n):
        out[m] = _find(parent, m)
    return out


def initial_labels(g: PairGraph, config: CorefConfig, cannot_link: np.ndarray | None = None) -> np.ndarray:
    """Where chains start (``config.init``): singletons, or components of the pairs above
    ``config.init_threshold`` (with `cannot_link` groups: joined best pair first, never two
    mentions of one group)."""
    return _initial(g, config, check_groups(cannot_link, g.indptr.shape[0] - 1)).label.astype(np.int64)


def _initial(g, config, group=None):
    n = g.indptr.shape[0] - 1
    if config.init == "components":
        if group is None:
            return state_from_labels(_components_above(g, float(config.init_threshold)))
        above = np.flatnonzero(g.score > float(config.init_threshold))
        order = above[np.argsort(-g.score[above], kind="stable")]
        return state_from_labels(_components_apart(g, order, group))
    return new_state(n)


def group_clash(label: np.ndarray, group: np.ndarray | None) -> tuple[int, int] | None:
    """Two mentions of one cannot-link group (≥ 0) sharing an entity of `label`, or None."""
    if group is None:
        return None
    label = np.asarray(label, dtype=np.int64)
    g = np.asarray(group[: label.shape[0]], dtype=np.int64)
    keep = np.flatnonzero(g >= 0)
    order = keep[np.lexsort((g[keep], label[keep]))]
    same = (label[order][1:] == label[order][:-1]) & (g[order][1:] == g[order][:-1])
    if not same.any():
        return None
    k = int(np.flatnonzero(same)[0])
    return int(order[k]), int(order[k + 1])


def stable_labels(label: np.ndarray) -> np.ndarray:
    """Relabel a clustering so each entity is named by its smallest member index."""
    _, dense = np.unique(np.asarray(label), return_inverse=True)
    return _stable(dense.reshape(-1).astype(np.int64))


def resolve_map(g: PairGraph, config: CorefConfig = CorefConfig(), tokens: TokenModel | None = None,
                cannot_link: np.ndarray | None = None, poll: Callable[[], None] | None = None,
                deadline: float | None = None) -> CorefMapResult:
    """Annealed MAP clustering (module docstring). With `tokens` (a `pdbq.coref.tokens.TokenModel`)
    every within-entity pair is scored on demand from the token sets and `g` only supplies the
    proposals' candidate neighbours; then a subsampled chain is scored exactly only at its end
    (re-scoring every pass would cost Σ|e|² pair evaluations) and entities are not split into
    candidate components (every pair scores). `cannot_link` (int[n], −1 = none): mentions of one
    group never share an entity (a hard constraint of the moves, `entity_moves`). `poll()` is called
    between pieces of every pass (a cancelled statement raises from it and ends the run).
    `deadline` (a `time.perf_counter()` instant; default: ``config.time_limit`` from this call):
    annealing, the greedy passes and the polish stop there, inside a pass if need be (one pass
    over tens of thousands of mentions can take seconds), each cut named in a warning."""
    _graph_for(g, config, tokens)
    psi = _scorer(g, tokens)
    n = g.indptr.shape[0] - 1
    group = check_groups(cannot_link, n)
    t0 = time.perf_counter()
    if deadline is None and config.time_limit is not None:
        deadline = t0 + config.time_limit
    if n == 0:
        return CorefMapResult(np.zeros(0, np.int64), 0.0, np.zeros(config.chains), 0, 0, 0, 0.0)
    rngs = chain_states(config.seed, config.chains)
    counters = np.zeros(4, np.int64)
    sub_seeds = subsample_seeds(config.seed, config.chains)
    sc = new_scratch(g, subsample_state(config.subsample, sub_seeds[0]), group)
    cooling = (config.min_temperature / config.temperature) ** (1.0 / max(config.sweeps - 1, 1))
    warnings: list[str] = []
    best_labels, best_score, chain_scores = None, -math.inf, np.empty(config.chains)
    stopped = False
    cut_after: list[str] = []  # the phases after annealing that the deadline cut
    start = _initial(g, config, group)
    start_score = psi(start.label)
    for c in range(config.chains):
        st = type(start)(*[a.copy() for a in start])
        move = _Mover(g, config, st, tokens)
        log = np.array([start_score])
        rng = rngs[c : c + 1]
        sc.sub.rng[0] = sub_seeds[c]
        chain_best, chain_lab = start_score, st.label.copy()
        temp = config.temperature
        for _ in range(config.sweeps):
            if not run_pass(move, sc, rng, n, temp, counters, log, deadline, poll):
                stopped = True
                if not config.subsample.is_exact or tokens is not None:
                    break  # the running score is an estimate: the cut pass's state is not kept
            if not config.subsample.is_exact:  # the running sum adds estimates: re-score exactly
                if tokens is not None:
                    log[0] = -math.inf  # see the docstring: the annealed chain's last state is kept
                else:
                    log[0] = psi(st.label)
            if log[0] > chain_best or (tokens is not None and not config.subsample.is_exact):
                chain_best, chain_lab = float(log[0]), st.label.copy()
            if stopped:
                break
            temp = max(temp * cooling, config.min_temperature)
        st = state_from_labels(chain_lab)
        move.reset(st)
        log[0] = chain_best if math.isfinite(chain_best) else psi(st.label)
        for k in range(config.greedy_sweeps):
            before = counters[C_ACCEPTED]
            if not run_pass(move, sc, rng, n, 0.0, counters, log, deadline, poll):
                cut_after.append(f"the zero-temperature passes (after {k} of at most {config.greedy_sweeps})")
                break
            if counters[C_ACCEPTED] == before:
                break
        if tokens is None:  # a token model scores pairs the graph does not hold: its ψ is not theirs
            moved, finished = polish_passes(g, st, group, should_stop=_past(deadline, poll))
            counters[C_ACCEPTED] += moved
            if not finished:
                cut_after.append("the best single-mention moves")
        score = psi(st.label)
        chain_scores[c] = score
        if score > best_score:
            best_score, best_labels = score, st.label.copy()
        if stopped or cut_after:
            stopped = True
            break
    if stopped:
        cut = f"; it also cut {' and '.join(cut_after)} short" if cut_after else ""
        warnings.append(
            f"time_limit {config.time_limit} s reached: annealing stopped early "
            f"({c + 1} of {config.chains} chains ran){cut}; the clustering may not be converged"
        )
        chain_scores = chain_scores[: c + 1]
    return CorefMapResult(
        stable_labels(best_labels if tokens is not None else _within_components(g, best_labels)), best_score, chain_scores, int(counters[C_EVALS]),
        int(counters[C_PROPOSALS]), int(counters[C_ACCEPTED]), time.perf_counter() - t0, tuple(warnings),
    )


def _poll(poll: Callable[[], None] | None) -> None:
    if poll is not None:
        poll()


def _past(deadline: float | None, poll: Callable[[], None] | None) -> Callable[[], bool] | None:
    """``should_stop()`` for a loop of short pieces: polls, then True once ``deadline`` passed."""
    if deadline is None and poll is None:
        return None

    def should_stop() -> bool:
        _poll(poll)
        return deadline is not None and time.perf_counter() >= deadline

    return should_stop


# seconds of moves between two looks at the clock and the cancel flag: one pass over tens of
# thousands of mentions (large entities, split/merge moves) takes seconds on a loaded machine
_PIECE_SECONDS = 0.02


def run_pass(move, sc, rng, steps: int, temp: float, counters, log, deadline: float | None,
             poll: Callable[[], None] | None) -> bool:
    """``move(sc, rng, steps, temp, counters, log)`` in pieces of about `_PIECE_SECONDS` (the
    kernels carry the chain's whole state in their arguments, so pieces give the same chain as
    one call), ``poll()`` before each; False when ``deadline`` came before every step ran (the
    state is then a valid state of the chain, after fewer steps)."""
    if deadline is None and poll is None:
        move(sc, rng, steps, temp, counters, log)
        return True
    piece, left = min(steps, 64), steps
    while left > 0:
        _poll(poll)
        if deadline is not None and time.perf_counter() >= deadline:
            return False
        k = min(piece, left)
        t = time.perf_counter()
        move(sc, rng, k, temp, counters, log)
        dt = time.perf_counter() - t
        left -= k
        piece = max(1, min(4 * k, int(k * _PIECE_SECONDS / dt))) if dt > 0 else 4 * k
    return True


def _chain_clock(deadline: float | None, chains_left: int) -> tuple[float | None, float | None]:
    """(end of burn-in, end of the chain) for the next of ``chains_left`` chains run one after
    another under ``deadline``: each gets an equal share of the time left (so several chains, and
    a standard error, come out of a short limit), half of it at most for burn-in (so a limit that
    cannot hold the whole burn-in still leaves samples, flagged)."""
    if deadline is None:
        return None, None
    now = time.perf_counter()
    share = max(deadline - now, 0.0) / max(chains_left, 1)
    return now + 0.5 * share, now + share


def _burn_in(move, sc, rng, n: int, passes: int, counters, log, poll, deadline: float | None = None) -> bool:
    """``passes`` passes of ``n`` moves (`run_pass`); False when ``deadline`` cut them short."""
    if poll is None and deadline is None:
        move(sc, rng, n * passes, 1.0, counters, log)
        return True
    return run_pass(move, sc, rng, n * passes, 1.0, counters, log, deadline, poll)


@njit(cache=True)
def _count_same(label, qa, qb, hits):
    for k in range(qa.shape[0]):
        if label[qa[k]] == label[qb[k]]:
            hits[k] += 1


def sample_pairs(g: PairGraph, qa: np.ndarray, qb: np.ndarray, config: CorefConfig = CorefConfig(),
                 tokens: TokenModel | None = None, cannot_link: np.ndarray | None = None,
                 poll: Callable[[], None] | None = None, deadline: float | None = None) -> PairPosterior:
    """P(mentions qa[k] and qb[k] are in one entity) under π(y) ∝ exp(ψ(y)), by MH sampling
    (`tokens`, `cannot_link`, `poll`, `deadline`: as in `resolve_map`; with groups, π is restricted
    to clusterings without two mentions of one group). A chain the deadline stopped before its
    first kept pass counts for nothing (no chain kept one: NaN, with a warning)."""
    _graph_for(g, config, tokens)
    n = g.indptr.shape[0] - 1
    group = check_groups(cannot_link, n)
    qa = np.asarray(qa, dtype=np.int64)
    qb = np.asarray(qb, dtype=np.int64)
    if qa.shape != qb.shape or (qa.size and (min(qa.min(), qb.min()) < 0 or max(qa.max(), qb.max()) >= n)):
        raise InferenceError(f"asked pairs must be mention indices in [0, {n})")
    t0 = time.perf_counter()
    if deadline is None and config.time_limit is not None:
        deadline = t0 + config.time_limit
    rngs = chain_states(config.seed, config.chains)
    counters = np.zeros(4, np.int64)
    sub_seeds = subsample_seeds(config.seed, config.chains)
    sc = new_scratch(g, subsample_state(config.subsample, sub_seeds[0]), group)
    per_chain = np.full((config.chains, qa.size), np.nan)
    warnings: list[str] = []
    start = _initial(g, config, group)
    if not config.subsample.is_exact:
        warnings.append(
            f"subsample {config.subsample.label()}: moves are scored on a sample of their factors, so the "
            "chain's stationary distribution is only approximately the model's; the standard errors do not "
            "include that bias"
        )
    ran = short = short_burn = 0
    for c in range(config.chains):
        st = type(start)(*[a.copy() for a in start])
        move = _Mover(g, config, st, tokens)
        log = np.array([_scorer(g, tokens)(st.label)])
        rng = rngs[c : c + 1]
        sc.sub.rng[0] = sub_seeds[c]
        burn_end, chain_end = _chain_clock(deadline, config.chains - c)
        if not _burn_in(move, sc, rng, n, config.burn_in, counters, log, poll, burn_end):
            short_burn += 1
        hits = np.zeros(qa.size, np.int64)
        done = 0
        for _ in range(config.sweeps):
            if not run_pass(move, sc, rng, n, 1.0, counters, log, chain_end, poll):
                break
            _count_same(st.label, qa, qb, hits)
            done += 1
        if done:
            per_chain[ran] = hits / done
            ran += 1
        if done < config.sweeps:
            short += 1
    kept = per_chain[:ran]
    if short_burn:
        warnings.append(f"time_limit {config.time_limit} s cut burn-in short in {short_burn} of {config.chains} "
                        "chains: their samples may come from before the chain mixed")
    if short:
        warnings.append(f"time_limit {config.time_limit} s reached: {short} of {config.chains} chains kept fewer "
                        f"than {config.sweeps} samples ({ran} kept any)")
    if ran == 0:
        warnings.append("no chain kept a sample before the time limit: the probabilities are NULL (NaN); raise "
                        "time_limit or lower burn_in")
        prob = np.full(qa.size, np.nan)
    else:
        prob = kept.mean(axis=0)
    if ran > 1:
        se = kept.std(axis=0, ddof=1) / math.sqrt(ran)
    else:
        se = np.full(qa.size, np.nan)
        if config.chains == 1:
            warnings.append("one chain: no standard error (use chains >= 2)")
        elif ran == 1:
            warnings.append("one chain kept samples before the time limit: no standard error")
    return PairPosterior(prob, se, int(counters[C_EVALS]), int(counters[C_PROPOSALS]),
                         time.perf_counter() - t0, tuple(warnings))


@njit(cache=True)
def _count_sizes(label, size, cap, counts):
    for m in range(label.shape[0]):
        s = size[label[m]]
        counts[m, s if s < cap else cap] += 1


def sample_sizes(g: PairGraph, config: CorefConfig, cap: int, poll: Callable[[], None] | None = None,
                 deadline: float | None = None, warnings: list[str] | None = None) -> np.ndarray:
    """P(mention m's entity has s members) as float64[n, cap + 1]; column `cap` holds s >= cap.
    Averaged over chains and the passes after burn-in (τ = 1); `poll`, `deadline` as in
    `resolve_map`. What the deadline cut is appended to ``warnings``; no pass kept: float64[n, 1]
    of NaN."""
    _graph_for(g, config)
    n = g.indptr.shape[0] - 1
    if n * (cap + 1) > 50_000_000:
        raise InferenceError(f"a size distribution for {n:,} mentions up to size {cap} needs too much memory; ask for fewer sizes")
    if deadline is None and config.time_limit is not None:
        deadline = time.perf_counter() + config.time_limit
    rngs = chain_states(config.seed, config.chains)
    counters = np.zeros(4, np.int64)
    sc = new_scratch(g)
    counts = np.zeros((n, cap + 1), np.int64)
    start = _initial(g, config)
    done = short_burn = 0
    for c in range(config.chains):
        st = type(start)(*[a.copy() for a in start])
        move = _Mover(g, config, st)
        log = np.array([partition_score(g, st.label)])
        rng = rngs[c : c + 1]
        burn_end, chain_end = _chain_clock(deadline, config.chains - c)
        if not _burn_in(move, sc, rng, n, config.burn_in, counters, log, poll, burn_end):
            short_burn += 1
        for _ in range(config.sweeps):
            if not run_pass(move, sc, rng, n, 1.0, counters, log, chain_end, poll):
                break
            _count_sizes(st.label, st.size, cap, counts)
            done += 1
    if warnings is not None:
        if short_burn:
            warnings.append(f"time_limit {config.time_limit} s cut burn-in short in {short_burn} of {config.chains} "
                            "chains: their passes may come from before the chain mixed")
        if done < config.chains * config.sweeps:
            warnings.append(f"time_limit {config.time_limit} s reached: the size distributions average {done:,} "
                            f"passes of {config.chains * config.sweeps:,} planned" + (" (none: NULL)" if not done else ""))
    if not done:
        return np.full((n, 1), np.nan)  # one NaN column: no size has an estimate (and no table is filled)
    return counts / done
