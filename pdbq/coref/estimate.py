"""Estimating a `PairModel` from the records, without labels (Fellegi–Sunter, as Splink does).

1. **u** (`estimate_u`): level frequencies over random record pairs (all pairs when there are
   at most `u_pairs`); the exact level's u is computed exactly from the value counts,
   Σ_v c_v(c_v − 1) / (n(n − 1)) over non-NULL records.
2. **m and the prior** (`em`): EM on the aggregated level-vector counts of *training rules*
   (`training_rules`): pairs of records equal on one field. Within a rule, that field is
   forced equal, so it carries no evidence there: its m is not updated and it is left out of
   the likelihood; every other field's m and the rule's own match share λ_r are estimated with
   u held fixed. Each field's m is the mean over the rules that did not force it. When all
   pairs are few (≤ `u_pairs`), EM also runs on all pairs (nothing forced), which gives λ
   directly; otherwise λ comes from each rule's λ_r with the forced fields' evidence removed:
   logit λ = logit λ_r − Σ_forced ln(m_f0 / u_f0) (the median over rules).
3. EM stops when no parameter moves by more than `tol`; a rule that does not converge in
   `max_iter` iterations is dropped with a warning (its estimates are not used).
4. **Dependent fields.** Within a rule that forces field f equal, the non-matching pairs are
   not random pairs: where fields depend on each other given a non-match (restaurants in one
   hotel share its address and its phone), they agree on the other fields far more often than
   the random pairs' u says, and EM with u fixed would take them for matches (and learn that
   matches often have different names). So EM within such a rule fits the rule's own u too,
   shrunk toward the random pairs' u by `_RULE_U_STRENGTH` pairs' worth; that u only serves to
   estimate m. Scoring uses the random pairs' u, corrected for pairs of dependent fields
   (`pdbq.coref.dependence`).

The level vectors are computed and counted in DuckDB (`level_counts`: GROUP BY over the
pairs); EM runs in numpy on the distinct vectors and their counts (a few hundred rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdbq.coref.groups import (FieldGroup, correction_nats, estimate_joint, from_correction, group_codes,
                               marginal, together, u_correction)
from pdbq.coref.layout import CorefInputError
from pdbq.coref.levels import VALUES, FieldLevels
from pdbq.coref.pair_model import FieldModel, PairModel, interaction_bits, level_counts

__all__ = ["EmSettings", "EmResult", "TrainingRule", "TrainingData", "training_data", "rule_em", "estimate_u", "training_rules", "em", "fit_pair_model", "rule_pairs_sql",
           "mutual_best", "prior_floor", "GUESS_BITS"]

_NO_TF = ("list",)
# EM within a training rule also fits u for the pairs the rule selects, shrunk toward the random
# pairs' u by this many pairs' worth (module docstring; 1 and 10 gave the same clusterings)
_RULE_U_STRENGTH = 10.0


@dataclass(frozen=True)
class EmSettings:
    """u_pairs: random pairs for u. train_pairs: a training rule yielding more pairs is not used.
    min_rule_pairs: nor one yielding fewer. max_rules: single-field rules used. max_iter, tol: EM."""

    u_pairs: int = 200_000
    train_pairs: int = 2_000_000
    min_rule_pairs: int = 50
    max_rules: int = 3
    max_iter: int = 200
    tol: float = 1e-5
    seed: int = 0


@dataclass(frozen=True)
class TrainingRule:
    """Pairs equal on the fields `forced` (indices); empty = all pairs."""

    forced: tuple[int, ...]
    pairs: int

    def describe(self, fields) -> str:
        return " AND ".join(f"{fields[k].field} equal" for k in self.forced) if self.forced else "all pairs"


@dataclass(frozen=True, eq=False)
class EmResult:
    m: list[np.ndarray]
    prior: float
    iterations: int
    converged: bool
    log_likelihood: float
    joints: dict = None  # active members of a group -> its joint m (`pdbq.coref.groups`)


def _n_nonnull(con, k: int) -> int:
    return int(con.execute(f"SELECT count(v{k}) FROM {VALUES}").fetchall()[0][0])


def uncomparable(con, fields: tuple[FieldLevels, ...]) -> list[int]:
    """Indices of the fields (values prepared) with fewer than two non-NULL values: no pair of
    records can agree or disagree on them, so they carry no evidence either way."""
    return [k for k in range(len(fields)) if _n_nonnull(con, k) < 2]


def estimate_u(con, fields: tuple[FieldLevels, ...], n: int, settings: EmSettings) -> tuple[list[np.ndarray], tuple]:
    """u per field and level (module docstring), and the (patterns, counts) of the pairs used."""
    total = n * (n - 1) // 2
    if total <= settings.u_pairs:
        pairs_sql = f"SELECT l.m AS a, r.m AS b FROM {VALUES} l JOIN {VALUES} r ON l.m < r.m"
        pats, counts = level_counts(con, fields, pairs_sql)
    else:
        import pyarrow as pa

        rng = np.random.default_rng(settings.seed)
        a = rng.integers(0, n, size=settings.u_pairs)
        b = rng.integers(0, n - 1, size=settings.u_pairs)
        b = b + (b >= a)  # uniform over the other records
        con.register("__pdbq_u_pairs", pa.table({"a": a, "b": b}))
        try:
            pats, counts = level_counts(con, fields, "SELECT a, b FROM __pdbq_u_pairs")
        finally:
            con.unregister("__pdbq_u_pairs")
    us = []
    for k, fl in enumerate(fields):
        L = fl.n_levels
        g = pats[:, k]
        c = np.bincount(g[g >= 0], weights=counts[g >= 0], minlength=L)[:L]
        tot = c.sum()
        nn = _n_nonnull(con, k)
        if nn < 2:
            raise CorefInputError(f"field {fl.field!r} has fewer than two non-NULL values: it cannot be compared")
        same = con.execute(f"SELECT coalesce(sum(c * (c - 1)), 0) FROM (SELECT count(*) AS c FROM {VALUES} "
                           f"WHERE v{k} IS NOT NULL GROUP BY v{k})").fetchall()[0][0]
        u0 = float(same) / (nn * (nn - 1))
        if u0 >= 1.0:
            where = f" that has one ({n - nn} are NULL)" if nn < n else ""
            raise CorefInputError(f"field {fl.field!r} holds one value in every record{where}: it says nothing about matches")
        rest = c[1:] + 0.5  # half a count where a level was never seen among the sampled pairs
        rest = rest / rest.sum() * (1.0 - u0) if tot > 0 else np.full(L - 1, (1.0 - u0) / (L - 1))
        us.append(np.concatenate([[max(u0, 0.5 / max(nn * (nn - 1) / 2, 1))], rest]))
        us[-1] = us[-1] / us[-1].sum()
    return us, (pats, counts)


def rule_pairs_sql(rule: TrainingRule) -> str:
    if not rule.forced:
        return f"SELECT l.m AS a, r.m AS b FROM {VALUES} l JOIN {VALUES} r ON l.m < r.m"
    on = " AND ".join(f"l.v{k} = r.v{k}" for k in rule.forced)
    return f"SELECT l.m AS a, r.m AS b FROM {VALUES} l JOIN {VALUES} r ON {on} AND l.m < r.m"


def _equal_pairs(con, ks: tuple[int, ...]) -> int:
    cols = ", ".join(f"v{k}" for k in ks)
    nn = " AND ".join(f"v{k} IS NOT NULL" for k in ks)
    return int(con.execute(f"SELECT coalesce(sum(c * (c - 1) / 2), 0) FROM (SELECT count(*) AS c FROM {VALUES} "
                           f"WHERE {nn} GROUP BY {cols})").fetchall()[0][0])


def training_rules(con, fields: tuple[FieldLevels, ...], n: int, settings: EmSettings) -> tuple[TrainingRule, ...]:
    """The most selective single-field equality rules within [min_rule_pairs, train_pairs]
    (at most `max_rules`), narrowed to two-field rules where no single one fits, plus all pairs
    when they are few."""
    total = n * (n - 1) // 2
    usable = [k for k, fl in enumerate(fields) if fl.kind != "list"]
    singles = [(TrainingRule((k,), _equal_pairs(con, (k,)))) for k in usable]
    ok = sorted((r for r in singles if settings.min_rule_pairs <= r.pairs <= settings.train_pairs), key=lambda r: r.pairs)
    rules = ok[: settings.max_rules]
    if len(rules) < 2:
        broad = [r for r in singles if r.pairs > settings.train_pairs]
        doubles = []
        for i, r1 in enumerate(broad):
            for k in usable:
                if k != r1.forced[0]:
                    c = _equal_pairs(con, (r1.forced[0], k))
                    if settings.min_rule_pairs <= c <= settings.train_pairs:
                        doubles.append(TrainingRule(tuple(sorted((r1.forced[0], k))), c))
        doubles = sorted(set(doubles), key=lambda r: r.pairs)
        rules = rules + doubles[: max(0, 2 - len(rules))]
    rules = _free_every_field(con, rules, singles, usable, settings)
    if total <= settings.u_pairs:  # their level counts are u's already: EM on all pairs costs nothing more
        rules = [TrainingRule((), total), *rules]
    if not rules:
        raise CorefInputError(
            f"no field is equal on at least {settings.min_rule_pairs} and at most {settings.train_pairs:,} record pairs: "
            "nothing to estimate the match model from (give labels, or more records)")
    return tuple(rules)


def _free_every_field(con, rules, singles, usable, settings) -> list[TrainingRule]:
    """`rules` plus, for each field every rule forces equal (whose m no rule can estimate), the
    most selective rule in [min_rule_pairs, train_pairs] that leaves it free (one field, else
    two): a field's m is then estimated from pairs that were not chosen for agreeing on it."""
    rules = list(rules)
    def ok(c: int) -> bool:
        return settings.min_rule_pairs <= c <= settings.train_pairs

    for k in usable:
        if not rules or any(k not in r.forced for r in rules):
            continue
        cands = [r for r in singles if k not in r.forced and ok(r.pairs) and r not in rules]
        if not cands:
            others = [j for j in usable if j != k]
            cands = [TrainingRule((i, j), c) for x, i in enumerate(others) for j in others[x + 1:]
                     if ok(c := _equal_pairs(con, (i, j)))]
        if cands:
            rules.append(min(cands, key=lambda r: r.pairs))
    return rules


