"""Which fields change together: groups of fields one of which fixes the others, found in the data.

An address has one postcode and a postcode one city: among record pairs equal on the address,
nearly all are equal on the postcode and the city too — whether the two records are one person
or two people of one household. Such fields describe one thing (where someone lives): they agree
together among non-matches (one coincidence, not three) and, when a person moves, they change
together among matches (one move, not three disagreements). Both break the independence the
Fellegi–Sunter model assumes, and in opposite directions; `pdbq.coref.groups.FieldGroup`
models a group's levels jointly in both classes.

**Finding groups.** Field i *fixes* field j when, among the record pairs equal on i (and with j
non-NULL on both), at least `FIXES` of them are equal on j too, over at least
`EmSettings.min_rule_pairs` such pairs. This holds in both classes at once (a share that high
in the mixture is that high in each class), so it needs no model of which pairs match; fields
that are often equal for one entity but not fixed by each other (a date of birth and an e-mail)
stay apart. Groups are the connected sets of fields linked by "fixes" (either direction), at
most `MAX_GROUP` fields (the strongest links first). Derived and list fields take no part.

**Their dependence among non-matches** (`u_bits`): for each set T of two or more members, the
share of record pairs equal on all of T, u_T, from the value counts (a GROUP BY, as a field's
exact u is), against the product of the members' exact u.

**Among matches** the joint m of the group's levels is fitted by EM within the training rules
(`pdbq.coref.estimate.em` with `groups`), where the members' u is not the rule's own (their
dependence is the u_bits).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from pdbq.coref.dependence import exact_interactions
from pdbq.coref.estimate import (
    EmSettings,
    TrainingData,
    TrainingRule,
    fit_pair_model,
    training_data,
)
from pdbq.coref.groups import FieldGroup
from pdbq.coref.levels import VALUES, FieldLevels
from pdbq.coref.pair_model import PairModel

__all__ = ["BROAD", "FIXES", "MAX_GROUP", "find_groups", "fit_with_groups", "fixing_links"]

# i fixes j: at least this share of the pairs equal on i are equal on j (typos and blanks aside)
FIXES = 0.98
# a broad field: more pairs of records equal on it than this many per record (values held by
# dozens of records each, far more than one entity's duplicates or one household)
BROAD = 10
# the largest group (its joint has at most Π (levels + 1) codes per member set)
MAX_GROUP = 4
_NO_GROUP = ("list", "codes")


def _pairs(con, by: list[int], nonnull: list[int]) -> float:
    cols = ", ".join(f"v{k}" for k in by)
    nn = " AND ".join(f"v{k} IS NOT NULL" for k in sorted(set(by) | set(nonnull)))
    return float(con.execute(f"SELECT coalesce(sum(c * (c - 1) / 2), 0) FROM (SELECT count(*) AS c FROM {VALUES} "
                             f"WHERE {nn} GROUP BY {cols})").fetchall()[0][0])


def fixing_links(con, fields: tuple[FieldLevels, ...], settings: EmSettings = EmSettings()) -> list[tuple[float, int, int]]:
    """(share, i, j) for every i that fixes j (module docstring), i != j."""
    usable = [k for k, f in enumerate(fields) if f.kind not in _NO_GROUP and not f.sources]
    links = []
    for x, i in enumerate(usable):
        for j in usable[x + 1:]:
            both = _pairs(con, [i, j], [])
            if both < settings.min_rule_pairs:
                continue
            for a, b in ((i, j), (j, i)):
                base = _pairs(con, [a], [b])
                if base >= settings.min_rule_pairs and both / base >= FIXES:
                    links.append((both / base, a, b))
    return links


def find_groups(con, fields: tuple[FieldLevels, ...], n: int, settings: EmSettings = EmSettings()) -> list[tuple[int, ...]]:
    """The groups (member indices, ascending; module docstring). A group starts from fields that
    fix each other where the fixing field is *broad* (more than `BROAD` record pairs per record
    are equal on it), so most of those pairs are not one entity and the link holds among
    non-matches (a postcode fixes its city; a hotel's phone, shared by a few restaurants, does
    not make a group with its city). A field equal on few pairs (an address, an e-mail)
    fixes every field that stays put for one entity, so it joins a group only when it fixes two
    or more of its members (an address fixes the postcode and the city; an e-mail that fixes a
    date of birth forms no group)."""
    links = sorted(fixing_links(con, fields, settings), reverse=True)
    broad = {k for _, i, j in links for k in (i,) if _pairs(con, [k], []) >= BROAD * n}
    parent = list(range(len(fields)))
    size = [1] * len(fields)

    def root(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def join(i, j):
        ri, rj = root(i), root(j)
        if ri != rj and size[ri] + size[rj] <= MAX_GROUP:
            parent[rj] = ri
            size[ri] += size[rj]

    for _, i, j in links:
        if i in broad:
            join(i, j)
    for x in range(len(fields)):
        if size[root(x)] > 1:
            continue
        fixed = {}
        for _, i, j in links:
            if i == x and size[root(j)] > 1:
                fixed.setdefault(root(j), set()).add(j)
        best = max(fixed.items(), key=lambda kv: len(kv[1]), default=(None, set()))
        if len(best[1]) >= 2:
            join(best[0], x)
    comps: dict[int, list[int]] = {}
    for k in range(len(fields)):
        comps.setdefault(root(k), []).append(k)
    return [tuple(sorted(c)) for c in comps.values() if len(c) >= 2]


def _u_bits(con, members: tuple[int, ...], us: list[np.ndarray]) -> np.ndarray:
    """log2 u_T − Σ_{k∈T} log2 u_k0 for every set T of two or more members (module docstring)."""
    r = len(members)
    out = np.zeros(1 << r)
    for t in range(1 << r):
        ks = [members[b] for b in range(r) if t >> b & 1]
        if len(ks) < 2:
            continue
        nn = " AND ".join(f"v{k} IS NOT NULL" for k in ks)
        c = float(con.execute(f"SELECT count(*) FROM {VALUES} WHERE {nn}").fetchall()[0][0])
        total = c * (c - 1) / 2
        if total <= 0:
            continue
        u_t = max(_pairs(con, ks, []), 0.5) / total
        out[t] = max(math.log2(u_t) - sum(math.log2(us[k][0]) for k in ks), 0.0)
    return out


def fit_with_groups(con, fields: tuple[FieldLevels, ...], n: int,
                    settings: EmSettings = EmSettings()) -> tuple[PairModel, list[str]]:
    """`pdbq.coref.estimate.fit_pair_model` with the groups found in the data (module docstring)."""
    data: TrainingData = training_data(con, fields, n, settings)
    groups = tuple(FieldGroup(g, np.ones(1), _u_bits(con, g, data.us)) for g in find_groups(con, fields, n, settings))
    # a rule forcing one member selects the pairs where the group did not change: the other
    # members' m cannot be read there (it would say a move never happens)
    rules = tuple(TrainingRule(tuple(sorted(set(r.forced).union(*(g.members for g in groups if set(g.members) & set(r.forced))))),
                               r.pairs) for r in data.rules)
    # rules forcing a group are dropped where the others still leave every field free: pairs
    # sharing a place are full of non-matches sharing it (a household), which EM there can take
    # for matches that differ in everything else
    seen: set = set()
    distinct = [i for i, r in enumerate(rules) if not (r.forced in seen or seen.add(r.forced))]  # one rule per forced set
    rules, counts = tuple(rules[i] for i in distinct), tuple(data.counts[i] for i in distinct)
    keep = [i for i, r in enumerate(rules) if not any(set(g.members) <= set(r.forced) for g in groups)]
    free = {k for i in keep for k in range(len(fields)) if k not in rules[i].forced}
    usable = {k for k, f in enumerate(fields) if f.kind != "list"}
    if keep and len(keep) < len(rules) and usable <= free:
        rules, counts = tuple(rules[i] for i in keep), tuple(counts[i] for i in keep)
    data = replace(data, rules=rules, counts=counts)
    model, warnings = fit_pair_model(con, fields, n, settings, groups=groups, data=data)
    if groups:
        # the fields the groups leave out depend on each other among non-matches too (a household
        # shares its place and its surname): their interactions, estimated with this model, enter
        # a second fit's non-match likelihood
        first = replace(model, interactions=exact_interactions(con, model, settings))
        if first.interactions:
            model, warnings = fit_pair_model(con, fields, n, settings, groups=groups, data=data, dependence=first)
    diag = dict(model.diagnostics, groups=[[fields[k].field for k in g.members] for g in groups])
    return replace(model, diagnostics=diag), warnings
