"""Exact inference: variable elimination in log space (all marginals, log Z, MAP), min-fill
elimination orders and their numba kernels, the factor → log-potential tables every other family
reuses, and AUTO's decision whether exact elimination fits a budget.

May use `pdbq.graph` and below; imports nothing else from `pdbq.inference`.
"""
