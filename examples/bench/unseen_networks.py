"""Sampling and AUTO on real Bayesian networks pdbq was never tuned on: is every answer within its
reported error, or warned?

The networks are pgmpy's 24 example BIF files (asia … pigs; none was used while developing
pdbq). Each is read with pgmpy's BIF reader once and cached as a UAI file (with its evidence)
under a cache folder (``--cache``, default ``$XDG_CACHE_HOME/pdbq-bench/unseen`` or
``~/.cache/...``; never in the checkout). Evidence: ``--evidence`` (default 7.5%) of the
variables, chosen among the leaves (nodes without children) with ``--seed``, their values one
forward sample of the network (so the evidence has non-zero probability).

Exact marginals come from pdbq's exact engine (``exact_marginals``) and from pyAgrum's
LazyPropagation on the same BIF (loaded by pyAgrum itself, evidence by name), each in a child
process with a time limit (``--exact-limit``); they are cross-checked where both finish, and a
network neither finishes is labelled and gets no error columns. Then, after the kernels are
warmed (their one-time compilation is not a query's):

- (a) ``AUTO`` with no options (what a user gets: ``exact_budget`` 5 s, ``time_limit`` 5 s), every
  free variable asked;
- (b) forced sampling ``AUTO WITH (exact_budget = 0, time_limit = 10)``, ``--seeds`` seeds.

Per network: variables, induced width (min-fill, pdbq's order), what AUTO chose, the wall time
against the limit (held within 10% + 1 s?), NULL answers, the largest |error|, whether the answer
is warned and by which check, and the coverage of the unwarned answers' 95% intervals over every
(variable, value). A DEFECT is flagged when an unwarned answer is off by more than 0.01 (the
default tolerance) or its intervals cover under 90%, or a limit is overrun.

``--fresh-user`` also times what a new user does: ``pdbq.connect()``, ``read_uai`` of the cached
file with its evidence, ``SELECT v.id, PROB(v = 0) FROM net v`` with no options.

Usage: ``python examples/bench/unseen_networks.py [--only asia alarm ...] [--seeds 3] [--skip-auto]``
(needs the ``bench`` extra: pgmpy and pyAgrum).
"""

from __future__ import annotations

import argparse
import gzip
import io
import multiprocessing as mp
import os
import time
from pathlib import Path

import numpy as np

NETWORKS = ["asia", "cancer", "earthquake", "sachs", "survey", "alarm", "barley", "child", "insurance", "mildew",
            "water", "hailfinder", "hepar2", "win95pts", "andes", "diabetes", "link", "munin", "munin1", "munin2",
            "munin3", "munin4", "pathfinder", "pigs"]


def _cache(arg: str | None) -> Path:
    if arg:
        d = Path(arg)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = Path(base) / "pdbq-bench" / "unseen"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _bif_path(name: str) -> Path:
    import pgmpy  # noqa: PLC0415

    return Path(pgmpy.__file__).parent / "utils" / "example_models" / f"{name}.bif.gz"


def _fmt(x: float) -> str:
    return repr(float(x))


def convert(name: str, cache: Path) -> Path:
    """The network as a UAI BAYES file in ``cache`` (made once with pgmpy's BIF reader), with a
    ``.names`` file (variable names in file order) and a ``.parents`` file (one line per variable)."""
    out = cache / f"{name}.uai"
    if out.exists() and out.with_suffix(".names").exists():
        return out
    from pgmpy.readwrite import BIFReader  # noqa: PLC0415

    text = gzip.open(_bif_path(name), "rt").read()
    model = BIFReader(string=text).get_model()
    names = list(model.nodes())
    index = {v: i for i, v in enumerate(names)}
    cards, scopes, tables = [0] * len(names), [], []
    for v in names:
        cpd = model.get_cpds(v)
        cards[index[v]] = int(cpd.variable_card)
    for v in names:
        cpd = model.get_cpds(v)
        parents = list(cpd.variables[1:])
        values = np.asarray(cpd.values, dtype=float)  # [card(v), *card(parents)]
        # UAI: the last scope variable changes fastest; scope = parents then the child
        tables.append(np.moveaxis(values, 0, -1).reshape(-1))
        scopes.append([index[p] for p in parents] + [index[v]])
    buf = io.StringIO()
    buf.write(f"BAYES\n{len(names)}\n{' '.join(map(str, cards))}\n{len(names)}\n")
    for s in scopes:
        buf.write(f"{len(s)} {' '.join(map(str, s))}\n")
    for t in tables:
        buf.write(f"\n{t.size}\n{' '.join(_fmt(x) for x in t)}\n")
    tmp = out.with_suffix(".tmp")
    tmp.write_text(buf.getvalue())
    out.with_suffix(".parents").write_text(
        "\n".join(" ".join(map(str, s[:-1])) for s in scopes) + "\n")
    out.with_suffix(".names").write_text("\n".join(names) + "\n")
    # state names, so pyAgrum's evidence can be given by label
    states = [model.get_cpds(v).state_names[v] for v in names]
    out.with_suffix(".states").write_text("\n".join("\t".join(map(str, s)) for s in states) + "\n")
    tmp.rename(out)
    return out