# a field's m that no training rule could estimate (forced equal in every one) is a guess: its
# weights are held within this many bits of no evidence
GUESS_BITS = 1.0


def _bounded_guess(m: np.ndarray, u: np.ndarray) -> np.ndarray:
    """m whose weights log2(m/u) lie within ±GUESS_BITS (a guess says little either way)."""
    w = np.clip(np.log2(m) - np.log2(u), -GUESS_BITS, GUESS_BITS)
    x = u * np.exp2(w)
    for _ in range(20):  # renormalising moves the weights; a few rounds settle them inside the bound
        x = x / x.sum()
        w = np.clip(np.log2(x) - np.log2(u), -GUESS_BITS, GUESS_BITS)
        x = u * np.exp2(w)
    return x / x.sum()


def _forced_exact_m(k: int, results, ms, us, prior: float) -> float | None:
    """P(exact on field k | match) for a field every rule forced equal: a rule forcing k has match
    share λ_r = P(match | its fields equal), so odds(λ_r) = odds(λ) · m_k0/u_k0 · Π_other forced
    m_f0/u_f0 gives m_k0 (the median over such rules), within [u_k0, 0.99]; None without one."""
    got = []
    for rule, res in results:
        if k not in rule.forced:
            continue
        others = sum(math.log(ms[f][0] / us[f][0]) for f in rule.forced if f != k)
        got.append(_logit(res.prior) - _logit(prior) - others + math.log(us[k][0]))
    if not got:
        return None
    return float(min(max(math.exp(float(np.median(got))), us[k][0]), 0.99))


