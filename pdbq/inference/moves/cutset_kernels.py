"""numba kernels of the cutset sampler: log Z of the remainder, calibration, collapsed updates.

The remainder (the free variables outside the cutset) is packed as `block_kernels.BlockArrays`
(one block per connected component of the remainder, in its elimination order); the factors
whose free scope lies inside the cutset are packed as `CutArrays`:

the cutset variables are cut into *groups* updated jointly: group j holds
``cut_var[g_off[j] .. g_off[j+1]-1]``; its factors are ``cf_off[j] .. cf_off[j+1]-1`` (each
internal factor listed once under every group its scope meets); factor k reads
``tables[cf_table[k] + Σ values[ca_var[i]] · ca_stride[i]]`` over ``ca_off[k] .. ca_off[k+1]-1``.
Its remainder blocks (those with a factor reading one of its variables) are
``cb_blk[cb_off[j] .. cb_off[j+1]-1]``.

Per chain a scratch buffer ``psi`` (at least max(blk_psi) floats) holds one block's clique
potentials and upward messages (as in `block_kernels`), ``tmp`` (at least the largest message)
the downward messages; ``logz`` (float64[n_blocks]) caches each block's log Z at the current
cutset values.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pdbq.inference.moves.block_kernels import advance, block_fill, block_sample_back
from pdbq.inference.mcmc.rng import next_state, uniform

__all__ = ["CutArrays", "block_log_z", "calibrate_block", "collapsed_conditional", "cutset_sweep", "draw_block", "group_size"]


class CutArrays(NamedTuple):
    cut_var: np.ndarray  # int64[n_cut], grouped
    g_off: np.ndarray  # int64[n_groups+1]
    cf_off: np.ndarray  # int64[n_groups+1]
    cf_table: np.ndarray  # int64[n_cf]
    ca_off: np.ndarray  # int64[n_cf+1]
    ca_var: np.ndarray  # int64[n_ca]
    ca_stride: np.ndarray  # int64[n_ca]
    cb_off: np.ndarray  # int64[n_groups+1]
    cb_blk: np.ndarray  # int64[n_cb]
    tables: np.ndarray  # float64: clamped log-tables of the internal factors
    dirty: np.ndarray  # uint8[n_groups, n_cliques]: cliques whose potential or message depends on the group


@njit(cache=True)
def _lse_root(ba, c0, c1, psi):
    """log Z of one filled block: the sum over its roots of log-sum-exp of the root potential."""
    total = 0.0
    for c in range(c0, c1):
        if ba.c_parent[c] < 0:
            off = ba.c_psi[c]
            n = ba.c_size[c]
            m = -np.inf
            for e in range(n):
                if psi[off + e] > m:
                    m = psi[off + e]
            s = 0.0
            for e in range(n):
                s += np.exp(psi[off + e] - m)
            total += np.log(s) + m
    return total


@njit(cache=True)
def block_log_z(ba, b, values, psi, coords):
    """log Σ_{x_b} exp(Σ factors of block b) at the outside values in ``values``."""
    c0 = ba.blk_clique[b]
    c1 = ba.blk_clique[b + 1]
    block_fill(ba, c0, c1, values, psi, coords, 1.0)
    return _lse_root(ba, c0, c1, psi)


@njit(cache=True)
def calibrate_block(ba, b, values, psi, coords, tmp, probs, tix, sums, counts):
    """After `block_fill` of block b: the downward pass (Hugin: the parent's belief minus the
    child's own upward message, summed onto the child's separator), then every block variable's
    exact marginal given the outside values goes into ``sums``/``counts`` (rows ``tix[v]``)."""
    c0 = ba.blk_clique[b]
    c1 = ba.blk_clique[b + 1]
    for c in range(c1 - 1, c0 - 1, -1):
        off = ba.c_psi[c]
        a0 = ba.ax_off[c]
        kv = ba.ax_card[a0]
        rest = ba.c_size[c] // kv
        p = ba.c_parent[c]
        if p >= 0:
            # the factor of p that reads c's upward message: its strides map p's cells to c's separator
            k = ba.f_off[p]
            while not (ba.f_msg[k] == 1 and ba.f_table[k] == ba.c_msg[c]):
                k += 1
            for r in range(rest):
                tmp[r] = -np.inf
            poff = ba.c_psi[p]
            pa0 = ba.ax_off[p]
            na = ba.ax_off[p + 1] - pa0
            for a in range(na):
                coords[a] = 0
            mo = ba.c_msg[c]
            # two passes (max, then sum) keep the log-sum-exp exact
            for e in range(ba.c_size[p]):
                s = 0
                for j in range(ba.arg_off[k], ba.arg_off[k + 1]):
                    s += coords[ba.arg_axis[j]] * ba.arg_tstride[j]
                t = psi[poff + e] - psi[mo + s]
                if t > tmp[s]:
                    tmp[s] = t
                advance(coords, ba.ax_card, pa0, na)
            # tmp[rest:] holds the sums
            for r in range(rest):
                tmp[rest + r] = 0.0
            for a in range(na):
                coords[a] = 0
            for e in range(ba.c_size[p]):
                s = 0
                for j in range(ba.arg_off[k], ba.arg_off[k + 1]):
                    s += coords[ba.arg_axis[j]] * ba.arg_tstride[j]
                tmp[rest + s] += np.exp(psi[poff + e] - psi[mo + s] - tmp[s])
                advance(coords, ba.ax_card, pa0, na)
            for r in range(rest):
                d = np.log(tmp[rest + r]) + tmp[r]
                for x in range(kv):
                    psi[off + x * rest + r] += d
        v = ba.c_var[c]
        t = tix[v]
        if t >= 0:
            m = -np.inf
            for e in range(kv * rest):
                if psi[off + e] > m:
                    m = psi[off + e]
            tot = 0.0
            for x in range(kv):
                acc = 0.0
                for r in range(rest):
                    acc += np.exp(psi[off + x * rest + r] - m)
                probs[x] = acc
                tot += acc
            for x in range(kv):
                sums[t, x] += probs[x] / tot
            counts[t] += 1


@njit(cache=True)
def _internal(ca, j, values):
    s = 0.0
    for k in range(ca.cf_off[j], ca.cf_off[j + 1]):
        idx = ca.cf_table[k]
        for i in range(ca.ca_off[k], ca.ca_off[k + 1]):
            idx += np.int64(values[ca.ca_var[i]]) * ca.ca_stride[i]
        s += ca.tables[idx]
    return s


@njit(cache=True)
def _set_config(ca, j, idx, values, card):
    """Write configuration ``idx`` (mixed radix, last variable fastest) of group j into values."""
    for i in range(ca.g_off[j + 1] - 1, ca.g_off[j] - 1, -1):
        v = ca.cut_var[i]
        values[v] = idx % card[v]
        idx //= card[v]


@njit(cache=True)
def group_size(ca, j, card):
    n = 1
    for i in range(ca.g_off[j], ca.g_off[j + 1]):
        n *= card[ca.cut_var[i]]
    return n


@njit(cache=True)
def collapsed_conditional(ba, ca, j, values, psi, coords, card, logp, probs, naive):
    """p(x_G | x_{C∖G}) over the configurations of group j, the remainder summed out exactly
    (``naive``, tests only: the remainder ignored), into ``probs[:n]``; returns n. The group's
    values are left at its last configuration. Per block, the first configuration fills every
    clique; the others refill only the cliques the group reaches (``dirty``: those reading a
    group variable and their ancestors), the rest of the buffer is unchanged."""
    n = group_size(ca, j, card)
    for idx in range(n):
        _set_config(ca, j, idx, values, card)
        logp[idx] = _internal(ca, j, values)
    if not naive:
        for i in range(ca.cb_off[j], ca.cb_off[j + 1]):
            b = ca.cb_blk[i]
            c0 = ba.blk_clique[b]
            c1 = ba.blk_clique[b + 1]
            for idx in range(n):
                _set_config(ca, j, idx, values, card)
                if idx == 0:
                    block_fill(ba, c0, c1, values, psi, coords, 1.0)
                else:
                    for c in range(c0, c1):
                        if ca.dirty[j, c] != 0:
                            block_fill(ba, c, c + 1, values, psi, coords, 1.0)
                logp[idx] += _lse_root(ba, c0, c1, psi)
    m = -np.inf
    for idx in range(n):
        if logp[idx] > m:
            m = logp[idx]
    tot = 0.0
    for idx in range(n):
        probs[idx] = np.exp(logp[idx] - m)
        tot += probs[idx]
    for idx in range(n):
        probs[idx] /= tot
    return n


@njit(cache=True, nogil=True)
def cutset_sweep(ba, ca, order, blks, values, psi, coords, tmp, logp, probs, card, rng, collect, tix, sums, counts,
                 naive):
    """One sweep: every group in ``order`` (group indices) redrawn jointly from its collapsed
    conditional (each variable's share of it is its Rao-Blackwellised value), then every
    remainder block in ``blks`` drawn exactly given the cutset (forward filtering, backward
    sampling, so the chain's state is a whole world) and, with ``collect``, calibrated for the
    remainder targets' exact conditional marginals. ``naive`` (tests only) drops the remainder
    from the cutset conditionals: the broken kernel the tests must reject."""
    s = rng[0]
    for i in range(order.shape[0]):
        j = order[i]
        n = collapsed_conditional(ba, ca, j, values, psi, coords, card, logp, probs, naive)
        s = next_state(s)
        u = uniform(s)
        pick = n - 1
        acc = 0.0
        for idx in range(n):
            acc += probs[idx]
            if u < acc:
                pick = idx
                break
        if collect:
            for idx in range(n):
                _set_config(ca, j, idx, values, card)
                for g in range(ca.g_off[j], ca.g_off[j + 1]):
                    v = ca.cut_var[g]
                    t = tix[v]
                    if t >= 0:
                        sums[t, values[v]] += probs[idx]
            for g in range(ca.g_off[j], ca.g_off[j + 1]):
                t = tix[ca.cut_var[g]]
                if t >= 0:
                    counts[t] += 1
        _set_config(ca, j, pick, values, card)
    for bi in range(blks.shape[0]):
        b = blks[bi]
        c0 = ba.blk_clique[b]
        c1 = ba.blk_clique[b + 1]
        block_fill(ba, c0, c1, values, psi, coords, 1.0)
        s = block_sample_back(ba, c0, c1, values, psi, probs, s, False, tix, sums, counts)
        if collect:
            calibrate_block(ba, b, values, psi, coords, tmp, probs, tix, sums, counts)
    rng[0] = s


@njit(cache=True, nogil=True)
def draw_block(ba, b, values, psi, coords, tmp, probs, rng, collect, tix, sums, counts):
    """Draw block b exactly given the outside values (and, with ``collect``, add its exact
    marginals to ``sums``/``counts``)."""
    c0 = ba.blk_clique[b]
    c1 = ba.blk_clique[b + 1]
    block_fill(ba, c0, c1, values, psi, coords, 1.0)
    rng[0] = block_sample_back(ba, c0, c1, values, psi, probs, rng[0], False, tix, sums, counts)
    if collect:
        calibrate_block(ba, b, values, psi, coords, tmp, probs, tix, sums, counts)
