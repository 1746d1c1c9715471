"""LEARN WEIGHTS ... USING SAMPLERANK for the learnable weights of DOMAIN CLUSTER rules (docs/learning.md).

The cluster relation's pair scores are a linear model (`pdbq.coref.design`): a fixed part
(constant and ``= expr`` rules, and learnable rules not named in ``FOR``) plus θ_k · x_pk for the
learned weights. SampleRank (`pdbq.learning.coref_rank.CorefRanking`: entity moves ranked by B³
or pairwise F1) learns θ against the gold clustering given by ``gold = '<table or query>'``
(mention key, gold entity). The fixed part enters the ranking problem as one more feature column
with its weight held at 1, and the ranking problem's own bias slot is held at 0, so the learned
θ are exactly the rules' weights.

``holdout = f`` hides a random fraction f of the gold entities (all their mentions; pairs across
the split are dropped from both sides), ``holdout = 'SELECT key ...'`` the mentions the query
names. After learning, the MAP clustering of the held-out mentions (`EVAL_MAP`: a ``MAP(e)``
query's annealing, started from the components of the positive pairs) is scored against their gold entities: B³ and pairwise precision,
recall and F1 go into the statement's result row.

The version is stored like every learned version (`pdbq_learned_weights`): cluster rules have no
factor-store rows, they read their latest values when a query grounds them.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable

import duckdb
import numpy as np
import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from pdbq.catalog.cluster import is_cluster
from pdbq.catalog.names import normalize, table_expr
from pdbq.catalog.store import Catalog, transaction
from pdbq.catalog.weights import ensure_learning_schema, next_version, record_version
from pdbq.coref.design import ClusterDesign, is_learnable
from pdbq.coref.ground import design, drop_map, map_table
from pdbq.coref.layout import pair_graph
from pdbq.coref.metrics import b_cubed, pairwise
from pdbq.errors import CatalogError, LearningError, OptionError
from pdbq.grounding.fingerprint import definition_hash
from pdbq.grounding.store import col, ident, sql_text, table_ref
from pdbq.inference.coreference.resolve import CorefConfig, resolve_map
from pdbq.language.nodes import CreateRule, CreateVariable, LearnMethod, LearnWeights
from pdbq.learning.config import LearnConfig
from pdbq.learning.coref_rank import CorefRanking, PairTable
from pdbq.learning.samplerank import SampleRankConfig, samplerank
from pdbq.learning.sgd import EpochInfo, SGDResult

__all__ = ["cluster_relation", "wants_cluster_learning", "execute_coref_learn", "CorefLearnOutcome", "MAX_PAIRS",
           "EVAL_MAP"]

#: Candidate pairs refused above this (as cluster queries' default max_pairs).
MAX_PAIRS = 20_000_000
#: The held-out MAP clustering: a `MAP(e)` query's defaults (planning/coref_query.py) started from
#: the connected components of the positive pairs (`WITH (init = 'components')`). From singletons
#: the annealing leaves large entities split (Cora, learned weights: held-out B³ F1 0.946 from
#: singletons, 0.964 from components; docs/learning.md).
EVAL_MAP = CorefConfig(sweeps=30, temperature=0.5, chains=2, p_split_merge=0.2, init="components", init_threshold=0.0)
#: SampleRank defaults for cluster rules where the statement gives none (docs/learning.md: the
#: perceptron with averaging reaches the Cora and Fodors–Zagats targets; AdaGrad with FACTORIE's
#: margin 1 falls short on Cora).
CLUSTER_DEFAULTS = {"optimizer": "perceptron", "learning_rate": 0.01}


@dataclasses.dataclass(frozen=True, eq=False)
class CorefLearnOutcome:
    table: pa.Table
    version: int
    result: SGDResult
    holdout: dict | None  # held-out scores: b3_precision, ..., pairwise_f1, mentions, entities
    warnings: tuple[str, ...]


def cluster_relation(rule: CreateRule, variables: dict[str, CreateVariable]) -> str | None:
    """The cluster relation a rule's head names, or None for an ordinary rule."""
    for a in rule.head.atoms:
        v = variables.get(normalize(a.relation))
        if v is not None and is_cluster(v):
            return normalize(a.relation)
    return None


def wants_cluster_learning(catalog: Catalog, stmt: LearnWeights, config: LearnConfig) -> bool:
    """FOR names a cluster rule, or no FOR and a gold clustering is given."""
    if stmt.rules:
        variables = catalog.variables()
        return any(cluster_relation(catalog.rule(n), variables) is not None for n in stmt.rules)
    return config.gold is not None


