"""Inference on Dask `distributed`: the chains of a marginal query in groups on workers
(`chains.run_chains`; a run its budget ends goes segment by segment, `chain_rounds`),
coreference MAP by map/redistribute rounds over partitions of entities (seed 001;
`runner.resolve_distributed`), and by rounds over shards of blocks that the workers build and
keep (`shards.resolve_sharded`) — in-process by default, a local process cluster, or an
existing cluster."""

from pdbq.distributed.chains import DaskRun, run_chains
from pdbq.distributed.config import DistributedConfig
from pdbq.distributed.runner import DistributedResult, RoundStats, resolve_distributed
from pdbq.distributed.shards import ShardedResult, ShardSource, resolve_sharded, shard_by_components, write_pairs

__all__ = ["DaskRun", "DistributedConfig", "DistributedResult", "RoundStats", "ShardSource", "ShardedResult",
           "resolve_distributed", "resolve_sharded", "run_chains", "shard_by_components", "write_pairs"]
