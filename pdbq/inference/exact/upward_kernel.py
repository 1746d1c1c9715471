"""The upward (sum-product, log space) pass of exact elimination as one numba kernel, for clique
trees of small tables (issue 20: on Grids_12 and the Promedus networks a pass is hundreds of
cliques of 2–16K entries, and one numpy call per table and clique cost more than the sums).

Layout (`UpwardTree`, built by `upward_tree` from `pdbq.inference.exact.elimination`'s clique tree; the
builder checks it, the kernel checks nothing):

- cliques ``i = 0..n-1`` in elimination order (children before parents); clique ``i``'s axes are
  ``ax_off[i]..ax_off[i+1]`` of ``ax_card`` (int64), sorted by elimination position, axis 0 the
  eliminated variable; its table is C-ordered over them (axis 0 slowest);
- ``parent[i]`` (int64, -1 for a root);
- the parts summed into clique ``i``'s potential are ``part_off[i]..part_off[i+1]``: at the
  clique's index ``idx`` part ``p`` reads ``vals[part_base[p] + Σ_a idx[a] · part_stride[part_sax[p]
  + a]]`` (its strides over the clique's axes, 0 on an axis the part does not have);
- ``vals`` (float64): the assigned log-tables (C order over their sorted axes) followed by one
  slot per non-root clique for its upward message (over its axes 1.., C order), starting at
  ``msg_base[i]`` (-1 for a root); a child's message is a part of its parent
  (``part_child[p]`` is that child, -1 for a table part).

`upward_kernel` fills the message slots and returns the sum of the roots' messages (log Z less
the constants); tables hold no +inf or NaN (they are max-shifted), so every sum is -inf or
finite. `downward_kernel` then visits chosen cliques from the roots down (Hugin: a child's
downward message is its parent's belief summed onto their separator, less the child's own upward
message, with -inf where that message is -inf) and writes each visited clique's eliminated
variable's marginal. Both run over a range of cliques ``lo..hi`` (consecutive calls cover the
tree), so the caller can check a deadline between ranges (`pdbq.inference.exact.stopping`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from pdbq.errors import InferenceError

__all__ = ["MAX_AXES", "SMALL_TABLE", "UpwardTree", "downward_kernel", "upward_kernel", "upward_tree"]

SMALL_TABLE = 1 << 14  # largest clique table the kernels are used for: beyond, numpy's vectorised adds over a
# table beat the kernel's per-entry loop over parts (ktree_60_w9_k3, 59,049 entries: 84 ms against 30)
MAX_AXES = 64  # variables per clique (the kernel's index buffer)


class UpwardTree(NamedTuple):
    ax_off: np.ndarray  # int64[n + 1]
    ax_card: np.ndarray  # int64[total axes]
    parent: np.ndarray  # int64[n]
    part_off: np.ndarray  # int64[n + 1]
    part_base: np.ndarray  # int64[parts]
    part_sax: np.ndarray  # int64[parts]
    part_stride: np.ndarray  # int64[Σ parts' clique ndim]
    msg_base: np.ndarray  # int64[n]
    vals: np.ndarray  # float64
    part_child: np.ndarray  # int64[parts]: the child clique whose message the part is, -1 for a table


def upward_tree(keys, shapes, parent, children, assigned) -> UpwardTree:
    """The layout of a clique tree (`pdbq.inference.exact.elimination._Tree`'s fields): ``keys[i]`` sorted
    elimination positions of clique ``i``, ``shapes[i]`` its cardinalities, ``assigned[i]`` its
    tables as ``(sorted keys, table)``. `InferenceError` when a part's axes are not the clique's."""
    n = len(keys)
    if any(len(s) > MAX_AXES for s in shapes):
        raise InferenceError(f"upward_tree: a clique over more than {MAX_AXES} variables")
    ax_off = np.zeros(n + 1, dtype=np.int64)
    ax_off[1:] = np.cumsum([len(s) for s in shapes])
    ax_card = np.array([c for s in shapes for c in s], dtype=np.int64)
    chunks: list[np.ndarray] = []
    base = 0
    part_off = [0]
    part_base: list[int] = []
    part_sax: list[int] = []
    strides: list[int] = []
    pending: list[tuple[int, int]] = []  # (part index, child clique): base known once messages are placed
    part_child: dict[int, int] = {}
    for i in range(n):
        ck = keys[i].tolist()
        where = {k: a for a, k in enumerate(ck)}
        for hk, t in assigned[i]:
            flat = np.ascontiguousarray(t, dtype=np.float64).ravel()
            part_base.append(base)
            part_sax.append(len(strides))
            strides += _strides(where, hk.tolist(), t.shape, len(ck))
            chunks.append(flat)
            base += flat.size
        for j in children[i]:
            pending.append((len(part_base), j))
            part_child[len(part_base)] = j
            part_base.append(-1)
            part_sax.append(len(strides))
            strides += _strides(where, keys[j][1:].tolist(), shapes[j][1:], len(ck))
        part_off.append(len(part_base))
    msg_base = np.full(n, -1, dtype=np.int64)
    for i in range(n):
        if parent[i] >= 0:
            msg_base[i] = base
            base += math.prod(shapes[i][1:])
    pb = np.array(part_base, dtype=np.int64)
    for p, j in pending:
        pb[p] = msg_base[j]
    vals = np.empty(base, dtype=np.float64)
    if chunks:
        body = np.concatenate(chunks)
        vals[: body.size] = body
    child = np.full(len(part_base), -1, dtype=np.int64)
    for p, j in part_child.items():
        child[p] = j
    return UpwardTree(ax_off, ax_card, np.asarray(parent, dtype=np.int64), np.array(part_off, dtype=np.int64), pb,
                      np.array(part_sax, dtype=np.int64), np.array(strides, dtype=np.int64), msg_base, vals, child)


def _strides(where: dict, hk: list, shape, ndim: int) -> list[int]:
    out = [0] * ndim
    step = 1
    for k, c in zip(reversed(hk), reversed(tuple(shape))):
        a = where.get(k)
        if a is None:
            raise InferenceError(f"internal: a table over position {k} is not inside its clique")
        out[a] = step
        step *= int(c)
    return out


@njit(cache=True, inline="always")
def _next_index(idx, offs, p0, p1, part_stride, part_sax, ax_card, a0, nd):
    """Advance a clique's multi-index ``idx`` (C order: the last axis fastest) and the read
    offsets ``offs[p0:p1]`` of its parts with it."""
    a = nd - 1
    while a >= 0:
        idx[a] += 1
        for p in range(p0, p1):
            offs[p] += part_stride[part_sax[p] + a]
        if idx[a] < ax_card[a0 + a]:
            return
        for p in range(p0, p1):
            offs[p] -= part_stride[part_sax[p] + a] * idx[a]
        idx[a] = 0
        a -= 1


@njit(cache=True, inline="always")
def _largest_table(ax_off, ax_card, lo, hi):
    """Entries of the largest of cliques lo..hi-1's tables (at least 1)."""
    biggest = 1
    for i in range(lo, hi):
        size = 1
        for a in range(ax_off[i], ax_off[i + 1]):
            size *= ax_card[a]
        biggest = max(biggest, size)
    return biggest


@njit(cache=True)
def upward_kernel(ax_off, ax_card, parent, part_off, part_base, part_sax, part_stride, msg_base, vals, lo, hi):
    """Fill the message slots of the non-root cliques ``lo..hi-1`` in ``vals`` (their children's
    messages must be filled: call over consecutive ranges from 0); return the sum of the roots'
    among them."""
    pot = np.empty(_largest_table(ax_off, ax_card, lo, hi), dtype=np.float64)
    idx = np.zeros(64, dtype=np.int64)  # MAX_AXES
    offs = np.zeros(part_base.shape[0], dtype=np.int64)
    root = 0.0
    for i in range(lo, hi):
        a0 = ax_off[i]
        nd = ax_off[i + 1] - a0
        size = 1
        for a in range(nd):
            size *= ax_card[a0 + a]
        p0 = part_off[i]
        p1 = part_off[i + 1]
        for a in range(nd):
            idx[a] = 0
        for p in range(p0, p1):
            offs[p] = part_base[p]
        for e in range(size):
            s = 0.0
            for p in range(p0, p1):
                s += vals[offs[p]]
            pot[e] = s
            _next_index(idx, offs, p0, p1, part_stride, part_sax, ax_card, a0, nd)
        rest = size // ax_card[a0]
        for r in range(rest):
            m = -np.inf
            for x in range(ax_card[a0]):
                v = pot[x * rest + r]
                if v > m:
                    m = v
            if m == -np.inf:
                out = -np.inf
            else:
                acc = 0.0
                for x in range(ax_card[a0]):
                    acc += np.exp(pot[x * rest + r] - m)
                out = np.log(acc) + m
            if parent[i] < 0:
                root += out
            else:
                vals[msg_base[i] + r] = out
    return root


@njit(cache=True)
def downward_kernel(ax_off, ax_card, parent, part_off, part_base, part_sax, part_stride, msg_base, vals, part_child,
                    visit, wanted, marg, down, lo, hi):
    """After `upward_kernel`: for every clique ``i`` in ``hi-1..lo`` with ``visit[i]`` (a visited
    clique's parent is visited), its belief; ``marg[i, :card]`` the normalised marginal of its
    eliminated variable when ``wanted[i]``. ``down`` (float64 like ``vals``, zeros at first)
    carries the downward messages from one call to the next: call over consecutive ranges from
    the last clique down."""
    pot = np.empty(_largest_table(ax_off, ax_card, lo, hi), dtype=np.float64)
    idx = np.zeros(64, dtype=np.int64)  # MAX_AXES
    offs = np.zeros(part_base.shape[0], dtype=np.int64)
    for i in range(hi - 1, lo - 1, -1):
        if not visit[i]:
            continue
        a0 = ax_off[i]
        nd = ax_off[i + 1] - a0
        size = 1
        for a in range(nd):
            size *= ax_card[a0 + a]
        rest = size // ax_card[a0]
        p0 = part_off[i]
        p1 = part_off[i + 1]
        for sweep in range(2):
            # sweep 0: the belief (potential + downward message); sweep 1: its exp onto separators
            for a in range(nd):
                idx[a] = 0
            for p in range(p0, p1):
                offs[p] = part_base[p]
            for e in range(size):
                if sweep == 0:
                    s = 0.0
                    for p in range(p0, p1):
                        s += vals[offs[p]]
                    if parent[i] >= 0:
                        s += down[msg_base[i] + e % rest]
                    pot[e] = s
                else:
                    x = pot[e]
                    for p in range(p0, p1):
                        j = part_child[p]
                        if j >= 0 and visit[j]:
                            down[msg_base[j] + offs[p] - part_base[p]] += x
                _next_index(idx, offs, p0, p1, part_stride, part_sax, ax_card, a0, nd)
            if sweep == 0:
                top = -np.inf
                for e in range(size):
                    if pot[e] > top:
                        top = pot[e]
                for e in range(size):
                    pot[e] = np.exp(pot[e] - top)
                if wanted[i]:
                    tot = 0.0
                    for x in range(ax_card[a0]):
                        acc = 0.0
                        for r in range(rest):
                            acc += pot[x * rest + r]
                        marg[i, x] = acc
                        tot += acc
                    for x in range(ax_card[a0]):
                        marg[i, x] /= tot
        for p in range(p0, p1):
            j = part_child[p]
            if j < 0 or not visit[j]:
                continue
            m = 1
            for a in range(ax_off[j] + 1, ax_off[j + 1]):
                m *= ax_card[a]
            for r in range(m):
                u = vals[msg_base[j] + r]
                if u == -np.inf:
                    down[msg_base[j] + r] = -np.inf  # Hugin's 0/0 = 0
                else:
                    down[msg_base[j] + r] = np.log(down[msg_base[j] + r]) + top - u
