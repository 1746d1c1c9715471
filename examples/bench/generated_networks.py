"""Forced sampling and AUTO on generated networks of the UAI families pdbq was never tuned on:
is every answer within its reported error, or warned?

Each family is generated from a seed as a UAI MARKOV file with its evidence (a small writer
below), under a cache folder (``--cache``, default ``$XDG_CACHE_HOME/pdbq-bench/generated``
or ``~/.cache/...``; never in the checkout), and read back with ``pdbq.io.uai.read_uai_graph``:

- ``protein``: pairwise network on a sparse loopy graph with large domains (tens to 300 values,
  across the 256 boundary where the kernels' value paths switch);
- ``high-arity``: factors over 8–14 binary variables;
- ``csp``: a ring-shaped constraint network full of zeros (allowed tuples are random plus a planted
  solution, evidence taken from it, so the evidence is satisfiable);
- ``spin-weak`` / ``spin-strong``: ±J spin glass on a grid at coupling 0.3 / 1.5;
- ``pieces``: many disconnected small pieces, isolated variables (no factor) and unary-only ones;
- ``near-det``: loopy network whose tables put 1e-6 … 1e-12 next to 1;
- ``heavy-evidence``: a grid with half of the variables observed;
- ``hub``: a hub variable with 400 neighbours (which also form a chain);
- ``long-chain``: a 10,000-variable chain;
- ``dup-scope``: a grid where every edge has two factors over the same scope, and some
  factors repeat a variable within their scope.

Exact marginals come from pdbq's exact engine and from pyAgrum's Shafer-Shenoy inference on the
same factors (a MarkovRandomField built from the file, tables over one set of variables
multiplied into one, since pyAgrum takes one factor per set), each in a child process with a
time and memory limit; they are cross-checked where both finish. Then, after the kernels are warmed (every tier of
``pdbq.answers.warmup``; their one-time compilation is not a query's): (a) ``AUTO`` with no
options; (b) forced sampling ``AUTO WITH (exact_budget = 0, time_limit = --limit)``, ``--seeds``
seeds; every free variable asked through ``pdbq.answers.engine.answer``. One table row per run,
the same columns as ``unseen_networks.py``, DEFECT flags as there (an unwarned error over 0.01,
unwarned coverage under 0.90, a limit overrun, an error that is not a ``PdbqError``).

Usage: ``python examples/bench/generated_networks.py [--only protein csp ...] [--seeds 2] [--limit 10]``
"""

from __future__ import annotations

import argparse
import os
import time
import traceback
from pathlib import Path

import numpy as np

from unseen_networks import (  # noqa: E402
    _check, _limited, _NOTES, _short, exact_text, planned_runs, run_one, width_of)

FAMILIES = ["protein", "high-arity", "csp", "spin-weak", "spin-strong", "pieces", "near-det", "heavy-evidence",
            "hub", "long-chain", "dup-scope"]


def _cache(arg: str | None) -> Path:
    if arg:
        d = Path(arg)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = Path(base) / "pdbq-bench" / "generated"
    d.mkdir(parents=True, exist_ok=True)
    return d


# ------------------------------------------------------------------------------ the writer


def write_markov(path: Path, card: list[int], factors: list[tuple[list[int], np.ndarray]],
                 evidence: dict[int, int]) -> None:
    """A UAI MARKOV file (tables in UAI order: the last scope variable changes fastest) and its
    ``.evid`` file."""
    lines = ["MARKOV", str(len(card)), " ".join(map(str, card)), str(len(factors))]
    lines += [f"{len(s)} " + " ".join(map(str, s)) for s, _ in factors]
    for s, t in factors:
        t = np.asarray(t, dtype=float).reshape(-1)
        assert t.size == int(np.prod([card[v] for v in s])), (s, t.size)
        lines.append(f"\n{t.size}\n" + " ".join(repr(float(x)) for x in t))
    path.write_text("\n".join(lines) + "\n")
    items = sorted(evidence.items())
    path.with_suffix(".evid").write_text(" ".join([str(len(items))] + [f"{v} {x}" for v, x in items]) + "\n")


def _grid_edges(r: int, c: int) -> list[tuple[int, int]]:
    e = []
    for i in range(r):
        for j in range(c):
            v = i * c + j
            if j + 1 < c:
                e.append((v, v + 1))
            if i + 1 < r:
                e.append((v, v + c))
    return e


