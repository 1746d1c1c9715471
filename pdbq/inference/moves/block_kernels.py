"""numba kernels of the exact block moves: forward filtering, backward sampling over flat arrays.

`pack_blocks` flattens a list of `blocks.Block` into one `BlockArrays` (a NamedTuple of arrays,
documented below); `block_pass` resamples a sequence of blocks of one chain in place, with the
chain's explicit xorshift state, and adds each target's draw probabilities to the chain's
Rao-Blackwellised sums. It computes exactly what `blocks.BlockSampler` computes (the tests check
both against the same transition matrices); the Python class stays the readable reference.

Layout. Cliques of all blocks are numbered globally; block b owns cliques
``blk_clique[b] .. blk_clique[b+1]-1`` in its elimination order, and clique ``c`` eliminates
variable ``c_var[c]``. A clique's potential is a row-major table over its axes
``ax_off[c] .. ax_off[c+1]-1`` (axis 0 = its own variable), at ``c_psi[c]`` in a per-chain buffer
(offsets restart at 0 in every block). For axis a: ``ax_card[a]``, ``ax_clique[a]`` (the clique
of that axis' variable, i.e. where its value is sampled), ``ax_stride[a]`` (row-major stride in
the clique). Clique c's message to its parent (over its axes 1.., row-major) is kept at
``c_msg[c]`` in the same buffer, after the block's potentials.
Factor k (``f_off[c] .. f_off[c+1]-1`` belong to clique c) has arguments
``arg_off[k] .. arg_off[k+1]-1``: ``arg_var`` (graph variable), ``arg_axis`` (clique axis
index relative to ``ax_off[c]``, −1 when outside the block) and ``arg_tstride`` (stride in the
table at ``f_table[k]`` inside ``tables``, clamped log-potentials). A child's message is read
by the same loop as a factor with ``f_msg[k] == 1`` whose table is in the buffer.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pdbq.inference.mcmc.rng import next_state, uniform

__all__ = ["BlockArrays", "pack_blocks", "block_pass", "block_fill", "block_sample_back", "advance", "sample_cached"]


class BlockArrays(NamedTuple):
    blk_clique: np.ndarray  # int64[n_blocks+1]
    blk_psi: np.ndarray  # int64[n_blocks]: potential buffer size of each block
    c_var: np.ndarray  # int64[n_cliques]
    c_parent: np.ndarray  # int64[n_cliques]: global clique index or -1
    c_psi: np.ndarray  # int64[n_cliques]
    c_size: np.ndarray  # int64[n_cliques]
    ax_off: np.ndarray  # int64[n_cliques+1]
    ax_card: np.ndarray  # int64[n_axes]
    ax_clique: np.ndarray  # int64[n_axes]
    ax_stride: np.ndarray  # int64[n_axes]
    c_msg: np.ndarray  # int64[n_cliques]: offset of the clique's message in the buffer
    f_off: np.ndarray  # int64[n_cliques+1]
    f_table: np.ndarray  # int64[n_factors]: offset in tables, or of a child's message in the buffer
    f_msg: np.ndarray  # int64[n_factors]: 1 for a child's message
    arg_off: np.ndarray  # int64[n_factors+1]
    arg_var: np.ndarray  # int64[n_args]
    arg_axis: np.ndarray  # int64[n_args]
    arg_tstride: np.ndarray  # int64[n_args]
    tables: np.ndarray  # float64


def pack_blocks(blocks) -> BlockArrays:
    """Flatten `blocks.Block` objects (from `blocks.build_blocks`) into `BlockArrays`."""
    blk_clique = [0]
    blk_psi = []
    c_var, c_parent, c_psi, c_size, ax_off = [], [], [], [], [0]
    ax_card, ax_clique, ax_stride = [], [], []
    f_off, f_table, f_msg, arg_off = [0], [], [], [0]
    c_msg = []
    arg_var, arg_axis, arg_tstride = [], [], []
    tables: list[np.ndarray] = []
    t_len = 0
    table_ids: dict[int, int] = {}
    for blk in blocks:
        base = blk_clique[-1]
        psi = 0
        strides_of = []
        for i, (keys, shape) in enumerate(zip(blk.keys, blk.shapes)):
            st = [int(np.prod(shape[a + 1 :])) for a in range(len(shape))]
            strides_of.append(st)
        for i, (keys, shape) in enumerate(zip(blk.keys, blk.shapes)):
            c_var.append(int(blk.vars[i]))
            p = int(blk.parent[i])
            c_parent.append(base + p if p >= 0 else -1)
            c_psi.append(psi)
            size = int(np.prod(shape))
            c_size.append(size)
            psi += size
            for a, k in enumerate(keys.tolist()):
                ax_card.append(int(shape[a]))
                ax_clique.append(base + int(k))
                ax_stride.append(strides_of[i][a])
            ax_off.append(len(ax_card))
            for f in blk.factors[i]:
                tid = id(f.table)
                if tid not in table_ids:
                    table_ids[tid] = t_len
                    tables.append(np.ascontiguousarray(f.table, dtype=np.float64).ravel())
                    t_len += f.table.size
                f_table.append(table_ids[tid])
                f_msg.append(0)
                tshape = f.table.shape
                tstr = [int(np.prod(tshape[a + 1 :])) for a in range(len(tshape))]
                outside = dict(f.outside)
                # the table's block axes (table order) taken through perm are in clique order; f.shape
                # broadcasts them into the clique, so its non-1 axes (cardinalities are >= 2) are
                # their clique axes
                inner = [a for a in range(len(tshape)) if a not in outside]
                clique_axes = [a for a, n in enumerate(f.shape) if n != 1]
                for slot, a_tab in enumerate([inner[j] for j in f.perm]):
                    arg_var.append(-1)
                    arg_axis.append(clique_axes[slot])
                    arg_tstride.append(tstr[a_tab])
                for a_tab, v in outside.items():
                    arg_var.append(int(v))
                    arg_axis.append(-1)
                    arg_tstride.append(tstr[a_tab])
                arg_off.append(len(arg_var))
            # children's messages: tables in the potential buffer, read like factors of this clique
            key_axis = {int(k): a for a, k in enumerate(keys.tolist())}
            for j, _ in blk.children[i]:
                f_table.append(-1 - j)  # patched to the message offset below
                f_msg.append(1)
                ckeys = blk.keys[j].tolist()
                for a in range(1, len(ckeys)):
                    arg_var.append(-1)
                    arg_axis.append(key_axis[ckeys[a]])
                    arg_tstride.append(strides_of[j][a])
                arg_off.append(len(arg_var))
            f_off.append(len(f_table))
        # message buffers after the clique potentials
        msg_at = []
        for i, shape in enumerate(blk.shapes):
            msg_at.append(psi)
            psi += int(np.prod(shape[1:]))
        for k in range(f_off[base], len(f_table)):
            if f_table[k] < 0:
                f_table[k] = msg_at[-1 - f_table[k]]
        c_msg.extend(msg_at)
        blk_clique.append(base + blk.size)
        blk_psi.append(psi)
    i64 = lambda x: np.asarray(x, dtype=np.int64)  # noqa: E731
    return BlockArrays(
        i64(blk_clique), i64(blk_psi), i64(c_var), i64(c_parent), i64(c_psi), i64(c_size), i64(ax_off),
        i64(ax_card), i64(ax_clique), i64(ax_stride), i64(c_msg), i64(f_off), i64(f_table), i64(f_msg), i64(arg_off),
        i64(arg_var), i64(arg_axis), i64(arg_tstride),
        np.concatenate(tables) if tables else np.zeros(0),
    )


@njit(cache=True, inline="always")
def advance(coords, ax_card, a0, na):
    """Step the multi-index ``coords[:na]`` of a clique whose axes have cardinalities
    ``ax_card[a0:a0 + na]`` (C order: the last axis fastest; wraps to all zeros)."""
    a = na - 1
    while a >= 0:
        coords[a] += 1
        if coords[a] < ax_card[a0 + a]:
            return
        coords[a] = 0
        a -= 1


@njit(cache=True)
def _fill(ba, c0, c1, values, psi, coords, beta):
    """Upward pass over cliques c0..c1-1: factor tables and children's messages, then the
    clique's own message (log-sum-exp over its variable) for its parent."""
    for c in range(c0, c1):
        off = ba.c_psi[c]
        size = ba.c_size[c]
        a0 = ba.ax_off[c]
        na = ba.ax_off[c + 1] - a0
        for e in range(size):
            psi[off + e] = 0.0
        for k in range(ba.f_off[c], ba.f_off[c + 1]):
            is_msg = ba.f_msg[k] == 1
            base = ba.f_table[k]
            scale = 1.0 if is_msg else beta
            for j in range(ba.arg_off[k], ba.arg_off[k + 1]):
                if ba.arg_axis[j] < 0:
                    base += np.int64(values[ba.arg_var[j]]) * ba.arg_tstride[j]
            for a in range(na):
                coords[a] = 0
            for e in range(size):
                idx = base
                for j in range(ba.arg_off[k], ba.arg_off[k + 1]):
                    ax = ba.arg_axis[j]
                    if ax >= 0:
                        idx += coords[ax] * ba.arg_tstride[j]
                if is_msg:
                    psi[off + e] += psi[idx]
                else:
                    psi[off + e] += scale * ba.tables[idx]
                advance(coords, ba.ax_card, a0, na)
        if ba.c_parent[c] >= 0:
            kv = ba.ax_card[a0]
            rest = size // kv
            moff = ba.c_msg[c]
            for r in range(rest):
                m = -np.inf
                for x in range(kv):
                    t = psi[off + x * rest + r]
                    if t > m:
                        m = t
                tot = 0.0
                for x in range(kv):
                    tot += np.exp(psi[off + x * rest + r] - m)
                psi[moff + r] = np.log(tot) + m