def _init_m(L: int) -> np.ndarray:
    m = np.array([0.9] + [0.1 * 0.5 ** i for i in range(L - 1)], float)
    return m / m.sum()


def _group_state(pats, m, active, groups, joints0) -> list[list]:
    """[active members, codes of the rows, joint m] of each group with two or more active members."""
    out = []
    for members in groups:
        act = tuple(k for k in members if active[k])
        if len(act) < 2:
            continue
        joint = (joints0 or {}).get(act)
        if joint is None and joints0 and members in joints0 and act != members:
            joint = marginal(joints0[members], tuple(m[k].size for k in members),
                             tuple(r for r, k in enumerate(members) if active[k]))
        out.append([act, group_codes(pats, act, tuple(m[k].size for k in act)),
                    together([m[k] for k in act]) if joint is None else joint.copy()])
    return out


def _functional_lu(pats: np.ndarray, members: list[int], us: list[np.ndarray]) -> np.ndarray:
    """ln min_{k∈T} u_k0 − Σ_{k∈T} ln u_k0 per row, T = the members exact in it (0 for |T| < 2)."""
    if len(members) < 2:
        return np.zeros(pats.shape[0])
    ex = pats[:, members] == 0
    lu0 = np.log(np.asarray([us[k][0] for k in members]))
    total = (ex * lu0[None, :]).sum(axis=1)
    low = np.where(ex, lu0[None, :], 0.0).min(axis=1)
    return np.where(ex.sum(axis=1) >= 2, low - total, 0.0)