def _chosen(catalog: Catalog, stmt: LearnWeights) -> tuple[str, list[str]]:
    variables = catalog.variables()
    rules = catalog.rules()
    if stmt.rules:
        names = list(dict.fromkeys(stmt.rules))
        for name in names:
            rule = catalog.rule(name)
            if cluster_relation(rule, variables) is None:
                raise LearningError(
                    f"rule '{name}' is not a cluster rule: LEARN WEIGHTS learns either DOMAIN CLUSTER pair rules "
                    "(against a gold clustering) or ordinary rules, not both in one statement"
                )
            if not is_learnable(rule):
                raise LearningError(
                    f"rule '{name}' has no learnable weight (its weight is {rule.weight.kind.value}): "
                    "declare it with WEIGHT ?, WEIGHT ?(symbols) or WEIGHT ? * feature"
                )
    else:
        names = sorted(n for n, r in rules.items() if is_learnable(r) and cluster_relation(r, variables) is not None)
        if not names:
            raise LearningError(
                "no cluster rule has a learnable weight: declare one with WEIGHT ? * feature (or WEIGHT ?, WEIGHT ?(symbols)) "
                "on an entity(a) = entity(b) pair rule"
            )
    relations = sorted({cluster_relation(rules[n], variables) for n in names})
    if len(relations) > 1:
        raise LearningError(
            f"the rules to learn are over several cluster relations ({', '.join(relations)}); learn one at a time with FOR"
        )
    return relations[0], names


def _gold_source(text: str) -> exp.Expression:
    try:
        tree = sqlglot.parse_one(text, read="duckdb")
    except SqlglotError:
        tree = None
    if isinstance(tree, exp.Query):
        return tree.subquery("g")
    try:
        return exp.select(exp.Star()).from_(table_expr(text.strip())).subquery("g")
    except CatalogError as e:
        raise OptionError(f"option 'gold' is neither a query nor a table name: {e}") from None


def _key(x):
    return x.item() if isinstance(x, np.generic) else x


