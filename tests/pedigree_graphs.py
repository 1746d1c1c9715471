"""Mendelian pedigrees as factor graphs (the linkage model of genetic-linkage analysis).

Every individual i carries, at each locus l, a paternal and a maternal allele (``A`` values).
Founders' alleles follow the allele frequencies. A child's paternal allele is one of its father's
two alleles, picked by a boolean *selector* (0: the father's paternal allele, 1: his maternal
one), and likewise from the mother; a selector keeps its value from one locus to the next unless
a recombination (probability ``theta``) flips it. A *marker* variable per typed individual and
locus holds the unordered genotype seen, observed as evidence (a typing error with probability
``error``). With ``mutation = 0`` the inheritance tables are deterministic (zero entries), so
single-site Gibbs is reducible: a child's allele cannot change without its parent's allele or its
selector changing in the same move. Marriages between relatives (cousins) close loops, which raise
the induced width.

    from pedigree_graphs import pedigree
    g = pedigree(founders=8, generations=3, loci=4, seed=0).graph
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from pdbq.graph.builder import GraphBuilder
from pdbq.graph.layout import FactorGraph
from pdbq.language.nodes import FactorFunction as F


@dataclass(frozen=True)
class Pedigree:
    graph: FactorGraph
    alleles: np.ndarray  # [individuals, loci, 2] variable ids (paternal, maternal)
    selectors: np.ndarray  # [individuals, loci, 2] variable ids, -1 for founders
    parents: list[tuple[int, int] | None]  # (father, mother) per individual, None for founders


def _log(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(p)


def pedigree(founders: int = 8, generations: int = 3, loci: int = 4, alleles: int = 2, *, children: int = 2,
             theta: float = 0.1, error: float = 0.0, mutation: float = 0.0, typed: float = 0.7,
             seed: int = 0) -> Pedigree:
    """A random pedigree: ``founders`` founders, then ``generations`` generations, each made of
    couples of the previous generation (and now and then a founder married in), ``children``
    children per couple (1 to ``children``); each individual is typed (its markers observed) with
    probability ``typed``, the markers drawn from one forward simulation of the model."""
    rng = np.random.default_rng(seed)
    parents: list[tuple[int, int] | None] = [None] * founders
    gen = list(range(founders))
    for _ in range(generations):
        pool = list(gen)
        rng.shuffle(pool)
        if len(pool) % 2:
            parents.append(None)  # a spouse from outside the pedigree
            pool.append(len(parents) - 1)
        nxt = []
        for a, b in zip(pool[::2], pool[1::2]):
            for _ in range(int(rng.integers(1, children + 1))):
                parents.append((int(a), int(b)))
                nxt.append(len(parents) - 1)
        gen = nxt if len(nxt) >= 2 else gen + nxt
    n = len(parents)
    freq = rng.dirichlet(np.full(alleles, 2.0), size=loci)

    # one forward simulation gives the observed markers
    truth = np.zeros((n, loci, 2), dtype=np.int64)
    sel_truth = np.zeros((n, loci, 2), dtype=np.int64)
    for i, par in enumerate(parents):
        for s in range(2):
            if par is None:
                truth[i, :, s] = [rng.choice(alleles, p=freq[l]) for l in range(loci)]
                continue
            bit = int(rng.integers(2))
            for l in range(loci):
                if l and rng.random() < theta:
                    bit ^= 1
                sel_truth[i, l, s] = bit
                truth[i, l, s] = truth[par[s], l, bit]
    pairs = list(itertools.combinations_with_replacement(range(alleles), 2))
    pair_id = {p: k for k, p in enumerate(pairs)}

    b = GraphBuilder()
    avar = np.full((n, loci, 2), -1, dtype=np.int64)
    svar = np.full((n, loci, 2), -1, dtype=np.int64)
    for i in range(n):
        for l in range(loci):
            for s in range(2):
                avar[i, l, s] = b.add_variable(alleles)
                if parents[i] is not None:
                    svar[i, l, s] = b.add_variable(2)
    # inheritance: P(child allele | parent's paternal, parent's maternal, selector)
    inherit = np.full((alleles, alleles, 2, alleles), mutation / max(alleles - 1, 1))
    for gp, gm, sb in itertools.product(range(alleles), range(alleles), range(2)):
        inherit[gp, gm, sb, :] = mutation / max(alleles - 1, 1)
        inherit[gp, gm, sb, (gm if sb else gp)] = 1.0 - mutation
    recomb = _log(np.array([[1 - theta, theta], [theta, 1 - theta]]))
    for i, par in enumerate(parents):
        for l in range(loci):
            for s in range(2):
                if par is None:
                    b.add_factor(F.TABLE, [int(avar[i, l, s])], table=_log(freq[l]))
                    continue
                p = par[s]
                # argument order (parent paternal, parent maternal, selector, child): last fastest
                b.add_factor(F.TABLE, [int(avar[p, l, 0]), int(avar[p, l, 1]), int(svar[i, l, s]), int(avar[i, l, s])],
                             table=_log(inherit).ravel())
                if l:
                    b.add_factor(F.TABLE, [int(svar[i, l - 1, s]), int(svar[i, l, s])], table=recomb.ravel())
                else:
                    b.add_factor(F.TABLE, [int(svar[i, l, s])], table=_log(np.array([0.5, 0.5])))
    # markers: the unordered genotype, seen with a typing error
    k = len(pairs)
    seen = np.full((alleles, alleles, k), error / max(k - 1, 1))
    for gp, gm in itertools.product(range(alleles), range(alleles)):
        seen[gp, gm, pair_id[tuple(sorted((gp, gm)))]] = 1.0 - error
    for i in range(n):
        if rng.random() >= typed:
            continue
        for l in range(loci):
            obs = pair_id[tuple(sorted(truth[i, l]))]
            m = b.add_variable(k, evidence=obs)
            b.add_factor(F.TABLE, [int(avar[i, l, 0]), int(avar[i, l, 1]), m], table=_log(seen).ravel())
    return Pedigree(b.build(), avar, svar, parents)
