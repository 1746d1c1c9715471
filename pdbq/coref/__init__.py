"""Coreference (entity resolution) as a model family at the grounding/graph level.

`layout` (the pair-score CSR), `blocking` (candidate pairs by DuckDB joins on declared keys),
`features` (pair comparisons computed once in DuckDB), `metrics` (B³ and pairwise scores).
Inference over the layout lives in `pdbq.inference.coreference.entity_moves` / `pdbq.inference.coreference.resolve`.
"""