def em(pats: np.ndarray, counts: np.ndarray, us: list[np.ndarray], m0: list[np.ndarray], prior0: float,
       active: list[bool], max_iter: int = 200, tol: float = 1e-5, fixed_m: bool = False,
       u_strength: float | None = None, groups: tuple[tuple[int, ...], ...] = (),
       joints0: dict | None = None, lu_extra: np.ndarray | None = None, u_groups: tuple[tuple[int, ...], ...] = (),
       u_free: frozenset | None = None) -> EmResult:
    """EM for m (active fields only) and the match share λ on level-vector counts, u fixed.
    `fixed_m` keeps m at `m0` (λ only). `u_strength`: also fit u of the active fields from the
    non-matching share of the pairs, with `us` as a prior worth that many pairs (u is then the
    rule's own: P(level | non-match, the rule's fields equal)); the returned m is estimated
    against it. `groups`: fields whose levels are modelled jointly among matches
    (`pdbq.coref.groups`; their active members), starting from `joints0` (members → joint m)
    or independence; with `fixed_m` the joints are held too. `lu_extra`: nats per row added to
    the non-match log-likelihood (dependence among non-matches); `u_groups`: fields one of which
    fixes the others (`pdbq.coref.comoving`): among non-matches, a pair exact on several of a
    group's active members is as likely as one exact on the rarest of them (with the current u,
    the rule's own where it is fitted); `u_free`: the fields whose u `u_strength` fits (None: all)."""
    K = len(us)
    m = [x.copy() for x in m0]
    u0 = us
    us = [x.copy() for x in us]
    lam = float(prior0)
    ll = -math.inf
    gs = _group_state(pats, m, active, groups, joints0)
    for it in range(1, max_iter + 1):
        lu = np.zeros(len(counts))
        for k in range(K):
            if active[k]:
                g = pats[:, k]
                lu += np.where(g >= 0, np.log(us[k][np.maximum(g, 0)]), 0.0)
        if lu_extra is not None:
            lu = lu + lu_extra
        for members in u_groups:
            lu = lu + _functional_lu(pats, [k for k in members if active[k]], us)
        lm = np.zeros(len(counts))
        for k in range(K):
            if active[k]:
                g = pats[:, k]
                lm += np.where(g >= 0, np.log(m[k][np.maximum(g, 0)]), 0.0)
        for act, codes, joint in gs:
            lm += correction_nats(joint, [m[k] for k in act])[codes]
        a = math.log(lam) + lm
        b = math.log1p(-lam) + lu
        mx = np.maximum(a, b)
        lse = mx + np.log(np.exp(a - mx) + np.exp(b - mx))
        p = np.exp(a - lse)
        ll = float((counts * lse).sum())
        w = counts * p
        new_lam = float(w.sum() / counts.sum())
        new_lam = min(max(new_lam, 1e-12), 1 - 1e-12)
        delta = abs(new_lam - lam)
        new_m = []
        for k in range(K):
            if not active[k] or fixed_m:
                new_m.append(m[k])
                continue
            g = pats[:, k]
            L = m[k].size
            c = np.bincount(g[g >= 0], weights=w[g >= 0], minlength=L)[:L]
            if c.sum() <= 0:
                new_m.append(m[k])
                continue
            # half an expected match per level (Jeffreys): with few matches no level's m is
            # claimed to be ~0, which would make its weight an extreme, unsupported negative
            x = (c + 0.5) / (c.sum() + 0.5 * L)
            delta = max(delta, float(np.abs(x - m[k]).max()))
            new_m.append(x)
        if u_strength is not None:
            wn = counts * (1.0 - p)
            for k in range(K):
                if active[k] and (u_free is None or k in u_free):
                    g = pats[:, k]
                    L = us[k].size
                    c = np.bincount(g[g >= 0], weights=wn[g >= 0], minlength=L)[:L]
                    x = (c + u_strength * u0[k]) / (c.sum() + u_strength)
                    delta = max(delta, float(np.abs(x - us[k]).max()))
                    us[k] = x
        if not fixed_m:
            for st in gs:
                act, codes, joint = st
                x = estimate_joint(np.bincount(codes, weights=w, minlength=joint.size), [new_m[k] for k in act])
                delta = max(delta, float(np.abs(x - joint).max()))
                st[2] = x
        m, lam = new_m, new_lam
        if delta < tol:
            return EmResult(m, lam, it, True, ll, {st[0]: st[2] for st in gs})
    return EmResult(m, lam, max_iter, False, ll, {st[0]: st[2] for st in gs})


