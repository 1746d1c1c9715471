"""The moves that mix where single-site Gibbs sticks: exact blocks, cutset conditioning,
Swendsen–Wang-style clusters, categorical domain blocks, replica exchange (tempering), mode
jumps with path energy differences, and the choice among them (`move_choice`) that AUTO uses.

Each move shares the engine's step signature. May use `pdbq.inference.mcmc` and
`pdbq.inference.exact`; not its siblings `query_aware` and `coreference`.
"""
