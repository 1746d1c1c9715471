"""Coreference (entity resolution) as a model family at the grounding/graph level.

`layout` (the pair-score CSR), `model` (records, blocking keys, linear pair features), `metrics`
(B³ and pairwise scores), and the estimated Fellegi–Sunter pair model: `levels` (comparison levels
sniffed per field), `pair_levels` (level vectors of pairs: DuckDB, token sets in numba),
`pair_model` (the fitted model and pair scoring: the interface), `estimate` (u, EM, prior, fit from
labels), `autoblock` (blocking rules with a recall estimate).
Inference over the layout lives in `pdbq.inference.coreference.entity_moves` / `pdbq.inference.coreference.resolve`.
"""