def monotone(m: np.ndarray, u: np.ndarray) -> np.ndarray:
    """m with log(m/u) made non-increasing over the ordered levels (exact, ..., else) by pooling
    adjacent violators: a more similar level is never weaker evidence than a less similar one
    (a level seen in no match would otherwise get an extreme negative weight from a few pairs)."""
    blocks = [[i] for i in range(m.size)]
    ratio = lambda blk: m[blk].sum() / u[blk].sum()  # noqa: E731
    i = 0
    while i < len(blocks) - 1:
        if ratio(blocks[i + 1]) > ratio(blocks[i]):
            blocks[i] = blocks[i] + blocks.pop(i + 1)
            i = max(i - 1, 0)
        else:
            i += 1
    out = m.copy()
    for blk in blocks:
        out[blk] = m[blk].sum() * u[blk] / u[blk].sum()
    return out


def _logit(p: float) -> float:
    p = min(max(p, 1e-12), 1 - 1e-12)
    return math.log(p / (1 - p))


@dataclass(frozen=True, eq=False)
class TrainingData:
    """What EM runs on: u per field, the random pairs' (patterns, counts), the training rules and
    each rule's (patterns, counts)."""

    us: list[np.ndarray]
    u_counts: tuple
    rules: tuple[TrainingRule, ...]
    counts: tuple[tuple[np.ndarray, np.ndarray], ...]