# ----------------------------------------------------------------------------- the families


def gen_protein(rng):
    """Sparse loopy pairwise net: a ring of 24 side chains (domains 8–40) with chords, plus
    leaves of 200–300 values (some past 256) hanging off ring variables."""
    n_ring = 24
    card = [int(rng.integers(8, 41)) for _ in range(n_ring)]
    edges = [(i, (i + 1) % n_ring) for i in range(n_ring)] + [(i, i + 2) for i in range(0, n_ring - 2, 6)]
    for i in range(6):
        card.append(int(rng.choice([200, 255, 256, 257, 300])))
        edges.append((int(rng.integers(n_ring)), len(card) - 1))
    factors = [([v], np.exp(rng.normal(size=card[v]))) for v in range(len(card))]
    factors += [([a, b], np.exp(1.0 * rng.normal(size=(card[a], card[b])))) for a, b in edges]
    ev = {3: int(rng.integers(card[3])), 15: int(rng.integers(card[15]))}
    return card, factors, ev


def gen_high_arity(rng):
    """30 binary variables, pairwise chain plus 5 factors of arity 8–14 on random subsets."""
    n = 30
    card = [2] * n
    factors = [([i, i + 1], np.exp(0.5 * rng.normal(size=(2, 2)))) for i in range(n - 1)]
    for _ in range(5):
        k = int(rng.integers(8, 15))
        s = sorted(rng.choice(n, size=k, replace=False).tolist())
        factors.append((s, np.exp(1.0 * rng.normal(size=2 ** k))))
    return card, factors, {0: 1}


def gen_csp(rng):
    """40 variables on a ring, domain 3; pairwise and local ternary constraints with ~55% of
    tuples forbidden, the planted solution always allowed; 5 variables observed at the planted
    values."""
    n = 40
    card = [3] * n
    x = rng.integers(3, size=n)
    factors = []
    for r in range(n):
        for s in ([r, (r + 1) % n], [r, (r + 2) % n, (r + 4) % n]):
            t = (rng.random([3] * len(s)) > 0.55).astype(float) * np.exp(0.3 * rng.normal(size=[3] * len(s)))
            t[tuple(x[s])] = 1.0
            factors.append((s, t))
    obs = rng.choice(n, size=5, replace=False)
    return card, factors, {int(v): int(x[v]) for v in obs}


def _spin(rng, beta):
    r, c = 7, 7
    n = r * c
    card = [2] * n
    factors = [([v], np.exp(0.1 * beta * np.array([-1.0, 1.0]) * rng.normal())) for v in range(n)]
    for a, b in _grid_edges(r, c):
        j = beta * rng.choice([-1.0, 1.0])
        factors.append(([a, b], np.exp(np.array([[j, -j], [-j, j]]))))
    return card, factors, {}


def gen_spin_weak(rng):
    """±J spin glass on a 7×7 grid, coupling 0.3."""
    return _spin(rng, 0.3)


def gen_spin_strong(rng):
    """±J spin glass on a 7×7 grid, coupling 1.5 (frustrated, slow to mix)."""
    return _spin(rng, 1.5)


def gen_pieces(rng):
    """40 small pieces (pairs, triangles, short chains), 15 isolated variables with no factor,
    15 variables with only a unary factor; domains 2–4."""
    card, factors = [], []
    for _ in range(40):
        size = int(rng.integers(2, 5))
        base = len(card)
        card += [int(rng.integers(2, 5)) for _ in range(size)]
        for i in range(size - 1):
            a, b = base + i, base + i + 1
            factors.append(([a, b], np.exp(rng.normal(size=(card[a], card[b])))))
        if size >= 3 and rng.random() < 0.5:
            a, b = base, base + size - 1
            factors.append(([a, b], np.exp(rng.normal(size=(card[a], card[b])))))
    for _ in range(15):  # isolated
        card.append(int(rng.integers(2, 5)))
    for _ in range(15):  # unary only
        card.append(int(rng.integers(2, 5)))
        factors.append(([len(card) - 1], np.exp(2 * rng.normal(size=card[-1]))))
    ev = {0: 0, len(card) - 1: 1}
    return card, factors, ev