def _parents(uai: Path) -> list[list[int]]:
    return [[int(x) for x in line.split()] for line in uai.with_suffix(".parents").read_text().split("\n")[:-1]]


def make_evidence(uai: Path, share: float, seed: int) -> Path:
    """An ``.evid`` file next to ``uai``: ``share`` of the variables, drawn among the leaves, with
    the values of one forward sample of the network (so the evidence is possible)."""
    from pdbq.io.uai import read_uai_graph  # noqa: PLC0415

    out = uai.with_name(f"{uai.stem}.e{share:g}.s{seed}.evid")
    if out.exists():
        return out
    parents = _parents(uai)
    g = read_uai_graph(uai).graph
    card = g.cardinality.astype(np.int64)
    n = len(parents)
    rng = np.random.default_rng(seed)
    # topological order (a BN's CPT of v is factor v here: one factor per variable, in node order)
    order, done, pending = [], np.zeros(n, bool), list(range(n))
    while pending:
        rest = []
        for v in pending:
            if all(done[p] for p in parents[v]):
                order.append(v)
                done[v] = True
            else:
                rest.append(v)
        pending = rest
    x = np.zeros(n, np.int64)
    for v in order:
        f = v
        t0, k = int(g.table_offset[f]), int(card[v])
        ps = parents[v]
        row = int(np.ravel_multi_index([x[p] for p in ps], [card[p] for p in ps])) if ps else 0
        probs = np.exp(g.tables[t0 + row * k: t0 + (row + 1) * k])
        x[v] = rng.choice(k, p=probs / probs.sum())
    has_child = np.zeros(n, bool)
    for ps in parents:
        has_child[ps] = True
    leaves = np.flatnonzero(~has_child)
    m = min(leaves.size, max(1, int(round(share * n))))
    chosen = np.sort(rng.choice(leaves, size=m, replace=False))
    out.write_text(f"{m} " + " ".join(f"{v} {x[v]}" for v in chosen) + "\n")
    return out


def _exact_pdbq(uai: str, evid: str, out: str) -> None:
    from pdbq.inference.exact.elimination import exact_marginals  # noqa: PLC0415
    from pdbq.io.uai import read_uai_graph  # noqa: PLC0415

    g = read_uai_graph(uai, evid).graph
    t = time.perf_counter()
    r = exact_marginals(g, max_table=2**26)
    np.savez(out, marginals=r.marginals, seconds=time.perf_counter() - t)


def _exact_agrum(bif: str, uai: str, evid: str, out: str) -> None:
    try:
        import pyagrum as gum  # noqa: PLC0415
    except ImportError:
        import pyAgrum as gum  # noqa: PLC0415
    names = Path(uai).with_suffix(".names").read_text().split("\n")[:-1]
    states = [line.split("\t") for line in Path(uai).with_suffix(".states").read_text().split("\n")[:-1]]
    try:
        bn = gum.loadBN(bif)
    except Exception:  # noqa: BLE001 - pyAgrum's BIF parser refuses some labels ("Asy/Patch", "<5")
        bn, names, states = _agrum_from_uai(gum, uai)
    tok = [int(x) for x in Path(evid).read_text().split()]
    ev = {names[tok[1 + 2 * i]]: states[tok[1 + 2 * i]][tok[2 + 2 * i]] for i in range(tok[0])}
    t = time.perf_counter()
    ie = gum.LazyPropagation(bn)
    ie.setEvidence(ev)
    ie.makeInference()
    kmax = max(len(s) for s in states)
    marg = np.zeros((len(names), kmax))
    for i, v in enumerate(names):
        labels = list(bn.variable(v).labels())
        p = np.asarray(ie.posterior(v).toarray(), dtype=float)
        for j, s in enumerate(states[i]):
            marg[i, j] = p[labels.index(s)]
    np.savez(out, marginals=marg, seconds=time.perf_counter() - t)