@njit(cache=True)
def _sample_back(ba, c0, c1, values, psi, probs, s, collect, tix, sums, counts):
    for c in range(c1 - 1, c0 - 1, -1):
        off = ba.c_psi[c]
        a0 = ba.ax_off[c]
        na = ba.ax_off[c + 1] - a0
        kv = ba.ax_card[a0]
        r = 0
        for a in range(1, na):
            r += np.int64(values[ba.c_var[ba.ax_clique[a0 + a]]]) * ba.ax_stride[a0 + a]
        rest = ba.c_size[c] // kv
        m = -np.inf
        for x in range(kv):
            t = psi[off + x * rest + r]
            if t > m:
                m = t
        tot = 0.0
        for x in range(kv):
            p = np.exp(psi[off + x * rest + r] - m)
            probs[x] = p
            tot += p
        s = next_state(s)
        u = uniform(s) * tot
        xn = kv - 1
        acc = 0.0
        for x in range(kv):
            acc += probs[x]
            if u < acc:
                xn = x
                break
        v = ba.c_var[c]
        values[v] = xn
        if collect:
            t = tix[v]
            if t >= 0:
                for x in range(kv):
                    sums[t, x] += probs[x] / tot
                counts[t] += 1
    return s


@njit(cache=True, nogil=True)
def block_pass(ba, seq, values, psi, coords, probs, rng, beta, collect, tix, sums, counts):
    """Resample blocks ``seq`` (block indices, in order) of one chain at inverse temperature
    ``beta``; with ``collect`` each target's draw probabilities go into ``sums``/``counts``
    (rows ``tix[v]``). ``psi``: float64 buffer of at least max(blk_psi); ``coords``: int64 of at
    least the widest clique's axes; ``probs``: float64 of at least the largest cardinality;
    ``rng``: uint64[1], advanced in place."""
    s = rng[0]
    for i in range(seq.shape[0]):
        b = seq[i]
        c0 = ba.blk_clique[b]
        c1 = ba.blk_clique[b + 1]
        _fill(ba, c0, c1, values, psi, coords, beta)
        s = _sample_back(ba, c0, c1, values, psi, probs, s, collect, tix, sums, counts)
    rng[0] = s


@njit(cache=True, nogil=True)
def sample_cached(ba, blks, psi, psi_off, values, probs, rng, draws, collect, tix, sums, counts):
    """``draws`` backward sampling passes over blocks ``blks`` from upward passes already in
    ``psi`` (block b's buffer at ``psi[psi_off[b]:]``; read only, so chains may share it): valid
    only where no factor of a block reads a variable outside it, so that its messages never
    change. Each pass draws every block variable from its clique potential at its already drawn
    separator, adding those draw probabilities to ``sums``/``counts`` as `block_pass` does."""
    s = rng[0]
    for _ in range(draws):
        for i in range(blks.shape[0]):
            b = blks[i]
            o = psi_off[b]
            s = _sample_back(ba, ba.blk_clique[b], ba.blk_clique[b + 1], values, psi[o:o + ba.blk_psi[b]], probs, s,
                             collect, tix, sums, counts)
    rng[0] = s


# the two passes, for the cutset sampler (`cutset_kernels`), which runs them block by block
block_fill = _fill
block_sample_back = _sample_back
