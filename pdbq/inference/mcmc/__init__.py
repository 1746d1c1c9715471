"""The MCMC engine: single-site Gibbs kernels over the graph layout, chains with explicit
xorshift streams, Rao-Blackwellised estimates with batch-means standard errors and R-hat, the
stopping rules, annealed MAP, exact transition matrices for checking kernels, and the
zero-probability evidence screen.

May use `pdbq.inference.exact` (log-potential tables) and `pdbq.graph` and below.
"""
