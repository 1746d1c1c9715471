"""What a sampled answer's warnings mean for its error bars, in words a user acts on.

The samplers' checks each speak of their own test (split R-hat, mode jumps, effective sample
size, swap rates, a cross-check). A user reading them needs the consequence first: whether the
intervals ``estimate ± 1.96·stderr`` can be trusted, and what to do. `lead_warning` is that one
sentence, put before the checks' own; `contention_warning` says when the machine's load, not the
model, left the run too little CPU (the time limit is wall time).
"""

from __future__ import annotations

__all__ = ["untrusted_checks", "lead_warning", "contention_warning", "cross_check_warning", "LOW_SHARE",
           "UNSEEN_RATIO"]

import numpy as np

# (text a check's warning contains, what it means in a few words). Each of these says the chains
# may not have explored the distribution, so their batch-means errors may be too small.
_UNTRUSTING = (
    ("not converged", "the chains disagree or never moved (split R-hat)"),
    ("accepted mode jump", "too few switches between modes"),
    ("effective sample size", "too few effectively independent samples"),
    ("swaps between copies", "the tempering copies barely exchange states"),
    ("cross-check", "the answers disagree with a deterministic cross-check"),
    ("no chain visited", "a high-probability state no chain visited"),
    ("partial domain blocks", "a slowly mixing patch was too large to draw as one block"),
)
# Below this share of the cores the chains' threads could use, the load of other programs is
# named as a cause of a flagged answer (a quarter of the time limit or more went to them).
LOW_SHARE = 0.75
_SHORT = ("not reached", "too few updates", "before any sample", "ended the run during burn-in")


def untrusted_checks(warnings: list[str]) -> list[str]:
    """What each warning that makes the intervals untrustworthy says, in a few words (once each)."""
    out: list[str] = []
    for key, words in _UNTRUSTING:
        if any(key in w for w in warnings) and words not in out:
            out.append(words)
    return out


def lead_warning(warnings: list[str]) -> str | None:
    """The sentence that goes first when the checks find the intervals untrustworthy, else None."""
    why = untrusted_checks(warnings)
    if not why:
        return None
    return ("error bars unreliable: " + "; ".join(why) + ", so the true values may lie outside "
            "estimate ± 1.96·stderr by more than the stderr says; do not rely on these answers as they are: raise "
            "time_limit, or get exact answers as the notes below say")


def contention_warning(warnings: list[str], limit: float | None, wall: float, cpu: float, threads: int) -> str | None:
    """The note that the machine's load left the sampling run too little CPU, when the answer is
    flagged (untrustworthy, or short of its tolerance) and the run's threads got under
    `LOW_SHARE` of the cores they could use; None otherwise."""
    if wall <= 0 or threads < 1:
        return None
    share = cpu / (wall * threads)
    if share >= LOW_SHARE:
        return None
    if not (untrusted_checks(warnings) or any(k in w for w in warnings for k in _SHORT)):
        return None
    within = f"; time_limit {limit:g} s" if limit is not None else ""
    more = (f"; raise time_limit to about {limit / max(share, 0.01):.0f} s for the same work, or run it when the machine "
            "is less busy") if limit is not None else "; run it when the machine is less busy"
    return (f"the machine was busy: sampling got {share:.0%} of the CPU its {threads} thread(s) could use "
            f"({cpu:.2g} s of CPU in {wall:.2g} s of wall time{within}), so it did about {share:.0%} of the work a quiet machine "
            f"would have done; the warnings above come from that shortfall as much as from the model{more}")


# A sampled value this many times rarer than loopy BP makes it, and off from BP by more than the
# tolerance, is the mark of states no chain visited. Loopy BP's own errors on loopy graphs are
# mostly overconfidence (small probabilities made smaller), so it is trusted only in the other
# direction, and only by this wide margin.
UNSEEN_RATIO = 4.0


def cross_check_warning(query: np.ndarray, estimates: np.ndarray, stderr: np.ndarray, belief: np.ndarray,
                        tolerance: float, exempt=None) -> str | None:
    """The warning when sampled answers (rows follow ``query``, graph ids) give some value almost
    no probability (under ``tolerance``) that loopy belief propagation's ``belief[n_vars, k]``
    gives clearly more: more than ``tolerance`` more, beyond the answer's 95% interval, and over
    `UNSEEN_RATIO` times the answer, where BP's belief for that variable is spread over values
    (its largest under 1 − ``tolerance``). ``exempt(rows)``: a bool per flagged row that is no
    witness (a target its own factors force: answered exactly whatever BP says, which near
    deterministic factors can mislead)."""
    k = min(estimates.shape[1], belief.shape[1])
    bp = belief[query][:, :k]
    est, se = estimates[:, :k], np.nan_to_num(stderr[:, :k], nan=np.inf)
    # Where belief propagation puts (nearly) all of a variable's probability on one value it has
    # settled into one mode, as it does on multi-modal models whatever the truth: no evidence
    # against chains that found other modes. Only a spread-out belief is a witness.
    spread = np.nanmax(bp, axis=1, keepdims=True) < 1.0 - tolerance
    with np.errstate(invalid="ignore"):
        gap = bp - est
        off = (np.isfinite(est) & np.isfinite(bp) & spread & (est < tolerance) & (gap > tolerance)
               & (gap > 1.96 * se) & (est * UNSEEN_RATIO < bp))
    if off.any() and exempt is not None:
        flagged = np.flatnonzero(off.any(axis=1))
        off[flagged[np.asarray(exempt(flagged), dtype=bool)]] = False
    if not off.any():
        return None
    rows, vals = np.nonzero(off)
    worst = int(np.argmax(gap[rows, vals]))
    r, v = int(rows[worst]), int(vals[worst])
    return (f"cross-check: {len(set(rows.tolist()))} answer(s) give a value far less probability than loopy belief "
            f"propagation does (worst: variable {int(query[r])} = {v}: {est[r, v]:.3g} ± {1.96 * se[r, v]:.2g} sampled, "
            f"{bp[r, v]:.3g} by belief propagation): states no chain visited may carry that probability, which the "
            "chains' agreement (R-hat) cannot show")
