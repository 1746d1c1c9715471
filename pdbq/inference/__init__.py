"""pdbq.inference: every algorithm that turns a graph (`pdbq.graph`) into estimates.

One subpackage per family of algorithms, layered (import-linter checks it):

- `exact`: variable elimination, elimination orders, log-potential tables, AUTO's cost model;
- `mcmc`: the Gibbs and annealing engine — kernels, chains, estimates, RNG streams, stopping;
- `query_aware`, `moves`, `coreference` (siblings, above `mcmc`): QAM's selection distribution,
  the moves that mix (blocks, cutsets, clusters, tempering, jumps), and coreference sampling
  over clusterings.

Nothing here reads DuckDB: inputs are the array layouts of `pdbq.graph` and `pdbq.coref`.
"""
