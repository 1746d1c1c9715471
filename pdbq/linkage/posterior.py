"""Match probabilities of the front door: the clustering posterior as two Arrow tables.

`pairs`: one row per candidate pair, `(id_l, id_r, match_probability, se)`: the posterior
probability that the two records are one entity, P(y_l = y_r), under the clustering model
P(y) ∝ exp(ψ(y)) at temperature 1, with its standard error across chains. It is a property of
the whole clustering, not of the pair alone: transitivity is included (a pair is more likely
joined when both records match a third), which a pairwise score with an independence
assumption cannot say.

`clusters`: one row per cluster of the MAP clustering, `(cluster, size, probability, se)`:
P(this set of records is exactly one entity), i.e. the posterior mass of the clusterings in
which its members share one entity and no other record joins them. A singleton's probability
is that of staying alone. Rows are sorted least certain first (for review).

Both come from one run of `pdbq.inference.coreference.posterior.sample_mention_moves` started at
the MAP clustering (`POSTERIOR_CONFIG`: 4 chains, 5 burn-in and 20 sampling passes; standard
errors by batch means): Gibbs mention moves, and a pair's probability is the mean of its
conditional probability of one entity given the other records' entities (Rao–Blackwellised),
so it is never 0 or 1 where the model is not; with cannot-link groups (one-to-one linking),
from `sample_posterior`, whose moves respect them. The posterior is the clustering model's own,
over the clusterings whose clusters candidate pairs connect. That model sums the pair scores
inside an entity, so where two clusters of the MAP clustering are held apart by hundreds of
nats (Cora), its pair probabilities across them are ~0 even where the MAP is wrong: the pair
model's own probability (`scores.match_probability`) is the better-calibrated number there.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from pdbq.coref.layout import PairGraph
from pdbq.inference.coreference.posterior import ClusteringPosterior, clusters_csr, sample_mention_moves, sample_posterior
from pdbq.inference.coreference.resolve import CorefConfig

__all__ = ["POSTERIOR_CONFIG", "match_probabilities", "overconfidence_warning"]

# chains start at the MAP clustering, near the posterior's mode, so a short burn-in suffices. A Gibbs
# pass reads every candidate pair twice (Cora: 845,136 reads, ~10 ms); Rao–Blackwellised pair
# probabilities from 4 × 20 passes gave the same Cora log-loss and ECE as 4 × 100 (0.327, 0.0111;
# largest standard error 0.038) at 1.2 s CPU instead of 5.5 s
# p_split_merge is used only with cannot-link groups (`sample_posterior`): on Cora split/merge moves
# cost ~99% of the time and were accepted about 20 times in 26,000 proposals
POSTERIOR_CONFIG = CorefConfig(sweeps=20, burn_in=5, chains=4, temperature=1.0, p_split_merge=0.1)


def match_probabilities(graph: PairGraph, a: np.ndarray, b: np.ndarray, ids: np.ndarray, labels: np.ndarray,
                        config: CorefConfig = POSTERIOR_CONFIG,
                        cannot_link: np.ndarray | None = None) -> tuple[pa.Table, pa.Table, ClusteringPosterior]:
    """(pairs, clusters, posterior) for candidate pairs (a[k], b[k]) (dense mention indices),
    record ids `ids` and the MAP labels `labels` (`labels[m]`: smallest mention index of m's
    cluster; `cannot_link`: groups never joined, as in `resolve_map`). Module docstring for the tables."""
    ptr, mem = clusters_csr(labels)
    if cannot_link is None and config.subsample.is_exact and config.sweeps >= 2:
        post = sample_mention_moves(graph, a, b, (ptr, mem), config, start=labels, batches=min(10, config.sweeps))
    else:
        post = sample_posterior(graph, a, b, (ptr, mem), config, start=labels, cannot_link=cannot_link)
    ids = np.asarray(ids)
    pairs = pa.table({
        "id_l": pa.array(ids[a]), "id_r": pa.array(ids[b]),
        "match_probability": pa.array(post.pair_prob, pa.float64()), "se": pa.array(post.pair_stderr, pa.float64()),
    })
    first = mem[ptr[:-1]]
    order = np.lexsort((ids[first], post.cluster_prob))
    clusters = pa.table({
        "cluster": pa.array(ids[labels[first]][order]),
        "size": pa.array(np.diff(ptr)[order].astype(np.int64)),
        "probability": pa.array(post.cluster_prob[order], pa.float64()),
        "se": pa.array(post.cluster_stderr[order], pa.float64()),
    })
    return pairs, clusters, post


def overconfidence_warning(posterior: np.ndarray, pair_model: np.ndarray, unsure: float = 0.05,
                           sure: float = 1e-6) -> str | None:
    """A warning, or None, where the clustering posterior is certain (p < `sure` or p > 1 − `sure`)
    of pairs that the pair model alone puts between `unsure` and 1 − `unsure`, and the pair
    model expects at least one match (non-match) among the pairs put at ~0 (~1). Needs no
    labels: it compares the two models' own probabilities. The clustering model adds the scores
    of every pair inside an entity, so where those pairs share evidence (one record format
    compared many times) it is certain where the pairs are not (measured on Cora: 13% of the
    pairs it put below 1e-6 that way were matches)."""
    post, pm = np.asarray(posterior, float), np.asarray(pair_model, float)
    mid = (pm > unsure) & (pm < 1.0 - unsure)
    low, high = mid & (post < sure), mid & (post > 1.0 - sure)
    e_low, e_high = float(pm[low].sum()), float((1.0 - pm[high]).sum())
    if e_low < 1.0 and e_high < 1.0:
        return None
    return (f"the clustering posterior puts {int(low.sum()):,} pairs below {sure:g} and {int(high.sum()):,} above "
            f"1 - {sure:g} that the pair model alone puts between {unsure:g} and {1 - unsure:g}; the pair model "
            f"expects {e_low:,.0f} matches and {e_high:,.0f} non-matches among them. The clustering model adds "
            "the scores of every pair inside an entity, which overstates certainty where they share evidence: "
            "for those pairs compare scores.match_probability")
