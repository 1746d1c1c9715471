"""What a mixing run's moves learn in burn-in from all its chains, and what they tally after it.

Replica exchange adapts one temperature ladder from the swap rates of every chain, and mode
jumps fill one pool of local modes from every chain's quenches (`mixing`): after each burn-in
round, the round's per-chain statistics (`BurnStats`, rows in chain order) go into an
`Adaptation`, and every chain moves on with the adapted ladder and pool (`Adapted`). In one
process that happens between rounds; chain groups on Dask workers send their rows to the client,
which concatenates them in chain order, adapts once and sends the result to every group
(`pdbq.distributed.chain_rounds`), so every group continues with exactly the ladder and pool of
the in-process run. After burn-in each chain tallies its own swaps and jumps (`MovesTally`, rows
in chain order), so the rates reported over all chains are the same however the chains were
grouped.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from pdbq.inference.mcmc.config import MixingConfig
from pdbq.inference.moves.jumps import ModePool
from pdbq.inference.moves.tempering import adapt_ladder, initial_ladder

__all__ = ["BurnStats", "Adapted", "Adaptation", "MovesTally", "adapts"]


def adapts(mixing: MixingConfig | None) -> bool:
    """Whether the moves of ``mixing`` adapt from all chains in burn-in (a ladder or a mode pool)."""
    return mixing is not None and mixing.active and (mixing.tempering > 1 or bool(mixing.jumps))


class BurnStats(NamedTuple):
    """One burn-in round of some chains, rows in chain order."""

    swap_acc: np.ndarray  # float64[chains, K-1]: expected acceptances of the round's swap attempts
    swap_att: np.ndarray  # float64[chains, K-1]: the attempts
    candidates: tuple  # per chain: the (mode, energy) pairs its quenches found, in order

    @staticmethod
    def concat(parts: Sequence[BurnStats]) -> BurnStats:
        """The stats of consecutive chain groups as those of all their chains."""
        return BurnStats(np.concatenate([p.swap_acc for p in parts]), np.concatenate([p.swap_att for p in parts]),
                         tuple(c for p in parts for c in p.candidates))

    def for_shipping(self) -> BurnStats:
        """The same stats with each chain's repeated modes left out: a mode offered again to the
        pool never changes it (it is there, or was turned away or evicted for an energy at least
        as high), so the pool comes out the same."""
        out = []
        for cands in self.candidates:
            seen: set[bytes] = set()
            kept = []
            for mode, energy in cands:
                key = mode.tobytes()
                if key not in seen:
                    seen.add(key)
                    kept.append((mode, energy))
            out.append(tuple(kept))
        return self._replace(candidates=tuple(out))


class Adapted(NamedTuple):
    """The ladder and mode pool the chains move on with (pool None without jumps)."""

    betas: np.ndarray
    pool: ModePool | None


class Adaptation:
    """The ladder and the mode pool of one run, adapted after every burn-in round."""

    def __init__(self, mixing: MixingConfig):
        self.mixing = mixing
        self.betas = initial_ladder(mixing.tempering, mixing.beta_min)
        self.pool = ModePool(mixing.jumps) if mixing.jumps else None
        self.rounds = 0

    def after_round(self, stats: BurnStats) -> Adapted:
        """Adapt from one burn-in round of every chain (rows in chain order)."""
        if self.mixing.tempering > 1:
            acc, att = stats.swap_acc.sum(axis=0), stats.swap_att.sum(axis=0)
            rates = np.where(att > 0, acc / np.maximum(att, 1), 0.3)
            self.betas = adapt_ladder(self.betas, rates, floor=0.5 * self.mixing.beta_min)
        if self.pool is not None:
            for cands in stats.candidates:  # chain order: the pool is a function of the seed
                for mode, energy in cands:
                    self.pool.offer(mode, energy)
        self.rounds += 1
        return Adapted(self.betas, self.pool)

    def snapshot(self) -> Adapted:
        """The current ladder and pool, unaffected by later rounds (to ship, or to replay)."""
        return Adapted(self.betas.copy(), copy.deepcopy(self.pool))


class MovesTally(NamedTuple):
    """What the moves did after burn-in: swap rows per chain, jump totals."""

    swap_acc: np.ndarray  # float64[chains, K-1]
    swap_att: np.ndarray
    jump_acc: float
    jump_att: float

    @staticmethod
    def concat(parts: Sequence[MovesTally]) -> MovesTally:
        return MovesTally(np.concatenate([p.swap_acc for p in parts]), np.concatenate([p.swap_att for p in parts]),
                          float(sum(p.jump_acc for p in parts)), float(sum(p.jump_att for p in parts)))

    def swap_rates(self) -> np.ndarray:
        """Accepted share of the swaps per neighbouring pair of copies, over all chains."""
        return self.swap_acc.sum(axis=0) / np.maximum(self.swap_att.sum(axis=0), 1)

    def jump_rate(self) -> float:
        return self.jump_acc / self.jump_att if self.jump_att else float("nan")