def _gold_labels(con, v: CreateVariable, text: str, keys: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Dense gold entity per mention (keys in mention order); LearningError for missing mentions."""
    key = v.columns[0]
    src = _gold_source(text)
    try:
        names = [d[0] for d in con.execute(sql_text(exp.select(exp.Star()).from_(src).limit(0))).description]
    except duckdb.Error as e:
        raise OptionError(f"option 'gold': the gold table or query failed: {str(e).splitlines()[0]}") from None
    if len(names) < 2:
        raise OptionError(f"option 'gold' must give two columns (mention key, gold entity); it gives {len(names)}")
    gk = exp.TryCast(this=exp.Column(this=ident(names[0]), table=ident("g")), to=exp.DataType.build(key.type, dialect="duckdb"))
    ge = exp.Cast(this=exp.Column(this=ident(names[1]), table=ident("g")), to=exp.DataType.build("VARCHAR"))
    q = (
        exp.select(col("vid", "m"), ge.as_(ident("entity")))
        .from_(table_ref(map_table(v.name), "m"))
        .join(src, on=exp.EQ(this=col(key.name, "m"), expression=gk), join_type="LEFT")
    )
    try:
        res = con.execute(sql_text(q)).fetchnumpy()
        total = int(con.execute(sql_text(exp.select(exp.func("count", exp.Star())).from_(src.copy()))).fetchall()[0][0])
    except duckdb.Error as e:
        raise OptionError(f"option 'gold': the gold table or query failed: {str(e).splitlines()[0]}") from None
    vid = np.asarray(res["vid"], dtype=np.int64)
    ent = np.ma.asarray(res["entity"], dtype=object)
    missing = np.ma.getmaskarray(ent) | np.array([e is None for e in np.ma.filled(ent, None)], dtype=bool)
    if vid.size != keys.size:
        dup = np.flatnonzero(np.bincount(vid, minlength=keys.size) > 1)
        raise LearningError(
            f"the gold clustering gives mention {_key(keys[dup[0]])!r} of '{v.name}' more than one row; "
            "give one gold entity per mention"
        )
    if missing.any():
        which = vid[missing]
        raise LearningError(
            f"the gold clustering has no entity for {int(missing.sum())} of {keys.size} mentions of '{v.name}' "
            f"(e.g. key {_key(keys[which[0]])!r}); every mention needs a gold entity"
        )
    labels = np.empty(keys.size, dtype=object)
    labels[vid] = np.ma.filled(ent, None)
    _, dense = np.unique(labels.astype(str), return_inverse=True)
    warnings = []
    if total > keys.size:
        warnings.append(f"the gold clustering has {total - keys.size} row(s) that are not mentions of '{v.name}'; ignored")
    return dense.reshape(-1).astype(np.int64), warnings


def _holdout(con, v: CreateVariable, config: LearnConfig, gold: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """bool[n]: the held-out mentions."""
    if isinstance(config.holdout, str):
        key = v.columns[0]
        try:
            src = sqlglot.parse_one(config.holdout, read="duckdb")
            sub = exp.Subquery(this=src, alias=exp.TableAlias(this=ident("q"), columns=[ident("k")]))
            q = (exp.select(col("vid", "m")).from_(table_ref(map_table(v.name), "m"))
                 .join(sub, on=exp.EQ(this=col(key.name, "m"), expression=col("k", "q"))).distinct())
            vids = np.asarray(con.execute(sql_text(q)).fetchnumpy()["vid"], dtype=np.int64)
        except (duckdb.Error, SqlglotError) as e:
            raise OptionError(f"the holdout query failed: {str(e).splitlines()[0]}") from None
        if vids.size == 0:
            raise OptionError(f"the holdout query selects no mention of '{v.name}'")
        mask = np.zeros(keys.size, dtype=bool)
        mask[vids] = True
        return mask
    frac = float(config.holdout)
    if frac <= 0:
        return np.zeros(keys.size, dtype=bool)
    ents = np.unique(gold)
    rng = np.random.default_rng(np.random.SeedSequence([config.seed, 16]))
    held = rng.choice(ents, size=int(round(frac * ents.size)), replace=False)
    return np.isin(gold, held)


def _subset(d: ClusterDesign, keep: np.ndarray) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(mentions kept, old indices, pair positions kept, new a, new b)."""
    old = np.flatnonzero(keep)
    new = np.full(keep.size, -1, np.int64)
    new[old] = np.arange(old.size)
    both = np.flatnonzero(keep[d.a] & keep[d.b])
    return int(old.size), old, both, new[d.a[both]], new[d.b[both]]


def _scores(pred: np.ndarray, gold: np.ndarray) -> dict:
    b3, pw = b_cubed(pred, gold), pairwise(pred, gold)
    return {"b3_precision": b3.precision, "b3_recall": b3.recall, "b3_f1": b3.f1,
            "pairwise_precision": pw.precision, "pairwise_recall": pw.recall, "pairwise_f1": pw.f1}


def execute_coref_learn(
    con: duckdb.DuckDBPyConnection,
    catalog: Catalog,
    stmt: LearnWeights,
    config: LearnConfig,
    *,
    on_epoch: Callable[[EpochInfo], bool | None] | None = None,
) -> CorefLearnOutcome:
    """LEARN WEIGHTS for cluster rules (module docstring). Nothing is written unless learning
    finished (or was stopped by Ctrl-C / time_limit) and its version was stored."""
    given = {k.lower() for k, _ in stmt.options}
    if stmt.method is not LearnMethod.SAMPLERANK:
        raise LearningError(
            "cluster rules are learned USING SAMPLERANK (entity moves ranked against a gold clustering): "
            "LEARN WEIGHTS ... USING SAMPLERANK WITH (gold = '<table or query>')"
        )
    config = dataclasses.replace(config, **{k: v for k, v in CLUSTER_DEFAULTS.items() if k not in given})
    relation, names = _chosen(catalog, stmt)
    if config.gold is None:
        raise LearningError(
            f"learning the rules over cluster relation '{relation}' needs a gold clustering: "
            "WITH (gold = '<table or query giving mention key, gold entity>')"
        )
    variables = catalog.variables()
    v = variables[relation]
    try:  # the mention map lives only while gold and holdout are read against it
        d = design(con, v, variables, catalog.rules(), MAX_PAIRS)
        chosen = set(names)
        cols = np.array([k for k, (r, _) in enumerate(d.weights) if r in chosen], dtype=np.int64)
        if cols.size == 0 or d.groundings[cols].sum() == 0:
            raise LearningError(f"nothing to learn: rule(s) {', '.join(names)} have no groundings (no candidate pairs)")
        gold, warnings = _gold_labels(con, v, config.gold, d.keys)
        hold = _holdout(con, v, config, gold, d.keys)
    finally:
        drop_map(con, v.name)
    n_tr, old_tr, p_tr, a_tr, b_tr = _subset(d, ~hold)
    if n_tr == 0 or p_tr.size == 0:
        raise LearningError(
            f"the holdout ({int(hold.sum())} of {d.n} mentions) leaves no candidate pair to learn from: hold out less"
        )
    theta0 = d.values.copy()
    theta0[cols] = 0.0
    fixed = d.scores(theta0)  # every part of the pair score that is not learned here
    x = np.column_stack([d.dense_features(cols), fixed])
    problem = CorefRanking(n_tr, PairTable(a_tr, b_tr, x[p_tr]), gold[old_tr], objective=config.objective)
    initial = np.concatenate([d.values[cols], [1.0, 0.0]])
    learn = np.concatenate([np.ones(cols.size, bool), [False, False]])
    steps = config.epochs * n_tr
    t0 = time.perf_counter()
    done = [0]

    def progress(step: int) -> bool:
        epoch = step // n_tr
        if on_epoch is not None and epoch > done[0]:
            done[0] = epoch
            return bool(on_epoch(EpochInfo(epoch, config.epochs, float("nan"), time.perf_counter() - t0)))
        return False

    sr = samplerank(
        problem,
        SampleRankConfig(steps=steps, margin=config.margin, learning_rate=config.learning_rate, optimizer=config.optimizer,
                         averaged=config.averaged, walk=config.walk, seed=config.seed, time_limit=config.time_limit),
        initial=initial, learn=learn, on_progress=progress, on_weights=problem.set_weights,
    )
    learned = sr.weights[: cols.size]
    bad = ~np.isfinite(learned) | (np.abs(learned) > config.max_weight)
    if bad.any():
        k = int(cols[np.flatnonzero(bad)[0]])
        raise LearningError(f"SampleRank diverged: the weight of rule '{d.weights[k][0]}' became {learned[bad][0]}; "
                            "the previous weights are kept")
    stopped = sr.steps < steps
    interrupted = stopped and (sr.interrupted or config.time_limit is None or sr.seconds < config.time_limit)
    by_time = stopped and not interrupted
    if interrupted:
        warnings.append(f"learning was stopped after {sr.steps:,} of {steps:,} steps; the weights learned so far were stored")
    elif by_time:
        warnings.append(f"time_limit reached after {sr.steps:,} of {steps:,} steps; the weights learned so far were stored")
    theta = d.values.copy()
    theta[cols] = learned
    report = None
    if hold.any():
        n_te, old_te, p_te, a_te, b_te = _subset(d, hold)
        graph = pair_graph(n_te, a_te, b_te, d.scores(theta)[p_te])
        res = resolve_map(graph, dataclasses.replace(EVAL_MAP, seed=config.seed))
        report = {**_scores(res.labels, gold[old_te]), "mentions": n_te, "entities": int(np.unique(gold[old_te]).size)}
    hashes = {n: definition_hash(r) for n, r in catalog.rules().items() if n in chosen}
    version = _store(con, stmt, hashes, names, d, cols, learned, sr, interrupted or by_time, hold, report)
    epochs = sr.steps // n_tr
    result = SGDResult(
        weights=theta, stderr=np.full(theta.size, np.nan), learned=np.isin(np.arange(theta.size), cols),
        groundings=d.groundings, epochs=epochs, seconds=sr.seconds, interrupted=interrupted, stopped_by_time=by_time,
        history=learned[None, :],
    )
    r = report or {}
    table = pa.table({
        "version": pa.array([version], pa.int64()),
        "method": pa.array([stmt.method.value]),
        "rules": pa.array([", ".join(names)]),
        "weights": pa.array([int(cols.size)], pa.int64()),
        "epochs": pa.array([epochs], pa.int64()),
        "seconds": pa.array([round(sr.seconds, 3)]),
        "interrupted": pa.array([interrupted or by_time]),
        "holdout": pa.array([int(hold.sum())], pa.int64()),
        "objective": pa.array([config.objective]),
        "train_f1": pa.array([problem.objective_value()], pa.float64()),
        **{k: pa.array([r.get(k)], pa.float64()) for k in ("b3_precision", "b3_recall", "b3_f1", "pairwise_precision",
                                                            "pairwise_recall", "pairwise_f1")},
    })
    return CorefLearnOutcome(table, version, result, report, tuple(warnings))


def _store(con, stmt, hashes: dict[str, str], names, d: ClusterDesign, cols, learned, sr, stopped, hold, report) -> int:
    """One version, as `statement._store` records SGD's (cluster rules have no factor-store rows)."""
    rule_of = [d.weights[k][0] for k in cols]
    weights = pa.table({
        "rule": pa.array(rule_of, pa.string()),
        "rule_hash": pa.array([hashes[r] for r in rule_of], pa.string()),
        "tie": pa.array([d.weights[k][1] for k in cols], pa.string()),
        "value": pa.array(learned.astype(np.float64)),
        "stderr": pa.array([None] * cols.size, pa.float64()),
        "groundings": pa.array(d.groundings[cols].astype(np.int64)),
    })
    options = {k: v for k, v in stmt.options}
    if report is not None:
        options["holdout_scores"] = {k: v for k, v in report.items()}
    with transaction(con):
        ensure_learning_schema(con)
        version = next_version(con)
        record_version(
            con, version=version, method=stmt.method.value, rules=names, options=json.dumps(options),
            epochs=sr.steps // max(int((~hold).sum()), 1), seconds=sr.seconds, interrupted=stopped,
            holdout=int(hold.sum()), accuracy=None, log_loss=None, ece=None, weights=weights, calibration=None,
        )
    return version
