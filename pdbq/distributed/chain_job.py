"""What every chain group of one answer needs, shipped to each worker once.

Its own module because the in-process groups (`chains`), the held groups (`chain_groups`) and the
budget-governed rounds (`chain_rounds`) all build or read it, and `chains` calls `chain_rounds`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np

from pdbq.graph.layout import FactorGraph
from pdbq.inference.mcmc.config import GibbsConfig, MixingConfig
from pdbq.inference.mcmc.kernels import KernelGraph

__all__ = ["ChainJob", "nbytes", "fixed_length"]


class ChainJob(NamedTuple):
    """What every chain group of one answer needs: scattered to each worker once."""

    graph: FactorGraph
    targets: np.ndarray  # int64 graph ids
    sites: np.ndarray  # int32 sampled variables
    selection: tuple[np.ndarray, np.ndarray] | None  # QAM's alias table over the sites
    config: GibbsConfig  # the whole run's (chains: all of them)
    mixing: MixingConfig | None  # None: single-site chains
    blocks: list | None  # the blocks of block moves, built once on the client
    kernel: KernelGraph  # the kernel arrays, derived once on the client (cheaper to ship than to derive again)
    sweeps: int = 1  # single-site passes per mixing cycle (AUTO's domain blocks: `domains.sweeps_per_cycle`)
    cutset: Any = None  # a `cutset.Cutset`: cutset sampling's sweeps (targets: the sampled ones, sites: every free variable)
    fixed: bool = False  # a run of a fixed length (`fixed_length`): its groups' rounds are sized as one process sizes them
    # ``blocks`` are AUTO's whole-domain blocks, run as `domain_chains` runs them (``sweeps`` passes
    # per draw, block variables estimated by their exact marginals given the rest); mixing is None
    domain: bool = False


def fixed_length(config: GibbsConfig, deadline: float | None) -> bool:
    """Whether the run has a fixed length (``steps``, no ``tolerance``, ``time_limit`` or deadline)."""
    return config.steps is not None and config.tolerance is None and config.time_limit is None and deadline is None


def nbytes(x: object) -> int:
    """Array bytes inside nested tuples/lists/dataclasses (what crosses the network, roughly)."""
    if isinstance(x, np.ndarray):
        return int(x.nbytes)
    if isinstance(x, (tuple, list)):
        return sum(nbytes(v) for v in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return sum(nbytes(getattr(x, f.name)) for f in dataclasses.fields(x))
    return 0
