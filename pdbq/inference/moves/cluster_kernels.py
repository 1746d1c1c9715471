"""numba kernels of the cluster moves (Swendsen–Wang / Edwards–Sokal) over one `ClusterGraph`.

Layout (`ClusterGraph`, built by `clusters.prepare_clusters`; kernels check nothing):

- bonds ``b``: ``bond_u[b]``, ``bond_v[b]`` (int32), ``bond_anti[b]`` (int8: 1 when the bond's
  relation is x_u ≠ x_v, binary variables only; 0 for x_u = x_v) and ``bond_w[b]`` ≥ 0 (float64):
  the factor's log-potential holds the term ``bond_w · 1[relation]``, so given the relation holds
  the bond is on with probability ``1 − exp(−β · bond_w)``.
- per factor ``f``: ``res_w[f]``/``res_anti[f]``, the same term as the factor's bond (0 for a
  factor without one); a cluster's relabelling is scored with every touching factor's
  log-potential *minus* that term (the residual the bonds do not carry; only pairwise factors
  carry bonds, and their residual is tabulated below), ``fweight[f]`` (the factor's weight), and
  the graph's own factor arrays (``function``, ``factor_offsets``,
  ``factor_vars``, ``factor_literals``, ``table_offset``, ``tables`` — the kernels' clamped
  tables — ``cardinality``, ``group``), its head groups (``semantics``, ``gweight``) and its
  variable → factor CSR (``var_offsets``, ``var_factors``).
- pairwise stand-alone factors over two distinct variables are tabulated: ``pair_off[f]`` (−1 for
  every other factor) is the start in ``pair_tab`` of the residual ``fweight·φ_f − res_w·1[rel]``
  over (x_first, x_second), second argument fastest; ``shift_inv[f]`` is 1 when that residual is
  unchanged by relabelling both arguments x ↦ (x + s) mod K (EQUAL): inside one cluster such a
  factor contributes a constant and is skipped.
- ``pinned[v]`` (uint8): 1 for evidence and for variables outside the sampled sites; a cluster
  holding one is never relabelled.

One pass (`cluster_pass`) samples every bond given the state, joins bonded variables with a
union-find, then visits the clusters in ascending (or, with probability 1/2, descending) order
of their root and draws each unpinned cluster's relabelling x ↦ (x + s) mod K, s ∈ 0..K−1
(binary: keep or flip; Potts: every label) from its exact conditional given the bonds and the
other variables. Bonds only join variables of one cardinality whose relation holds, so every
relabelling keeps every bond's relation: this is an exact Gibbs step of the Edwards–Sokal joint.
The random visiting direction makes the pass reversible (its adjoint is the other direction).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pdbq.inference.mcmc.kernels import _phi, group_value, run_chain  # the one factor evaluator of the engine
from pdbq.inference.mcmc.rng import next_state, uniform

__all__ = ["ClusterGraph", "ClusterScratch", "make_scratch", "cluster_pass", "link_bonds", "cluster_energies",
           "bond_probability", "pair_tables", "sweeps_and_passes"]


class ClusterGraph(NamedTuple):
    bond_u: np.ndarray  # int32[n_bonds]
    bond_v: np.ndarray  # int32[n_bonds]
    bond_anti: np.ndarray  # int8[n_bonds]
    bond_w: np.ndarray  # float64[n_bonds]
    res_w: np.ndarray  # float64[n_factors]
    res_anti: np.ndarray  # int8[n_factors]
    fweight: np.ndarray  # float64[n_factors]
    pinned: np.ndarray  # uint8[n_vars]
    cardinality: np.ndarray  # int32[n_vars]
    var_offsets: np.ndarray  # int64[n_vars+1]
    var_factors: np.ndarray  # int32[n_edges]
    function: np.ndarray  # int8[n_factors]
    factor_offsets: np.ndarray  # int64[n_factors+1]
    factor_vars: np.ndarray  # int32[n_edges]
    factor_literals: np.ndarray  # int32[n_edges]
    table_offset: np.ndarray  # int64[n_factors]
    tables: np.ndarray  # float64: clamped log-potentials (kernels.hard_tables)
    group: np.ndarray  # int32[n_factors]
    semantics: np.ndarray  # int8[n_groups]
    gweight: np.ndarray  # float64[n_groups]
    pair_off: np.ndarray  # int64[n_factors]
    pair_tab: np.ndarray  # float64
    shift_inv: np.ndarray  # uint8[n_factors]


class ClusterScratch(NamedTuple):
    """Per-chain work arrays of `cluster_pass` (never shared between threads)."""

    parent: np.ndarray  # int32[n_vars]: union-find, then each variable's root
    start: np.ndarray  # int64[n_vars+1]: members of root r at members[start[r]:start[r+1]]
    members: np.ndarray  # int32[n_vars]
    fstamp: np.ndarray  # int64[n_factors]: last cluster that listed the factor
    flist: np.ndarray  # int32[n_factors]: the cluster's general factors
    plist: np.ndarray  # int32[n_factors]: the cluster's tabulated pairwise factors
    gstamp: np.ndarray  # int64[n_groups]
    glist: np.ndarray  # int32[n_groups]
    gbase: np.ndarray  # float64[n_groups]: Σφ of the cluster's factors of a group, unrelabelled
    gacc: np.ndarray  # float64[n_groups]
    energy: np.ndarray  # float64[max_card]
    stamp: np.ndarray  # int64[1]


def make_scratch(cg: ClusterGraph) -> ClusterScratch:
    nv, nf, ng = cg.cardinality.shape[0], cg.function.shape[0], cg.semantics.shape[0]
    kmax = int(cg.cardinality.max()) if nv else 2
    return ClusterScratch(np.zeros(nv, dtype=np.int32), np.zeros(nv + 1, dtype=np.int64), np.zeros(nv, dtype=np.int32),
                          np.full(nf, -1, dtype=np.int64), np.zeros(nf, dtype=np.int32), np.zeros(nf, dtype=np.int32),
                          np.full(ng, -1, dtype=np.int64),
                          np.zeros(ng, dtype=np.int32), np.zeros(ng), np.zeros(ng), np.zeros(kmax),
                          np.zeros(1, dtype=np.int64))


@njit(cache=True)
def pair_tables(function, fo, to, fvars, lits, card, tables, fweight, group, res_w, res_anti):
    """(pair_off, pair_tab, shift_inv) of the layout above, from the factor arrays."""
    nf = function.shape[0]
    pair_off = np.full(nf, -1, dtype=np.int64)
    size = 0
    for f in range(nf):
        if fo[f + 1] - fo[f] == 2 and group[f] < 0 and fvars[fo[f]] != fvars[fo[f] + 1]:
            pair_off[f] = size
            size += card[fvars[fo[f]]] * card[fvars[fo[f] + 1]]
    tab = np.zeros(size)
    inv = np.zeros(nf, dtype=np.uint8)
    tmp = np.zeros(card.shape[0], dtype=np.int64)
    for f in range(nf):
        po = pair_off[f]
        if po < 0:
            continue
        u, v = fvars[fo[f]], fvars[fo[f] + 1]
        ku, kv = card[u], card[v]
        for a in range(ku):
            for b in range(kv):
                tmp[u] = a
                tmp[v] = b
                e = fweight[f] * _phi(function[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, tmp, -1, 0)
                if res_w[f] != 0.0 and (a == b) != (res_anti[f] == 1):
                    e -= res_w[f]
                tab[po + a * kv + b] = e
        if ku == kv:
            same = True
            for sh in range(1, ku):
                for a in range(ku):
                    for b in range(kv):
                        if abs(tab[po + ((a + sh) % ku) * kv + (b + sh) % kv] - tab[po + a * kv + b]) > 1e-12:
                            same = False
            inv[f] = 1 if same else 0
    return pair_off, tab, inv


@njit(cache=True, nogil=True)
def bond_probability(w, beta):
    """P(bond on | its relation holds) = 1 − e^(−β·w)."""
    return -np.expm1(-beta * w)


@njit(cache=True, nogil=True)
def _find(parent, v):
    while parent[v] != v:
        parent[v] = parent[parent[v]]  # path halving
        v = parent[v]
    return v


@njit(cache=True, nogil=True)
def link_bonds(bond_u, bond_v, on, parent, start, members):
    """Union the endpoints of every bond with ``on[b]``; then ``parent[v]`` is v's root (the
    smallest variable id of its cluster) and ``members[start[r]:start[r+1]]`` the members of root r
    (empty unless r is a root). Deterministic in ``on``: the cluster order is a function of the
    bonds alone."""
    nv = parent.shape[0]
    for v in range(nv):
        parent[v] = v
    for b in range(bond_u.shape[0]):
        if on[b]:
            ru = _find(parent, bond_u[b])
            rv = _find(parent, bond_v[b])
            if ru < rv:
                parent[rv] = ru
            elif rv < ru:
                parent[ru] = rv
    for v in range(nv):
        parent[v] = _find(parent, v)
    start[:] = 0
    for v in range(nv):
        start[parent[v] + 1] += 1
    for r in range(nv):
        start[r + 1] += start[r]
    fill = start[:nv].copy()
    for v in range(nv):
        r = parent[v]
        members[fill[r]] = v
        fill[r] += 1


@njit(cache=True, nogil=True, inline="always")  # a call passing the NamedTuples costs more than a small cluster
def cluster_energies(cg, values, group_sums, mem, beta, sc):
    """``sc.energy[s]`` = β × (log-potential of the relabelling x ↦ (x + s) mod K of the cluster
    ``mem`` minus its bond terms), up to a constant, for s < K; returns K. ``values`` is left as
    it was. Head groups are scored through ``group_sums`` (Σφ per group of the current state)."""
    fo, fn, to = cg.factor_offsets, cg.function, cg.table_offset
    fvars, lits, card, tables = cg.factor_vars, cg.factor_literals, cg.cardinality, cg.tables
    k = card[mem[0]]
    root = sc.parent[mem[0]]
    sc.stamp[0] += 1
    st = sc.stamp[0]
    nf = 0
    npf = 0
    ng = 0
    for i in range(mem.shape[0]):
        v = mem[i]
        for j in range(cg.var_offsets[v], cg.var_offsets[v + 1]):
            f = cg.var_factors[j]
            if cg.pair_off[f] >= 0:
                u0 = fvars[fo[f]]
                other = fvars[fo[f] + 1] if u0 == v else u0
                if sc.parent[other] == root:
                    if cg.shift_inv[f] == 1 or v != u0:
                        continue  # constant inside the cluster, or listed from its first argument
                sc.plist[npf] = f
                npf += 1
            elif sc.fstamp[f] != st:
                sc.fstamp[f] = st
                sc.flist[nf] = f
                nf += 1
                gr = cg.group[f]
                if gr >= 0 and sc.gstamp[gr] != st:
                    sc.gstamp[gr] = st
                    sc.glist[ng] = gr
                    ng += 1
    for s in range(k):
        e = 0.0
        for q in range(ng):
            sc.gacc[sc.glist[q]] = 0.0
        for q in range(npf):
            f = sc.plist[q]
            e += cg.pair_tab[cg.pair_off[f] + values[fvars[fo[f]]] * card[fvars[fo[f] + 1]] + values[fvars[fo[f] + 1]]]
        for q in range(nf):
            f = sc.flist[q]
            phi = _phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, values, -1, 0)
            gr = cg.group[f]
            if gr >= 0:
                sc.gacc[gr] += phi
            else:
                e += cg.fweight[f] * phi  # no bond: bonds sit on tabulated pairs
        for q in range(ng):
            gr = sc.glist[q]
            if s == 0:
                sc.gbase[gr] = sc.gacc[gr]
            e += cg.gweight[gr] * group_value(cg.semantics[gr], group_sums[gr] - sc.gbase[gr] + sc.gacc[gr])
        sc.energy[s] = beta * e
        for i in range(mem.shape[0]):  # next relabelling; after k steps values are back
            v = mem[i]
            values[v] = (values[v] + 1) % k
    return k


@njit(cache=True, nogil=True, inline="always")  # a call passing the NamedTuples costs more than a small cluster
def _relabel(cg, values, group_sums, mem, s, k, sc):
    """Apply shift s to the cluster, moving the group sums of its touched groups along."""
    fo, fn, to = cg.factor_offsets, cg.function, cg.table_offset
    fvars, lits, card, tables = cg.factor_vars, cg.factor_literals, cg.cardinality, cg.tables
    for i in range(mem.shape[0]):
        v = mem[i]
        values[v] = (values[v] + s) % k
    st = sc.stamp[0]
    ng = 0
    for i in range(mem.shape[0]):
        v = mem[i]
        for j in range(cg.var_offsets[v], cg.var_offsets[v + 1]):
            f = cg.var_factors[j]
            gr = cg.group[f]
            if gr >= 0 and sc.gstamp[gr] == st:
                sc.gstamp[gr] = -1  # visit each touched group once
                sc.glist[ng] = gr
                ng += 1
    if ng == 0:
        return
    for q in range(ng):
        sc.gacc[sc.glist[q]] = 0.0
    sc.stamp[0] += 1
    st2 = sc.stamp[0]
    for i in range(mem.shape[0]):
        v = mem[i]
        for j in range(cg.var_offsets[v], cg.var_offsets[v + 1]):
            f = cg.var_factors[j]
            gr = cg.group[f]
            if gr >= 0 and sc.fstamp[f] != st2:
                sc.fstamp[f] = st2
                sc.gacc[gr] += _phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, values, -1, 0)
    for q in range(ng):
        gr = sc.glist[q]
        group_sums[gr] += sc.gacc[gr] - sc.gbase[gr]


@njit(cache=True, nogil=True)
def cluster_pass(cg, values, group_sums, beta, rng, on, sc):
    """One Swendsen–Wang pass of one chain at inverse temperature β (module docstring): bonds,
    clusters, then every unpinned cluster relabelled from its conditional. ``rng``: uint64[1],
    the chain's own stream; ``on``: uint8[n_bonds] work array. Returns the clusters relabelled."""
    s = rng[0]
    nb = cg.bond_u.shape[0]
    for b in range(nb):
        u = cg.bond_u[b]
        v = cg.bond_v[b]
        same = values[u] == values[v]
        on[b] = 0
        if same != (cg.bond_anti[b] == 1):
            s = next_state(s)
            if uniform(s) < bond_probability(cg.bond_w[b], beta):
                on[b] = 1
    link_bonds(cg.bond_u, cg.bond_v, on, sc.parent, sc.start, sc.members)
    nv = values.shape[0]
    s = next_state(s)
    down = uniform(s) < 0.5
    moved = 0
    for i in range(nv):
        r = nv - 1 - i if down else i
        a, z = sc.start[r], sc.start[r + 1]
        if z == a:
            continue
        mem = sc.members[a:z]
        pinned = False
        for q in range(mem.shape[0]):
            if cg.pinned[mem[q]]:
                pinned = True
                break
        if pinned:
            continue
        k = cluster_energies(cg, values, group_sums, mem, beta, sc)
        top = sc.energy[0]
        for x in range(1, k):
            top = max(top, sc.energy[x])
        tot = 0.0
        for x in range(k):
            sc.energy[x] = np.exp(sc.energy[x] - top)
            tot += sc.energy[x]
        s = next_state(s)
        u = uniform(s) * tot
        pick = k - 1
        acc = 0.0
        for x in range(k):
            acc += sc.energy[x]
            if u < acc:
                pick = x
                break
        if pick != 0:
            _relabel(cg, values, group_sums, mem, pick, k, sc)
            moved += 1
    rng[0] = s
    return moved


@njit(cache=True, nogil=True)
def sweeps_and_passes(g, kg, st, sched, acc, unused, n_site, collect, cg, rng, on, sc, reps):
    """``reps`` times: ``n_site`` single-site updates (`kernels.run_chain`, adding conditionals
    when ``collect``) then one cluster pass at β = 1 — one call for what would otherwise be
    2·reps calls from Python, each unpacking the graph's arrays."""
    for _ in range(reps):
        run_chain(g, kg, st, sched, acc, unused, n_site, collect)
        cluster_pass(cg, st.values, st.group_sums, 1.0, rng, on, sc)
