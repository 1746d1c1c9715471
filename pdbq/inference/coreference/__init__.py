"""Coreference inference over clusterings: entity and member moves, annealed MAP and pairwise
posteriors (`resolve`), subsampled proposal scoring, and sub/super-entity hierarchy moves.

Runs on `pdbq.coref`'s pair-graph layout. May use `pdbq.inference.mcmc` (RNG streams);
not its siblings `query_aware` and `moves`.
"""
