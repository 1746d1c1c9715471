"""Dependence between two fields' exact agreements among non-matching pairs.

The Fellegi–Sunter model multiplies the fields' u-probabilities: two different restaurants
agree on address *and* phone with probability u_addr · u_phone. Where the fields are not
independent given a non-match — restaurants in one hotel share its address and its phone, two
versions of one paper share its title and its authors, a postcode fixes the suburb — that
product is far too small, and a pair agreeing on both gets the evidence of both as if they were
two independent coincidences.

For two fields i, j: A_ij, the record pairs equal on both, is counted from the values (a GROUP
BY, as u's exact level is). Which of them are matches the *other* fields say: EM with the
fitted m and u held fixed estimates only the match share λ_ij among those pairs, with i and j
left out (they are equal by construction), so the non-matches equal on both number
O_ij = A_ij · (1 − λ_ij). Independence would give E_ij = u_i0 · u_j0 · P (P: pairs of records
with both fields non-NULL). Where O_ij > E_ij, a pair exact on both gets

    δ_ij = −log2((O_ij + 1) / (E_ij + 1))        bits, added to field j's contribution

— field j's exact u becomes u(j exact | i exact, non-match): a log-linear model of the
non-matches with pairwise interactions, counted on the exact levels and applied to every pair
that agrees on both (a level with m > u: `pdbq.coref.pair_model.interaction_bits`). The +1 keeps a handful of pairs
from making a large correction; only positive dependence is corrected (δ ≤ 0), never turned
into extra evidence for a match. Field pairs are skipped where no third field can tell matches
from non-matches, or where both fields are broad (more than `EmSettings.u_pairs` pairs equal on
either: their level vectors are not computed); a skipped pair keeps the independence of the model.
"""

from __future__ import annotations

import math

from pdbq.coref.estimate import EmSettings, em, group_lu, rule_pairs_sql, TrainingRule
from pdbq.coref.levels import VALUES
from pdbq.coref.pair_model import PairModel, level_counts

__all__ = ["exact_interactions"]

_MIN_BITS = 0.05  # smaller corrections change no decision: not kept


def _nonnull_pairs(con, K: int) -> dict[tuple[int, int], float]:
    """Pairs of records with both of two fields non-NULL, for every two fields (one scan)."""
    aggs = [f"count(*) FILTER (WHERE v{i} IS NOT NULL AND v{j} IS NOT NULL)" for i in range(K) for j in range(i + 1, K)]
    row = con.execute(f"SELECT {', '.join(aggs)} FROM {VALUES}").fetchall()[0]
    keys = [(i, j) for i in range(K) for j in range(i + 1, K)]
    return {k: float(c) * (float(c) - 1) / 2 for k, c in zip(keys, row)}


def _both_equal(con, i: int, j: int) -> int:
    """Record pairs equal on both fields (NULLs never equal)."""
    return int(con.execute(f"SELECT coalesce(sum(c * (c - 1) / 2), 0) FROM (SELECT count(*) AS c FROM {VALUES} "
                           f"WHERE v{i} IS NOT NULL AND v{j} IS NOT NULL GROUP BY v{i}, v{j})").fetchall()[0][0])


def exact_interactions(con, model: PairModel, settings: EmSettings = EmSettings()) -> tuple[tuple[int, int, float], ...]:
    """(i, j, δ_ij bits) for every two fields whose exact agreements are positively dependent
    among non-matches (module docstring). The level vectors of the pairs equal on two fields
    are computed once, for all field pairs together (a pair equal on several fields is one row),
    and each field pair's rows are those exact on both."""
    fields = tuple(f.levels for f in model.fields)
    K = len(fields)
    if K < 3:
        return ()
    us = [f.u for f in model.fields]
    ms = [f.m for f in model.fields]
    usable = [k for k in range(K) if fields[k].kind != "list"]
    # two members of one group: their dependence among non-matches is the group's (u_bits)
    grouped = {(i, j) for g in model.groups for i in g.members for j in g.members}
    both_nonnull = _nonnull_pairs(con, K)
    todo = []
    for i in usable:
        for j in usable:
            if j <= i or (i, j) in grouped:
                continue
            a_ij = _both_equal(con, i, j)
            e_ij = us[i][0] * us[j][0] * both_nonnull[(i, j)]
            if e_ij < a_ij <= settings.u_pairs:
                todo.append((i, j, e_ij))
    if not todo:
        return ()
    union = " UNION ".join(rule_pairs_sql(TrainingRule((i, j), 0)) for i, j, _ in todo)
    pats, counts = level_counts(con, fields, union)
    out = []
    for i, j, e_ij in todo:
        rows = (pats[:, i] == 0) & (pats[:, j] == 0)
        a_ij = float(counts[rows].sum())
        active = [k not in (i, j) for k in range(K)]
        # pairs where every other field is NULL say nothing about λ_ij
        seen = rows & (pats[:, active] >= 0).any(axis=1)
        if not seen.any():
            continue
        # the groups' joint levels among matches: one move is one disagreement, not one per field
        extra = group_lu(pats[seen], model.groups)
        res = em(pats[seen], counts[seen], us, ms, 0.5, active, settings.max_iter, settings.tol, fixed_m=True,
                 groups=tuple(g.members for g in model.groups), joints0={g.members: g.m for g in model.groups},
                 lu_extra=extra)
        o_ij = a_ij * (1.0 - res.prior)
        if o_ij > e_ij:
            bits = -math.log2((o_ij + 1.0) / (e_ij + 1.0))
            if bits < -_MIN_BITS:
                out.append((i, j, bits))
    return tuple(out)

