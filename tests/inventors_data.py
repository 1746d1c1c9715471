"""A generator of patent-inventor mentions: careers over decades, large heterogeneous entities.

`inventors(n, seed)` returns (table, entity) for about `n` mentions (one per inventor and
patent) with columns `rid, first_name, last_name, city, state, country, assignee, coinventors,
classes`:

* inventors have heavy-tailed career sizes (Pareto, 1 to `MAX_MENTIONS` patents); most have a
  handful, a few hundreds;
* a career runs in phases of a few years: each phase has an employer (assignee; 10% of patents
  have none), a home (city, with its state and country; a move changes all three or only the
  city), and a team of co-inventors drawn around the inventor (the team drifts between phases);
* the inventor's technical field is a few classification codes (CPC-like `A61K31`), most
  patents taking one or two of them and sometimes a neighbouring code;
* names vary as on patents: the first name written in full, as an initial (`J.`), or with a
  middle initial (`John Q`), occasional typos; surnames are Zipf-distributed (common surnames
  are shared by many inventors: skewed blocking keys);
* `coinventors`: the co-inventors' surnames on the patent (a list), `classes`: the patent's
  codes (a list) — both compared as sets.

Used by examples/bench/er_inventors.py (loaded by path).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

MAX_MENTIONS = 1000
_LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))


def _word(rng, lo, hi):
    return "".join(rng.choice(_LETTERS, size=int(rng.integers(lo, hi))))


def _typo(rng, s):
    if len(s) < 3:
        return s
    i = int(rng.integers(0, len(s)))
    return s[:i] + str(rng.choice(_LETTERS)) + s[i + 1:]


def _first(rng, first, middle):
    r = rng.random()
    if r < 0.55:
        return first
    if r < 0.75:
        return f"{first[0]}."
    if r < 0.93:
        return f"{first} {middle[0]}"
    return _typo(rng, first)


def inventors(n: int, seed: int = 0) -> tuple[pa.Table, np.ndarray]:
    """About `n` inventor mentions (module docstring) and the inventor of each."""
    rng = np.random.default_rng(seed)
    n_inv_guess = max(50, n // 6)
    lasts = np.array([_word(rng, 4, 10) for _ in range(max(300, n_inv_guess // 3))])
    firsts = np.array([_word(rng, 3, 8) for _ in range(max(200, n_inv_guess // 20))])
    pl = 1.0 / np.arange(1, lasts.size + 1) ** 0.9
    pf = 1.0 / np.arange(1, firsts.size + 1) ** 0.8
    pl, pf = pl / pl.sum(), pf / pf.sum()
    countries = [(_word(rng, 4, 8), [(_word(rng, 2, 3), [_word(rng, 5, 10) for _ in range(40)]) for _ in range(8)])
                 for _ in range(6)]
    assignees = np.array([f"{_word(rng, 4, 9)} {rng.choice(['inc', 'corp', 'gmbh', 'ltd', 'co'])}"
                          for _ in range(max(100, n // 60))])
    pa_ = 1.0 / np.arange(1, assignees.size + 1) ** 0.7
    pa_ = pa_ / pa_.sum()
    sections = [f"{s}{rng.integers(1, 99):02d}{_word(rng, 1, 2).upper()}" for s in "ABCDEFGH" for _ in range(30)]

    def home():
        c = countries[int(rng.integers(len(countries)))]
        st = c[1][int(rng.integers(len(c[1])))]
        return c[0], st[0], str(rng.choice(st[1]))

    cols = {k: [] for k in ("first_name", "last_name", "city", "state", "country", "assignee", "coinventors", "classes")}
    ent: list[int] = []
    inv = 0
    while len(ent) < n:
        size = int(min(MAX_MENTIONS, np.floor(rng.pareto(1.1) + 1)))
        size = min(size, n - len(ent)) if len(ent) + size > n else size
        first, middle = str(rng.choice(firsts, p=pf)), str(rng.choice(firsts, p=pf))
        last = str(rng.choice(lasts, p=pl))
        country, state, city = home()
        field_codes = list(rng.choice(sections, size=int(rng.integers(2, 5)), replace=False))
        team = [str(rng.choice(lasts, p=pl)) for _ in range(int(rng.integers(2, 8)))]
        assignee = str(rng.choice(assignees, p=pa_))
        left_in_phase = int(rng.integers(2, 30))
        for _ in range(size):
            if left_in_phase == 0:  # a new phase: a new employer, perhaps a move, a drifting team
                left_in_phase = int(rng.integers(2, 30))
                if rng.random() < 0.6:
                    assignee = str(rng.choice(assignees, p=pa_))
                r = rng.random()
                if r < 0.25:
                    country, state, city = home()
                elif r < 0.45:
                    city = _word(rng, 5, 10) if rng.random() < 0.3 else city
                keep = [t for t in team if rng.random() < 0.6]
                team = keep + [str(rng.choice(lasts, p=pl)) for _ in range(int(rng.integers(1, 4)))]
                if rng.random() < 0.3:
                    field_codes = field_codes[1:] + [str(rng.choice(sections))]
            left_in_phase -= 1
            k = int(rng.integers(0, min(4, len(team)) + 1))
            co = sorted(set(rng.choice(team, size=k, replace=False).tolist())) if k else []
            cl = sorted(set(rng.choice(field_codes, size=int(rng.integers(1, 3))).tolist()))
            if rng.random() < 0.1:
                cl = sorted(set(cl + [str(rng.choice(sections))]))
            cols["first_name"].append(_first(rng, first, middle))
            cols["last_name"].append(_typo(rng, last) if rng.random() < 0.02 else last)
            cols["city"].append(city if rng.random() > 0.03 else None)
            cols["state"].append(state)
            cols["country"].append(country)
            cols["assignee"].append(assignee if rng.random() > 0.1 else None)
            cols["coinventors"].append(co or None)
            cols["classes"].append(cl)
            ent.append(inv)
        inv += 1
    tbl = pa.table({"rid": np.arange(len(ent)),
                    **{f: pa.array(v, pa.list_(pa.string()) if f in ("coinventors", "classes") else pa.string())
                       for f, v in cols.items()}})
    return tbl, np.asarray(ent)
