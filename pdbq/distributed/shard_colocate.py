"""Which entities change shards between two sharded rounds: the super-entity idea of distributed
MAP inference restricted to the boundary between shards, decided on the client from the shards'
`pdbq.distributed.shard_state.Boundary` summaries alone (O(cut pairs), never the shards' pairs).

Two entities on two shards can only merge if they meet on one shard. The gain of their merge is
the sum of the cut pairs between them (no other pair joins them), so, as the super-entity level
does with its lower bias, two entities are linked when that sum plus ``super_bias`` per pair is
positive; so are two entities of one shard (the shard reports those links where one of the two
has a cut pair), so that what the shard would keep together travels together. Linked entities are joined strongest link first into groups of at most ``max_group``
mentions (a bigger group could not stay on one shard anyway). The groups spread over several
shards are placed largest first, each gathering on the one of its shards that holds most of it
among those it leaves within an even share of the mentions (else on the one holding fewest so
far), so few mentions move and the shards stay balanced after all the moves; a group that would take its shard over ``max_load`` mentions stays where it is (the
slowest shard sets the round's time).
"""

from __future__ import annotations

import numpy as np

from pdbq.coref.contract import find_root
from pdbq.distributed.shard_state import Boundary
from pdbq.errors import InferenceError

__all__ = ["colocate"]


def colocate(bounds: list[Boundary], loads: np.ndarray, super_bias: float, max_group: int,
             max_load: int) -> tuple[dict[int, tuple[tuple[int, np.ndarray], ...]], np.ndarray]:
    """The moves after a round (module docstring): for each shard that sends, its (destination,
    sorted entity keys) in destination order; and the mentions each shard holds after them.
    ``bounds[s]`` is shard s's summary, ``loads[s]`` the mentions it holds."""
    shards = len(bounds)
    mid = np.concatenate([b.mention for b in bounds])
    msh = np.repeat(np.arange(shards), [b.mention.size for b in bounds])
    mkey = np.concatenate([b.mention_key for b in bounds])
    order = np.argsort(mid, kind="stable")
    mid, msh, mkey = mid[order], msh[order], mkey[order]
    ekey = np.concatenate([b.entity for b in bounds])
    esh = np.repeat(np.arange(shards), [b.entity.size for b in bounds])
    esize = np.concatenate([b.size for b in bounds])
    loads = np.asarray(loads, np.int64).copy()
    if ekey.size == 0:
        return {}, loads
    eorder = np.argsort(ekey)
    ekey, esh, esize = ekey[eorder], esh[eorder], esize[eorder]
    lo, hi, gain = [], [], []
    for s, b in enumerate(bounds):
        pos = np.minimum(np.searchsorted(mid, b.across), max(mid.size - 1, 0))
        found = (mid[pos] == b.across) if mid.size else np.zeros(b.across.size, bool)
        if not found.all():
            k = int(np.flatnonzero(~found)[0])
            raise InferenceError(f"shard {s} has a cut pair to mention {int(b.across[k])}, which no other shard "
                                 "reports: the shards disagree on where mentions are")
        once = msh[pos] > s  # each cut pair is reported by both of its shards: count it once
        lo.append(np.searchsorted(ekey, b.key[once]))
        hi.append(np.searchsorted(ekey, mkey[pos][once]))
        gain.append(b.score[once] + super_bias * b.count[once])
    for b in bounds:  # links inside a shard: its entities that should move together
        lo.append(np.searchsorted(ekey, b.link_a))
        hi.append(np.searchsorted(ekey, b.link_b))
        gain.append(b.link_gain)
    lo_, hi_, g_ = np.concatenate(lo), np.concatenate(hi), np.concatenate(gain)
    if lo_.size == 0:
        return {}, loads
    # sum over the (entity, entity) links
    link = lo_ * ekey.size + hi_
    uniq, inv = np.unique(link, return_inverse=True)
    total = np.bincount(inv.reshape(-1), weights=g_)
    keep = total > 0
    uniq, total = uniq[keep], total[keep]
    # each entity follows its strongest link only: the groups stay what the entities would merge
    # into first, instead of chaining every weakly attracted entity of a block into one group too
    # big to move
    ends = np.concatenate([uniq // ekey.size, uniq % ekey.size])
    edge = np.concatenate([np.arange(uniq.size), np.arange(uniq.size)])
    order = np.lexsort((edge, -total[edge], ends))
    first = np.concatenate([[True], ends[order][1:] != ends[order][:-1]]) if order.size else np.zeros(0, bool)
    best = np.unique(edge[order][first])
    uniq, total = uniq[best], total[best]
    parent = np.arange(ekey.size, dtype=np.int64)
    size = esize.astype(np.int64).copy()
    for e in np.lexsort((uniq, -total)).tolist():
        x, y = find_root(parent, int(uniq[e] // ekey.size)), find_root(parent, int(uniq[e] % ekey.size))
        if x != y and size[x] + size[y] <= max_group:
            parent[max(x, y)] = min(x, y)
            size[min(x, y)] += size[max(x, y)]
    root = np.array([find_root(parent, i) for i in range(ekey.size)], np.int64)
    groups = [np.flatnonzero(root == r) for r in np.unique(root).tolist()]
    per = [np.bincount(esh[m], weights=esize[m], minlength=shards).astype(np.int64) for m in groups]
    spread = [i for i in range(len(groups)) if np.count_nonzero(per[i]) > 1]
    # the shards' mentions outside the spread groups stay; the groups are placed largest first,
    # each on the shard among those holding part of it that holds least so far (ties: the one
    # holding most of the group, then the lower): the loads after all the moves stay balanced
    base = np.asarray(loads, np.int64) - (np.sum([per[i] for i in spread], axis=0) if spread else 0)
    even = -(-int(np.sum(loads)) // shards)  # a shard's even share of the mentions
    sends: dict[int, dict[int, list[int]]] = {}
    for i in sorted(spread, key=lambda i: (-int(per[i].sum()), int(ekey[groups[i]].min()))):
        total_i = int(per[i].sum())
        holding = np.flatnonzero(per[i]).tolist()
        fits = [s for s in holding if base[s] + total_i <= even]
        dest = (max(fits, key=lambda s: (per[i][s], -s)) if fits
                else min(holding, key=lambda s: (base[s] + total_i, -per[i][s], s)))
        if base[dest] + total_i > max_load:  # stays where it is
            base += per[i]
            continue
        base[dest] += total_i
        for m in groups[i].tolist():
            src = int(esh[m])
            if src != dest:
                sends.setdefault(src, {}).setdefault(dest, []).append(int(ekey[m]))
    return ({s: tuple((d, np.array(sorted(k), np.int64)) for d, k in sorted(by.items())) for s, by in sorted(sends.items())},
            base)
