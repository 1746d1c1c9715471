"""Monte Carlo MCMC (seed 000): score a Metropolis–Hastings proposal on a sample of its factors.

A proposal y → y' changes the set F of factors; its exact score change is Σ_{f∈F} f. The
estimators here replace that sum by |F| · mean over a sample S ⊆ F drawn *without replacement*
(eq. 7), always at least one factor:

* ``uniform`` (§3.2, rate p): |S| = ⌈p·|F|⌉ (≥ 1) by a partial Fisher–Yates shuffle of the
  gathered factor list; the scaled sum |F|/|S| · Σ_S f is unbiased.
* ``confidence`` (§3.3, interval i): draw factors one at a time and stop as soon as the 95%
  confidence interval of the mean, with the finite-population correction (eqs. 8–9)

      I_S = 2 z σ_S / √|S| · √((|F| − |S|) / (|F| − 1)),  z = 1.96,

  is narrower than i (the paper's rule). With ``decide=True`` it also stops as soon as that
  interval excludes the MH decision threshold: the proposal is accepted iff Δ > τ(log u − log q
  ratio) (τ = 0: iff Δ > 0), so the sample mean is compared with that threshold divided by |F|,
  and sampling stops once the accept/reject decision is settled at 95% confidence. The fpc makes
  the interval 0 at |S| = |F|, so a chain that never stops early scores every factor.
* ``exact`` (and uniform with p = 1): the plain sum in gathered order — bit-identical to full
  scoring, and no random number is drawn.

Layout. `SubsampleState` (one per chain):
    params  float64[4]  mode code (0 exact, 1 uniform, 2 confidence), rate, interval, decide
    rng     uint64[1]   the estimator's own xorshift stream (never the move stream)
The gathered factors are `signs[r] * score[edges[r]]` for r < k (entity_moves' scratch); the
samplers permute `edges`/`signs` in place, which is why no extra index buffer is needed.

>>> import numpy as np
>>> cfg = SubsampleConfig("uniform", rate=0.5).check()
>>> st = subsample_state(cfg, chain_seed=np.uint64(7))
>>> score = np.arange(10.0); edges = np.arange(10); signs = np.ones(10)
>>> est, used = estimate_delta(score, edges, signs, 10, st, np.uint64(1), 1.0, 0.0)
>>> int(used)
5
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit

from pdbq.errors import OptionError
from pdbq.inference.mcmc.rng import bounded, next_state, uniform

__all__ = [
    "SubsampleConfig",
    "SubsampleState",
    "subsample_state",
    "subsample_seeds",
    "estimate_delta",
    "exact_sum",
    "uniform_sum",
    "sequential_sum",
    "stop_now",
    "uniform_count",
    "decision_mean",
    "MODES",
    "Z95",
]

MODES = ("exact", "uniform", "confidence")
Z95 = 1.96
_EXACT, _UNIFORM, _CONFIDENCE = 0.0, 1.0, 2.0


@dataclass(frozen=True)
class SubsampleConfig:
    """How a proposal's changed factors are scored.

    mode: 'exact' (every factor), 'uniform' (a fixed fraction `rate`) or 'confidence'
        (sequential until the fpc-corrected 95% interval is narrower than `interval`).
    rate: the fraction p in (0, 1] for 'uniform'; p = 1 is the exact path.
    interval: the maximum interval width i > 0 for 'confidence' (on the mean factor score).
    decide: 'confidence' also stops once the interval excludes the MH decision threshold
        (then `interval` may be 0: stop only when the decision is settled).
    """

    mode: str = "exact"
    rate: float = 1.0
    interval: float = 0.0
    decide: bool = False

    def check(self) -> SubsampleConfig:
        if self.mode not in MODES:
            raise OptionError(f"option 'subsample' must be one of {', '.join(MODES)} or a rate in (0, 1], got {self.mode!r}")
        r = self.rate
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not (0.0 < r <= 1.0):
            raise OptionError(f"option 'subsample' rate must be a number in (0, 1], got {r!r}")
        v = self.interval
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise OptionError(f"option 'interval' must be a finite number >= 0, got {v!r}")
        if not isinstance(self.decide, bool):
            raise OptionError(f"option 'decide' must be a boolean, got {self.decide!r}")
        if self.mode == "confidence" and v == 0 and not self.decide:
            raise OptionError("subsample = 'confidence' needs interval > 0 (or decide = true)")
        if self.mode != "confidence" and (v != 0 or self.decide):
            raise OptionError(f"options 'interval' and 'decide' apply to subsample = 'confidence', not {self.mode!r}")
        if self.mode != "uniform" and r != 1.0:
            raise OptionError(f"option 'subsample' rate applies to mode 'uniform', not {self.mode!r}")
        return self

    @classmethod
    def from_options(cls, subsample: object = None, interval: object = None, decide: object = None) -> SubsampleConfig:
        """The config of a query's options, e.g. ``WITH (subsample = 0.1)`` or
        ``WITH (subsample = 'confidence', interval = 20)``: a number is a uniform rate, a
        string a mode; `interval` alone means 'confidence'. Validated."""
        if subsample is None and interval is None and decide is None:
            return cls()
        if isinstance(subsample, str):
            mode = subsample.strip().lower()
            if mode == "uniform":
                raise OptionError("give a uniform subsample as its rate, e.g. subsample = 0.1")
            cfg = cls(mode, 1.0, 0.0 if interval is None else interval, bool(decide) if decide is not None else False)
        elif subsample is None:
            cfg = cls("confidence", 1.0, 0.0 if interval is None else interval, bool(decide) if decide is not None else False)
        elif isinstance(subsample, (int, float)) and not isinstance(subsample, bool):
            if interval is not None or decide is not None:
                raise OptionError("options 'interval' and 'decide' need subsample = 'confidence', not a rate")
            cfg = cls("uniform", float(subsample))
        else:
            raise OptionError(f"option 'subsample' must be a rate in (0, 1] or one of {', '.join(MODES)}, got {subsample!r}")
        return cfg.check()

    @property
    def is_exact(self) -> bool:
        return self.mode == "exact" or (self.mode == "uniform" and self.rate == 1.0)

    def label(self) -> str:
        if self.is_exact:
            return "exact"
        if self.mode == "uniform":
            return f"p={self.rate:g}"
        return f"i={self.interval:g}" + (" +decide" if self.decide else "")

    def params(self) -> np.ndarray:
        code = {"exact": _EXACT, "uniform": _UNIFORM, "confidence": _CONFIDENCE}[self.mode]
        if self.is_exact:
            code = _EXACT
        return np.array([code, float(self.rate), float(self.interval), 1.0 if self.decide else 0.0])


class SubsampleState(NamedTuple):
    params: np.ndarray
    rng: np.ndarray


def subsample_seeds(seed: int, chains: int) -> np.ndarray:
    """One xorshift state per chain for the estimator, a stream apart from the move streams
    (`pdbq.inference.mcmc.rng.chain_states` uses the same SeedSequence children, not their spawn)."""
    out = np.empty(chains, dtype=np.uint64)
    for c, child in enumerate(np.random.SeedSequence(seed).spawn(chains)):
        s = child.spawn(3)[2].generate_state(1, dtype=np.uint64)[0]
        out[c] = s if s != 0 else np.uint64(0x9E3779B97F4A7C15)
    return out


def subsample_state(config: SubsampleConfig | None = None, chain_seed: np.uint64 | int = 1) -> SubsampleState:
    """The kernel-side state of a validated config with its stream seeded by `chain_seed`."""
    config = (config or SubsampleConfig()).check()
    s = np.uint64(chain_seed)
    return SubsampleState(config.params(), np.array([s if s != 0 else np.uint64(0x9E3779B97F4A7C15)], np.uint64))


@njit(cache=True)
def exact_sum(score, edges, signs, k):
    """Σ_{r<k} signs[r]·score[edges[r]] in gathered order (the full-scoring path)."""
    total = 0.0
    for r in range(k):
        total += signs[r] * score[edges[r]]
    return total


@njit(cache=True, inline="always")
def _draw(score, edges, signs, k, r, rng):
    """(rng, signed score) of a factor drawn uniformly from positions r..k-1, swapped into
    position r (one step of a partial Fisher–Yates shuffle: sampling without replacement)."""
    rng = next_state(rng)
    q = r + bounded(rng, k - r)
    e = edges[q]
    edges[q] = edges[r]
    edges[r] = e
    s = signs[q]
    signs[q] = signs[r]
    signs[r] = s
    return rng, s * score[e]


@njit(cache=True)
def uniform_sum(score, edges, signs, k, m, rng):
    """(rng, k/m · Σ over m factors drawn without replacement): a partial Fisher–Yates shuffle
    of edges/signs[:k] in place, so the sampled factors end up in positions 0..m-1."""
    total = 0.0
    for r in range(m):
        rng, x = _draw(score, edges, signs, k, r, rng)
        total += x
    return rng, total * (k / m)


@njit(cache=True)
def sequential_sum(score, edges, signs, k, rng, interval, decide, mu0):
    """(rng, k · sample mean, factors drawn): sequential sampling without replacement until
    the fpc-corrected 95% interval width (eq. 9) is <= interval, or — when `decide` — the
    interval's half-width no longer reaches the threshold mean mu0. At least 2 factors are
    drawn when k >= 2 (a variance needs two); all k when no rule fires."""
    mean = 0.0
    m2 = 0.0
    c = 0
    for r in range(k):
        rng, x = _draw(score, edges, signs, k, r, rng)
        c = r + 1
        d = x - mean
        mean += d / c
        m2 += d * (x - mean)
        if stop_now(c, k, mean, m2, interval, decide, mu0):
            break
    return rng, mean * k, c


@njit(cache=True, inline="always")
def stop_now(c, k, mean, m2, interval, decide, mu0):
    """The confidence rule after c of k factors (running mean and Welford m2): the fpc-corrected
    95% interval width (eq. 9) is <= interval, or — `decide` — its half-width no longer reaches
    the threshold mean mu0. Never before 2 factors, never at c = k (nothing left to stop)."""
    if c < 2 or c >= k:
        return False
    var = m2 / (c - 1)
    half = Z95 * np.sqrt(var / c) * np.sqrt((k - c) / (k - 1.0))
    if 2.0 * half <= interval:
        return True
    return decide and abs(mean - mu0) > half


@njit(cache=True, inline="always")
def uniform_count(rate, k):
    """⌈rate·k⌉ factors, at least one (the float guard keeps rate·k = integer exact)."""
    m = int(np.ceil(rate * k * (1.0 - 1e-12)))
    return max(m, 1)


@njit(cache=True, inline="always")
def decision_mean(rng, temp, log_q_ratio, k):
    """The mean factor score at which an MH test over k factors flips: the test accepts iff
    Δ > τ(log u − log q-ratio), with u the move stream's next uniform (read, not advanced)."""
    if temp <= 0.0:
        return 0.0
    u = uniform(next_state(rng))
    return temp * (np.log(u) - log_q_ratio) / k if u > 0.0 else -np.inf


@njit(cache=True)
def estimate_delta(score, edges, signs, k, sub, rng, temp, log_q_ratio):
    """(estimated score change, factors evaluated) of an MH proposal from its k gathered
    factors (module docstring). `rng` is the *move* stream at the accept test, read (never
    advanced) to know the uniform the test will draw, so a 'decide' rule stops on the same
    decision; the estimator's own draws come from and advance sub.rng[0]."""
    mode = sub.params[0]
    if mode == _EXACT or k <= 1:
        return exact_sum(score, edges, signs, k), k
    if mode == _UNIFORM:
        m = uniform_count(sub.params[1], k)
        if m >= k:
            return exact_sum(score, edges, signs, k), k
        s, est = uniform_sum(score, edges, signs, k, m, sub.rng[0])
        sub.rng[0] = s
        return est, m
    decide = sub.params[3] != 0.0
    mu0 = decision_mean(rng, temp, log_q_ratio, k) if decide else 0.0
    s, est, c = sequential_sum(score, edges, signs, k, sub.rng[0], sub.params[2], decide, mu0)
    sub.rng[0] = s
    return est, c
