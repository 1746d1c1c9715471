"""Inference on Dask `distributed`: the chains of a marginal query in groups on workers
(`chains.run_chains`), and coreference MAP by map/redistribute rounds over partitions of
entities (seed 001; `runner.resolve_distributed`) — in-process by default, a local process
cluster, or an existing cluster."""

from pdbq.distributed.chains import DaskRun, run_chains
from pdbq.distributed.config import DistributedConfig
from pdbq.distributed.runner import DistributedResult, RoundStats, resolve_distributed

__all__ = ["DaskRun", "DistributedConfig", "DistributedResult", "RoundStats", "resolve_distributed", "run_chains"]
