"""Distributed coreference MAP on Dask `distributed`: map/redistribute rounds over partitions of
entities (seed 001), in-process by default, a local process cluster, or an existing cluster."""

from pdbq.distributed.config import DistributedConfig
from pdbq.distributed.runner import DistributedResult, RoundStats, resolve_distributed

__all__ = ["DistributedConfig", "DistributedResult", "RoundStats", "resolve_distributed"]
