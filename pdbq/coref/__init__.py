"""Coreference (entity resolution) as a model family at the grounding/graph level.

`layout` (the pair-score CSR), `model` (records, blocking keys, linear pair features), the estimated
Fellegi–Sunter pair model: `levels` (comparison levels sniffed per field), `pair_model` (the fitted
model and pair scoring: the interface), `estimate` (u, EM, prior), `autoblock` (blocking rules with a
recall estimate);
`features` (pair comparisons computed once in DuckDB), `metrics` (B³ and pairwise scores).
Inference over the layout lives in `pdbq.inference.coreference.entity_moves` / `pdbq.inference.coreference.resolve`.
"""