def _agrum_from_uai(gum, uai: str):
    """The network as a pyAgrum BayesNet built from the cached UAI file's CPTs, one parent
    configuration at a time (variables ``v0``…, labels ``0``…)."""
    from pdbq.io.uai import read_uai_graph  # noqa: PLC0415

    g = read_uai_graph(uai).graph
    parents = _parents(Path(uai))
    card = g.cardinality.astype(int)
    bn = gum.BayesNet()
    names = [f"v{i}" for i in range(len(parents))]
    for i, n in enumerate(names):
        bn.add(gum.LabelizedVariable(n, n, int(card[i])))
    for i, ps in enumerate(parents):
        for p in ps:
            bn.addArc(names[p], names[i])
    for i, ps in enumerate(parents):
        t0, k = int(g.table_offset[i]), int(card[i])
        rows = np.exp(g.tables[t0: t0 + k * int(np.prod([card[p] for p in ps] or [1]))]).reshape(-1, k)
        for r, row in enumerate(rows):
            idx = np.unravel_index(r, [card[p] for p in ps]) if ps else ()
            bn.cpt(names[i])[{names[p]: int(x) for p, x in zip(ps, idx)}] = [float(x) for x in row]
    return bn, names, [[str(j) for j in range(int(c))] for c in card]


def _limited(target, args, limit: float, memory_gib: float) -> tuple[str, float]:
    """Run ``target(*args)`` in a child process with a wall-time and address-space limit."""

    def child():
        import resource  # noqa: PLC0415

        cap = int(memory_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        target(*args)

    ctx = mp.get_context("fork")
    t = time.perf_counter()
    p = ctx.Process(target=child)
    p.start()
    p.join(limit)
    if p.is_alive():
        p.kill()
        p.join()
        return "timeout", time.perf_counter() - t
    return ("ok" if p.exitcode == 0 else f"failed ({p.exitcode})"), time.perf_counter() - t


def exact_answers(name: str, uai: Path, evid: Path, limit: float, memory_gib: float) -> dict:
    """pdbq's and pyAgrum's exact marginals (each cached; None where it did not finish)."""
    bif = uai.with_suffix(".bif")
    if not bif.exists():
        bif.write_bytes(gzip.open(_bif_path(name)).read())
    res = {}
    for who, target, args in (("pdbq", _exact_pdbq, (str(uai), str(evid))),
                              ("pyagrum", _exact_agrum, (str(bif), str(uai), str(evid)))):
        out = evid.with_suffix(f".{who}.npz")
        status = uai.with_name(evid.stem + f".{who}.status")
        if not out.exists() and not status.exists():
            st, _ = _limited(target, (*args, str(out)), limit, memory_gib)
            if st != "ok" or not out.exists():
                status.write_text(st)
        if out.exists():
            z = np.load(out)
            res[who] = (z["marginals"], float(z["seconds"]))
        else:
            res[who] = (None, status.read_text())
    return res


def _check(warning: str) -> str:
    """The check a warning comes from, in a word."""
    for key, word in (("R-hat", "R-hat"), ("effective sample size", "ESS"), ("tolerance", "tolerance"),
                      ("too few updates", "NULL"), ("AUTO sampled", "exact_budget note"), ("burn-in", "burn-in"),
                      ("swaps", "swap rate"), ("compiled", "compile note"), ("time_limit", "time limit")):
        if key in warning:
            return word
    return warning[:40]


# warnings that leave the interval claimed valid (wider than asked, or a note)
_NOTES = {"exact_budget note", "compile note"}


def run_one(g, exact: np.ndarray | None, opts, label: str, limit: float) -> dict:
    """One AUTO query over every free variable: wall, what AUTO did, NULLs, max error, warnings,
    coverage counts of its 95% intervals."""
    from pdbq.answers.engine import answer  # noqa: PLC0415
    from pdbq.language.nodes import Method  # noqa: PLC0415

    free = np.flatnonzero(g.evidence < 0)
    q = np.arange(g.n_vars, dtype=np.int64)
    t = time.perf_counter()
    a = answer(g, q, Method.AUTO, opts, started=t)
    wall = time.perf_counter() - t
    m, se = a.result.marginals, a.result.stderr
    nulls = int(np.isnan(m[free]).any(axis=1).sum())
    err, hits, total, worst_z = float("nan"), 0, 0, 0.0
    if exact is not None:
        errs = []
        for v in free:
            k = int(g.cardinality[v])
            if np.isnan(m[v]).any():
                continue
            d = np.abs(m[v, :k] - exact[v, :k])
            errs.append(float(d.max()))
            ok = d <= 1.96 * se[v, :k] + 1e-7
            hits += int(ok.sum())
            total += k
            with np.errstate(divide="ignore", invalid="ignore"):
                z = np.where(se[v, :k] > 0, d / se[v, :k], np.where(d > 1e-7, np.inf, 0.0))
            worst_z = max(worst_z, float(z.max()))
        err = max(errs, default=float("nan"))
    checks = sorted({_check(w) for w in a.warnings} - _NOTES)
    return dict(label=label, wall=wall, limit=limit, method=a.method, reason=a.reason, nulls=nulls, err=err,
                checks=checks, hits=hits, total=total, z=worst_z, steps=a.steps, warnings=a.warnings)


def width_of(g) -> tuple[int, bool, int]:
    """(induced width of pdbq's min-fill order, whether the order completed, its largest table)."""
    from pdbq.inference.exact.elimination_order import interaction_scopes, min_fill_order  # noqa: PLC0415

    info = min_fill_order(interaction_scopes(g), g.cardinality, stop_above=2**40)
    return info.width, info.complete, info.max_table_size


def _short(reason: str) -> str:
    return reason.split("; ")[-1][:60].replace("|", "/")


def exact_text(ex: dict, agree: float | None) -> str:
    """The exact-reference column: each engine's seconds (or why it has none) and, where both
    finished, how far apart they are."""
    (pm, ps), (am, as_) = ex["pdbq"], ex["pyagrum"]
    if agree is not None:
        text = f"{ps:.2f} / {as_:.2f}, {agree:.0e}"
    else:
        text = (f"{ps:.2f}" if pm is not None else str(ps)) + " / " + (f"{as_:.2f}" if am is not None else str(as_))
    if pm is None and am is None:
        text += " (no exact answer: errors not measured)"
    return text


def planned_runs(args) -> list[tuple[str, object, float]]:
    """(label, options, limit) of each run: default AUTO, then forced sampling per seed."""
    from pdbq.planning.options import QueryOptions  # noqa: PLC0415

    runs = []
    if not args.skip_auto:
        runs.append(("default AUTO", QueryOptions(seed=1), 5.0))
    if not args.skip_forced:
        for s in range(1, args.seeds + 1):
            runs.append((f"forced, seed {s}", QueryOptions(exact_budget=0.0, time_limit=args.limit, seed=s),
                         args.limit))
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--skip", nargs="*", default=[])
    ap.add_argument("--cache", default=None)
    ap.add_argument("--seed", type=int, default=1, help="evidence seed")
    ap.add_argument("--evidence", type=float, default=0.075, help="share of the variables observed (leaves)")
    ap.add_argument("--seeds", type=int, default=2, help="sampling seeds of the forced-sampling run")
    ap.add_argument("--limit", type=float, default=10.0, help="time_limit of the forced-sampling run")
    ap.add_argument("--exact-limit", type=float, default=120.0, help="seconds each exact engine may take")
    ap.add_argument("--memory", type=float, default=6.0, help="GiB each exact engine may take")
    ap.add_argument("--skip-auto", action="store_true", help="no default-AUTO run")
    ap.add_argument("--skip-forced", action="store_true", help="no forced-sampling run")
    ap.add_argument("--fresh-user", action="store_true", help="also time connect + read_uai + a bare SQL query")
    args = ap.parse_args()
    cache = _cache(args.cache)

    from pdbq.answers.warmup import warm_up  # noqa: PLC0415
    from pdbq.errors import PdbqError  # noqa: PLC0415
    from pdbq.io.uai import read_uai_graph  # noqa: PLC0415

    warm_up("core")
    warm_up("moves")
    rows = []
    print("| network | vars | observed | width | exact (pdbq / pyAgrum s, agree) | run | AUTO did | wall s (limit) | held "
          "| NULL | max err | max z | warned by | coverage | defect |")
    print("|---|---:|---:|---:|---|---|---|---:|---|---:|---:|---:|---|---:|---|")
    for name in args.only or NETWORKS:
        if name in args.skip:
            continue
        uai = convert(name, cache)
        evid = make_evidence(uai, args.evidence, args.seed)
        g = read_uai_graph(uai, evid).graph
        width, complete, table = width_of(g)
        ex = exact_answers(name, uai, evid, args.exact_limit, args.memory)
        (pm, ps), (am, as_) = ex["pdbq"], ex["pyagrum"]
        exact = pm if pm is not None else am
        both = pm is not None and am is not None
        ex_text = exact_text(ex, float(np.max(np.abs(pm - am))) if both else None)
        observed = int((g.evidence >= 0).sum())
        runs = planned_runs(args)
        for label, opts, limit in runs:
            try:
                r = run_one(g, exact, opts, label, limit)
            except PdbqError as e:  # an error instead of an answer: a defect when the evidence is possible
                print(f"| {name} | {g.n_vars:,} | {observed} | {width}{'' if complete else '+'} | {ex_text} | {label} | "
                      f"ERROR {type(e).__name__}: {str(e)[:120]} | | | | | | | | DEFECT: error |", flush=True)
                continue
            held = r["wall"] <= 1.1 * limit + 1.0
            cov = f"{r['hits'] / r['total']:.3f}" if r["total"] else "–"
            warned = bool(r["checks"])
            defect = []
            if not held:
                defect.append("limit overrun")
            if not warned and r["err"] > 0.01:
                defect.append("unwarned error > 0.01")
            if not warned and r["total"] and r["hits"] / r["total"] < 0.90:
                defect.append("unwarned coverage < 0.90")
            r.update(name=name, held=held, defect=defect)
            rows.append(r)
            did = "exact" if r["method"] == "EXACT" else _short(r["reason"])
            print(f"| {name} | {g.n_vars:,} | {observed} | {width}{'' if complete else '+'} | {ex_text} | {label} | "
                  f"{did} | {r['wall']:.2f} ({limit:g}) | {'yes' if held else 'NO'} | {r['nulls']} | {r['err']:.4f} | "
                  f"{r['z']:.1f} | {', '.join(r['checks']) or '–'} | {cov} | {', '.join(defect) or '–'} |", flush=True)
    print(f"\nmachine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    pooled = {}
    for r in rows:
        if not r["checks"] and r["total"]:
            h, t = pooled.get(r["name"], (0, 0))
            pooled[r["name"]] = (h + r["hits"], t + r["total"])
    if pooled:
        print("unwarned coverage per network: " + ", ".join(f"{k} {h / t:.3f}" for k, (h, t) in pooled.items()))
    if args.fresh_user:
        fresh_user(args.only or NETWORKS, cache, args)


def fresh_user(names, cache: Path, args) -> None:
    """A new user's first query: connect, read_uai with the evidence, a bare SELECT PROB."""
    import pdbq  # noqa: PLC0415
    from pdbq.io.uai import read_uai  # noqa: PLC0415

    print("\n| network | connect + read_uai s | first query s | rows | NULL | method | warnings |")
    print("|---|---:|---:|---:|---:|---|---|")
    for name in names:
        if name in args.skip:
            continue
        uai = cache / f"{name}.uai"
        evid = make_evidence(uai, args.evidence, args.seed)
        t = time.perf_counter()
        db = pdbq.connect()
        read_uai(db, str(uai), "net", evidence=str(evid))
        t_load = time.perf_counter() - t
        t = time.perf_counter()
        try:
            res = db.execute("SELECT v.id, PROB(v = 0) FROM net v")
        except pdbq.PdbqError as e:
            print(f"| {name} | {t_load:.2f} | {time.perf_counter() - t:.2f} | – | – | {type(e).__name__} | "
                  f"{str(e)[:160]} |", flush=True)
            db.close()
            continue
        rows = res.fetchall()
        t_q = time.perf_counter() - t
        nulls = sum(1 for r in rows if r[1] is None)
        diag = res.diagnostics
        method = diag.get("method", "?")
        warns = list(diag.get("warnings") or [])
        print(f"| {name} | {t_load:.2f} | {t_q:.2f} | {len(rows)} | {nulls} | {method} | "
              f"{'; '.join(w[:90] for w in warns) or '–'} |", flush=True)
        db.close()


if __name__ == "__main__":
    main()