def gen_near_det(rng):
    """8×6 grid, binary and ternary variables; each pairwise table puts 1 on a random
    'allowed' pattern and 1e-6 … 1e-12 elsewhere (one allowed entry per row, so every
    assignment stays possible)."""
    r, c = 8, 6
    n = r * c
    card = [int(rng.integers(2, 4)) for _ in range(n)]
    factors = []
    for a, b in _grid_edges(r, c):
        t = 10.0 ** (-rng.integers(6, 13, size=(card[a], card[b])).astype(float))
        t[np.arange(card[a]), rng.integers(card[b], size=card[a])] = 1.0
        factors.append(([a, b], t))
    for v in range(n):
        factors.append(([v], np.exp(0.5 * rng.normal(size=card[v]))))
    return card, factors, {0: 0}


def gen_heavy_evidence(rng):
    """10×10 grid, domain 3, moderate couplings, half of the variables observed."""
    r = c = 10
    n = r * c
    card = [3] * n
    factors = [([v], np.exp(0.5 * rng.normal(size=3))) for v in range(n)]
    factors += [([a, b], np.exp(0.8 * rng.normal(size=(3, 3)))) for a, b in _grid_edges(r, c)]
    obs = rng.choice(n, size=n // 2, replace=False)
    return card, factors, {int(v): int(rng.integers(3)) for v in obs}


def gen_hub(rng):
    """A hub variable (domain 3) with 400 binary neighbours that also form a chain."""
    k = 400
    card = [3] + [2] * k
    factors = [([0, i], np.exp(0.7 * rng.normal(size=(3, 2)))) for i in range(1, k + 1)]
    factors += [([i, i + 1], np.exp(0.7 * rng.normal(size=(2, 2)))) for i in range(1, k)]
    factors.append(([0], np.exp(rng.normal(size=3))))
    return card, factors, {5: 1, 200: 0}


def gen_long_chain(rng):
    """10,000-variable chain, domains 2–3, couplings strong enough to correlate over ~10 steps."""
    n = 10_000
    card = [int(rng.integers(2, 4)) for _ in range(n)]
    factors = [([i, i + 1], np.exp(1.2 * rng.normal(size=(card[i], card[i + 1])))) for i in range(n - 1)]
    factors += [([i], np.exp(0.3 * rng.normal(size=card[i]))) for i in range(0, n, 7)]
    return card, factors, {0: 0, n // 2: 1}


def gen_dup_scope(rng):
    """6×6 grid, domain 3, every edge carrying two factors over the same scope (both orders
    sometimes), plus a few factors that name a variable twice."""
    r = c = 6
    n = r * c
    card = [3] * n
    factors = []
    for a, b in _grid_edges(r, c):
        factors.append(([a, b], np.exp(0.6 * rng.normal(size=(3, 3)))))
        if rng.random() < 0.5:
            factors.append(([a, b], np.exp(0.6 * rng.normal(size=(3, 3)))))
        else:
            factors.append(([b, a], np.exp(0.6 * rng.normal(size=(3, 3)))))
    for v in range(0, n, 5):  # a scope naming v twice: only its diagonal is ever read
        factors.append(([v, v], np.exp(0.8 * rng.normal(size=(3, 3)))))
    return card, factors, {7: 2}


GENERATORS = {
    "protein": gen_protein, "high-arity": gen_high_arity, "csp": gen_csp, "spin-weak": gen_spin_weak,
    "spin-strong": gen_spin_strong, "pieces": gen_pieces, "near-det": gen_near_det,
    "heavy-evidence": gen_heavy_evidence, "hub": gen_hub, "long-chain": gen_long_chain, "dup-scope": gen_dup_scope,
}


def generate(family: str, seed: int, cache: Path) -> Path:
    out = cache / f"{family}.s{seed}.uai"
    if not out.exists():
        card, factors, ev = GENERATORS[family](np.random.default_rng([seed, FAMILIES.index(family)]))
        write_markov(out, card, factors, ev)
    return out


# ------------------------------------------------------------------------------ exact answers


def _exact_pdbq(uai: str, out: str) -> None:
    from pdbq.inference.exact.elimination import exact_marginals  # noqa: PLC0415
    from pdbq.io.uai import read_uai_graph  # noqa: PLC0415

    g = read_uai_graph(uai, Path(uai).with_suffix(".evid")).graph
    t = time.perf_counter()
    r = exact_marginals(g, max_table=2**26)
    np.savez(out, marginals=r.marginals, seconds=time.perf_counter() - t)


def _merged_factors(uai: str) -> tuple[list[int], dict[tuple[int, ...], np.ndarray]]:
    """The file's factors as one table per distinct set of variables (tables over the same set
    multiplied, a variable named twice in a scope reduced to its diagonal, axes in increasing
    variable order; every variable in at least one table): what pyAgrum's MarkovRandomField
    accepts."""
    tok = Path(uai).read_text().split()
    n = int(tok[1])
    card = [int(x) for x in tok[2 : 2 + n]]
    m, i = int(tok[2 + n]), 3 + n
    scopes = []
    for _ in range(m):
        k = int(tok[i])
        scopes.append([int(x) for x in tok[i + 1 : i + 1 + k]])
        i += 1 + k
    merged: dict[tuple[int, ...], np.ndarray] = {}
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    for sc in scopes:
        size = int(tok[i])
        t = np.array(tok[i + 1 : i + 1 + size], dtype=float).reshape([card[v] for v in sc] or [1])
        i += 1 + size
        key = tuple(sorted(set(sc)))
        if not sc:
            continue
        spec = "".join(letters[key.index(v)] for v in sc) + "->" + "".join(letters[j] for j in range(len(key)))
        t = np.einsum(spec, t)
        merged[key] = merged[key] * t if key in merged else t
    covered = {v for key in merged for v in key}
    for v in range(n):
        if v not in covered:
            merged[(v,)] = np.ones(card[v])
    return card, merged


def _exact_agrum(uai: str, out: str) -> None:
    import pyagrum as gum  # noqa: PLC0415

    from pdbq.io.uai import read_evid  # noqa: PLC0415

    card, merged = _merged_factors(uai)
    mrf = gum.MarkovRandomField()
    for v, k in enumerate(card):
        mrf.add(gum.LabelizedVariable(str(v), str(v), int(k)))
    for key, t in merged.items():
        pot = mrf.addFactor([str(v) for v in key])
        perm = [key.index(int(name)) for name in pot.names]
        pot.fillWith(np.transpose(t, perm).ravel(order="F").tolist())  # pyAgrum: its first variable fastest
    ev = read_evid(Path(uai).with_suffix(".evid"))
    t = time.perf_counter()
    ie = gum.ShaferShenoyMRFInference(mrf)
    ie.setEvidence({str(v): int(x) for v, x in ev.items()})
    ie.makeInference()
    marg = np.zeros((len(card), max(max(card), 2)))
    for v in range(len(card)):
        p = np.asarray(ie.posterior(str(v)).toarray(), dtype=float)
        marg[v, : p.size] = p
    np.savez(out, marginals=marg, seconds=time.perf_counter() - t)


def exact_answers(uai: Path, limit: float, memory_gib: float) -> dict:
    res = {}
    for who, target in (("pdbq", _exact_pdbq), ("pyagrum", _exact_agrum)):
        out = uai.with_suffix(f".{who}.npz")
        status = uai.with_suffix(f".{who}.status")
        if not out.exists() and not status.exists():
            st, _ = _limited(target, (str(uai), str(out)), limit, memory_gib)
            if st != "ok" or not out.exists():
                status.write_text(st)
        if out.exists():
            z = np.load(out)
            res[who] = (z["marginals"], float(z["seconds"]))
        else:
            res[who] = (None, status.read_text())
    return res


def _agree(pm: np.ndarray, am: np.ndarray, g) -> float:
    d = 0.0
    for v in range(g.n_vars):
        k = int(g.cardinality[v])
        if g.evidence[v] >= 0:
            continue
        d = max(d, float(np.max(np.abs(pm[v, :k] - am[v, :k]))))
    return d


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--skip", nargs="*", default=[])
    ap.add_argument("--cache", default=None)
    ap.add_argument("--seed", type=int, default=1, help="generator seed")
    ap.add_argument("--seeds", type=int, default=2, help="sampling seeds of the forced-sampling run")
    ap.add_argument("--limit", type=float, default=10.0, help="time_limit of the forced-sampling run")
    ap.add_argument("--exact-limit", type=float, default=60.0, help="seconds each exact engine may take")
    ap.add_argument("--memory", type=float, default=4.0, help="GiB each exact engine may take")
    ap.add_argument("--skip-auto", action="store_true", help="no default-AUTO run")
    ap.add_argument("--skip-forced", action="store_true", help="no forced-sampling run")
    args = ap.parse_args()
    cache = _cache(args.cache)

    from pdbq.answers.warmup import TIERS, warm_up  # noqa: PLC0415
    from pdbq.errors import PdbqError  # noqa: PLC0415
    from pdbq.io.uai import read_uai_graph  # noqa: PLC0415

    for tier in TIERS:  # every kernel a query may reach, compiled or loaded before any clock starts
        warm_up(tier)
    rows = []
    print("| network | vars | observed | width | exact (pdbq / pyAgrum s, agree) | run | AUTO did | wall s (limit) | held "
          "| NULL | max err | max z | warned by | coverage | defect |")
    print("|---|---:|---:|---:|---|---|---|---:|---|---:|---:|---:|---|---:|---|")
    t_all = time.perf_counter()
    for name in args.only or FAMILIES:
        if name in args.skip:
            continue
        uai = generate(name, args.seed, cache)
        try:
            g = read_uai_graph(uai, uai.with_suffix(".evid")).graph
        except PdbqError as e:
            print(f"| {name} | | | | | read | ERROR {type(e).__name__}: {str(e)[:120]} | | | | | | | | DEFECT: read |")
            continue
        width, complete, _ = width_of(g)
        ex = exact_answers(uai, args.exact_limit, args.memory)
        (pm, ps), (am, as_) = ex["pdbq"], ex["pyagrum"]
        exact = pm if pm is not None else am
        ex_text = exact_text(ex, _agree(pm, am, g) if pm is not None and am is not None else None)
        observed = int((g.evidence >= 0).sum())
        runs = planned_runs(args)
        head = f"| {name} | {g.n_vars:,} | {observed} | {width}{'' if complete else '+'} | {ex_text} | "
        for label, opts, limit in runs:
            t = time.perf_counter()
            try:
                r = run_one(g, exact, opts, label, limit)
            except PdbqError as e:
                print(head + f"{label} | ERROR {type(e).__name__}: {str(e)[:120]} | {time.perf_counter() - t:.2f} "
                      "| | | | | | | DEFECT: error |", flush=True)
                continue
            except Exception as e:  # noqa: BLE001 - a crash that is not a PdbqError is the defect we look for
                tb = traceback.format_exc().strip().split("\n")[-3:]
                print(head + f"{label} | CRASH {type(e).__name__}: {str(e)[:100]} ({' / '.join(tb)[:200]}) | "
                      f"{time.perf_counter() - t:.2f} | | | | | | | DEFECT: crash |", flush=True)
                continue
            held = r["wall"] <= 1.1 * limit + 1.0
            cov = f"{r['hits'] / r['total']:.3f}" if r["total"] else "–"
            warned = bool(r["checks"])
            defect = []
            if not held:
                defect.append("limit overrun")
            if r["nulls"]:
                defect.append("NULL")
            if not warned and r["err"] > 0.01:
                defect.append("unwarned error > 0.01")
            if not warned and r["total"] and r["hits"] / r["total"] < 0.90:
                defect.append("unwarned coverage < 0.90")
            r.update(name=name, held=held, defect=defect)
            rows.append(r)
            did = "exact" if r["method"] == "EXACT" else _short(r["reason"])
            print(head + f"{label} | {did} | {r['wall']:.2f} ({limit:g}) | {'yes' if held else 'NO'} | {r['nulls']} | "
                  f"{r['err']:.4f} | {r['z']:.1f} | {', '.join(r['checks']) or '–'} | {cov} | "
                  f"{', '.join(defect) or '–'} |", flush=True)
            if os.environ.get("GEN_VERBOSE"):
                for w in r["warnings"]:
                    print(f"    warning: {w[:300]}")
    print(f"\nmachine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; sweep {time.perf_counter() - t_all:.0f} s")
    pooled = {}
    for r in rows:
        if not r["checks"] and r["total"]:
            h, t = pooled.get(r["name"], (0, 0))
            pooled[r["name"]] = (h + r["hits"], t + r["total"])
    if pooled:
        print("unwarned coverage per network: " + ", ".join(f"{k} {h / t:.3f}" for k, (h, t) in pooled.items()))


if __name__ == "__main__":
    main()
