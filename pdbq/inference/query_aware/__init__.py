"""Query-aware selection (QAM): influence trail scores between variables and the selection
distribution over the sites a query's chain updates.

May use `pdbq.inference.mcmc` and `pdbq.inference.exact`; not its siblings `moves` and
`coreference`.
"""