def training_data(con, fields: tuple[FieldLevels, ...], n: int, settings: EmSettings = EmSettings()) -> TrainingData:
    """u and the level-vector counts of the training rules (computed in DuckDB once)."""
    if n < 2:
        raise CorefInputError(f"{n} record(s): at least two are needed to estimate a match model")
    us, u_counts = estimate_u(con, fields, n, settings)
    rules = training_rules(con, fields, n, settings)
    counts = tuple(u_counts if (not r.forced and n * (n - 1) // 2 <= settings.u_pairs) else
                   level_counts(con, fields, rule_pairs_sql(r)) for r in rules)
    return TrainingData(us, u_counts, rules, counts)


def group_lu(pats: np.ndarray, groups: tuple[FieldGroup, ...]) -> np.ndarray | None:
    """Nats per row that the groups' dependence among non-matches adds to the non-match
    log-likelihood (`pdbq.coref.groups.u_correction`); None without such groups."""
    gs = [g for g in groups if g.u_bits is not None]
    if not gs:
        return None
    return sum(u_correction(g, pats) for g in gs) * math.log(2.0)


def rule_em(data: TrainingData, i: int, fields, n: int, settings: EmSettings, groups: tuple[FieldGroup, ...] = (),
            m0=None, joints0=None, prior0: float | None = None, own_u: bool = True,
            dependence: PairModel | None = None) -> EmResult:
    """EM on training rule i (from `m0`, or the default start); `groups`' members are modelled
    jointly among matches, and their dependence among non-matches is their u_bits, not the
    rule's own u. `dependence`: a model whose field interactions (dependence among non-matches,
    `pdbq.coref.dependence`) enter the non-match likelihood."""
    rule = data.rules[i]
    pats, counts = data.counts[i]
    lu_extra = -interaction_bits(dependence, pats).sum(axis=1) * math.log(2.0) \
        if dependence is not None and dependence.interactions else None

    active = [k not in rule.forced for k in range(len(fields))]
    if prior0 is None:
        prior0 = 1.0 / n if not rule.forced else 0.1
    # pairs equal on the rule's fields are not random pairs: where fields depend on each other
    # among non-matches (one hotel's address and phone), the others agree more often than u says
    return em(pats, counts, data.us, m0 or [_init_m(fl.n_levels) for fl in fields], prior0, active, settings.max_iter,
              settings.tol, u_strength=_RULE_U_STRENGTH if rule.forced and own_u else None,
              groups=tuple(g.members for g in groups), joints0=joints0, u_groups=tuple(g.members for g in groups),
              lu_extra=lu_extra,
              u_free=frozenset(k for g in groups for k in g.members) if groups else None)


def _joints(groups, results, ms) -> tuple[FieldGroup, ...]:
    """Each group's joint m: the mean over the converged rules that left all its members free,
    restated against the final marginals `ms` (its correction is what the rules measured)."""
    out = []
    for grp in groups:
        members = grp.members
        got = [res for _, res in results if res.joints and members in res.joints]
        if not got:
            continue
        corr = np.mean([correction_nats(res.joints[members], [res.m[k] for k in members]) for res in got], axis=0)
        out.append(FieldGroup(tuple(members), from_correction(corr, [ms[k] for k in members]), grp.u_bits))
    return tuple(out)


def fit_pair_model(con, fields: tuple[FieldLevels, ...], n: int, settings: EmSettings = EmSettings(),
                   groups: tuple[FieldGroup, ...] = (), data: TrainingData | None = None,
                   dependence: PairModel | None = None) -> tuple[PairModel, list[str]]:
    """Estimate u, m and λ (module docstring), with `groups` of fields modelled jointly among
    matches (`pdbq.coref.groups`). Returns the model and warnings."""
    if n < 2:
        raise CorefInputError(f"{n} record(s): at least two are needed to estimate a match model")
    warnings: list[str] = []
    data = data or training_data(con, fields, n, settings)
    us, u_counts, rules = data.us, data.u_counts, data.rules
    K = len(fields)
    m_sum = [np.zeros(fl.n_levels) for fl in fields]
    m_n = np.zeros(K)
    results, unconverged = [], []
    converged = True
    for i, rule in enumerate(rules):
        res = rule_em(data, i, fields, n, settings, groups, dependence=dependence)
        (results if res.converged else unconverged).append((rule, res))
    if not results:
        if not unconverged:
            raise CorefInputError("no training rule: no model estimated")
        # nothing better to keep: the last iterate, said loudly (one field alone is barely identifiable)
        results = [max(unconverged, key=lambda x: x[0].pairs)]
        converged = False
        warnings.append(f"EM did not converge in {settings.max_iter} iterations on any training rule; the last estimates "
                        f"of {results[0][0].describe(fields)} are used: check them (pdbq.dedupe(...).pair_model.table()) "
                        "or give labels")
    else:
        for rule, _ in unconverged:
            warnings.append(f"EM on {rule.describe(fields)} did not converge in {settings.max_iter} iterations; "
                            "its estimates are not used")
    for rule, res in results:
        for k in range(K):
            if k not in rule.forced:
                m_sum[k] += res.m[k]
                m_n[k] += 1
    if converged:
        # a field only unconverged rules left free: their last iterates say more than a guess
        for k, fl in enumerate(fields):
            late = [res.m[k] for rule, res in unconverged if k not in rule.forced]
            if m_n[k] == 0 and late:
                m_sum[k], m_n[k] = np.sum(late, axis=0), len(late)
                warnings.append(f"field {fl.field!r}: its m comes from EM that did not converge (the rules that "
                                "left it free): check it (pair_model.table()) or give labels")
    ms = []
    for k, fl in enumerate(fields):
        ms.append(_bounded_guess(_init_m(fl.n_levels), us[k]) if m_n[k] == 0 else monotone(m_sum[k] / m_n[k], us[k]))
    forced_only = {k for k in range(K) if m_n[k] == 0}
    direct = [res.prior for rule, res in results if not rule.forced]
    # the prior from the rules whose forced fields' m is estimated; a rule forcing a field no rule
    # left free then says that field's exact m instead (its match share and the prior fix it)
    known = [(rule, res) for rule, res in results if not set(rule.forced) & forced_only]
    if direct:
        prior = direct[0]
    else:
        lo = [_logit(res.prior) - sum(math.log(ms[k][0] / us[k][0]) for k in rule.forced)
              for rule, res in (known or results)]
        prior = 1.0 / (1.0 + math.exp(-float(np.median(lo))))
    guessed = []
    for k in sorted(forced_only):
        fl = fields[k]
        m0 = _forced_exact_m(k, results, ms, us, prior) if known or direct else None
        if m0 is None:
            guessed.append(fl.field)
            warnings.append(f"field {fl.field!r} was forced equal in every training rule: its m is a guess, its "
                            f"weights held within ±{GUESS_BITS:g} bit")
            continue
        rest = _bounded_guess(ms[k][1:] / ms[k][1:].sum(), us[k][1:] / us[k][1:].sum())
        ms[k] = np.concatenate([[m0], (1.0 - m0) * rest])
        warnings.append(f"field {fl.field!r} was forced equal in every training rule: its exact level's m is estimated "
                        "from that rule's match share and the prior; its other levels are a guess held within "
                        f"±{GUESS_BITS:g} bit of that")
    fms = tuple(FieldModel(fl, ms[k], us[k], fl.kind not in _NO_TF) for k, fl in enumerate(fields))
    diag = {
        "training_rules": [{"rule": r.describe(fields), "pairs": r.pairs, "iterations": res.iterations,
                            "rule_match_share": res.prior} for r, res in results],
        "u_pairs": int(u_counts[1].sum()),
        "converged": converged,  # False: no training rule converged, the last iterate is used
        "guessed_m": guessed,
    }
    return PairModel(fms, min(max(prior, 1e-12), 0.5), "em", diag, groups=_joints(groups, results, ms)), warnings


def refine_prior(evidence_bits: np.ndarray, total_pairs: int, recall: float, prior0: float,
                 max_iter: int = 500, tol: float = 1e-9) -> tuple[float, bool]:
    """λ by EM over all record pairs with m and u fixed: λ = E[matches] / all pairs, where the
    expected matches are Σ P(match | pair) over the candidate pairs (`evidence_bits`: their
    match weights without the prior) divided by blocking's estimated `recall` (pairs outside
    the candidates are the missed matches and non-matches). Returns (λ, converged)."""
    if total_pairs <= 0 or evidence_bits.size == 0:
        return prior0, True
    lo = evidence_bits * math.log(2.0)
    lam = min(max(prior0, 1e-12), 0.5)
    denom = total_pairs * max(recall, 1e-6)
    for _ in range(max_iter):
        z = _logit(lam) + lo
        p = np.where(z >= 0, 1.0 / (1.0 + np.exp(-np.abs(z))), np.exp(-np.abs(z)) / (1.0 + np.exp(-np.abs(z))))
        new = min(max(float(p.sum()) / denom, 1e-12), 0.5)
        if abs(new - lam) <= tol * max(lam, 1e-12) * 1e3:
            return new, True
        lam = new
    return lam, False


def fit_from_labels(con, fields: tuple[FieldLevels, ...], n: int, index: np.ndarray, entity: np.ndarray,
                    shape: str, settings: EmSettings = EmSettings()) -> PairModel:
    """m from the level vectors of labelled matching pairs (every pair inside a labelled entity;
    a random subset of them beyond `train_pairs`), u from random pairs as without labels, and
    λ = the share of matching pairs among labelled records when the labels are clusters (from
    pairs alone it cannot be read: `source = "labels-pairs"` asks the caller to estimate it)."""
    import pyarrow as pa

    if n < 2:
        raise CorefInputError(f"{n} record(s): at least two are needed to estimate a match model")
    us, _ = estimate_u(con, fields, n, settings)
    order = np.argsort(entity, kind="stable")
    idx, ent = np.asarray(index)[order], np.asarray(entity)[order]
    starts = np.flatnonzero(np.r_[True, ent[1:] != ent[:-1]])
    sizes = np.diff(np.r_[starts, ent.size])
    n_match = int((sizes * (sizes - 1) // 2).sum())
    if n_match == 0:
        raise CorefInputError("the labels hold no matching pair (every labelled entity has one record): no m to estimate")
    rng = np.random.default_rng(settings.seed)
    keep = min(1.0, settings.train_pairs / n_match)
    aa, bb = [], []
    for s, c in zip(starts, sizes):
        if c < 2:
            continue
        i, j = np.triu_indices(c, 1)
        if keep < 1.0:
            pick = rng.random(i.size) < keep
            i, j = i[pick], j[pick]
        x, y = idx[s + i], idx[s + j]
        aa.append(np.minimum(x, y))
        bb.append(np.maximum(x, y))
    con.register("__pdbq_label_pairs", pa.table({"a": np.concatenate(aa), "b": np.concatenate(bb)}))
    try:
        pats, counts = level_counts(con, fields, "SELECT a, b FROM __pdbq_label_pairs")
    finally:
        con.unregister("__pdbq_label_pairs")
    fms = []
    for k, fl in enumerate(fields):
        g = pats[:, k]
        c = np.bincount(g[g >= 0], weights=counts[g >= 0], minlength=fl.n_levels)[: fl.n_levels]
        m = (c + 0.5) / (c.sum() + 0.5 * fl.n_levels)  # half a count per level: no level is impossible
        fms.append(FieldModel(fl, monotone(m, us[k]), us[k], fl.kind not in _NO_TF))
    L = idx.size
    if shape == "clusters" and L >= 2:
        prior, source = n_match / (L * (L - 1) / 2), "labels"
    else:
        prior, source = 1.0 / n, "labels-pairs"
    diag = {"labelled_records": int(L), "labelled_match_pairs": n_match, "match_pairs_used": int(counts.sum())}
    return PairModel(tuple(fms), min(max(prior, 1e-12), 0.5), source, diag)


def mutual_best(a: np.ndarray, b: np.ndarray, weight: np.ndarray, n: int) -> np.ndarray:
    """bool per pair (a, b) of records 0..n-1: each record is the other's best-scoring partner
    among the pairs (one per record; ties go to the later pair in a stable sort) and the weight
    is positive."""
    best = np.full(n, -1, np.int64)
    x, y, w = np.r_[a, b], np.r_[b, a], np.r_[weight, weight]
    order = np.argsort(w, kind="stable")
    best[x[order]] = y[order]  # the last write per record is its highest weight
    return (best[a] == b) & (best[b] == a) & (weight > 0)


def prior_floor(a: np.ndarray, b: np.ndarray, evidence_bits: np.ndarray, n: int, total_pairs: int,
                max_iter: int = 50) -> tuple[float, int]:
    """A lower bound on the match prior from the data: (λ_low, K). K pairs are mutual best
    matches whose evidence (match weight without the prior, bits) outweighs the prior odds
    K / total_pairs itself: each would be a match even if the K of them were all the matches
    there are. Solved from K = the mutual best pairs with evidence > log2(total_pairs) (a match
    even as the only one), growing while the bound admits more; λ_low = K / total_pairs
    (0 when no pair qualifies)."""
    if total_pairs <= 0 or evidence_bits.size == 0:
        return 0.0, 0
    k = 0
    for _ in range(max_iter):
        lam = max(k, 1) / total_pairs
        bits = math.log2(lam / (1.0 - lam)) if lam < 1.0 else 0.0
        new = int(mutual_best(a, b, evidence_bits + bits, n).sum())
        if new <= k:
            break
        k = new
    return k / total_pairs, k
