"""LEARN WEIGHTS, SHOW WEIGHTS and SHOW CALIBRATION against one database (docs/learning.md).

`execute_learn` grounds every rule, learns the chosen rules' ``?`` weights from the stored
evidence (`pdbq.learning.sgd`), evaluates a holdout if asked, then in one transaction stores a
new version of the learned weights in the catalog (``pdbq_learned_weights``) and writes the values
into the factor store, so the next query uses them. Anything that fails before that transaction
— bad options, no evidence, divergence — leaves the previous weights as they were.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa
from sqlglot.errors import SqlglotError

from pdbq.catalog.store import Catalog, transaction
from pdbq.catalog.weights import ensure_learning_schema, next_version, record_version, show_calibration, show_weights
from pdbq.errors import LearningError, OptionError, PdbqError, TimeLimitError
from pdbq.graph.from_store import full_graph
from pdbq.grounding.deadline import PlanningDeadline
from pdbq.grounding.fingerprint import definition_hash
from pdbq.grounding.variables import keys_to_vids, relation_info
from pdbq.language.nodes import LearnMethod, LearnWeights, Show, WeightKind
from pdbq.learning.config import LearnConfig
from pdbq.learning.coref_statement import cluster_relation, execute_coref_learn, wants_cluster_learning
from pdbq.learning.holdout import HoldoutReport, choose_holdout, evaluate_holdout, plot_calibration
from pdbq.learning.features import grounding_counts
from pdbq.learning.samplerank import GraphRanking, SampleRankConfig, samplerank
from pdbq.learning.sgd import EpochInfo, SGDResult, learn_sgd

# with a time_limit, the holdout evaluation gets what learning left, but at least this (seconds)
_MIN_EVAL_SECONDS = 0.1

__all__ = ["run_statement", "execute_learn", "LearnOutcome", "show_learned_weights", "show_learning_calibration",
           "calibration_from_catalog", "save_calibration_plot"]


@dataclass(frozen=True, eq=False)
class LearnOutcome:
    """What a LEARN WEIGHTS run did: its summary table (one row) and the details."""

    table: pa.Table
    version: int
    result: SGDResult
    holdout: HoldoutReport | None
    warnings: tuple[str, ...]
    coref_holdout: dict | None = None  # cluster rules: held-out B³ / pairwise scores


def _learnable_rules(catalog: Catalog, names: tuple[str, ...]) -> list[str]:
    rules = catalog.rules()
    variables = catalog.variables()
    learnable = sorted(n for n, r in rules.items() if r.weight.kind in (WeightKind.LEARNABLE, WeightKind.TIED)
                       and cluster_relation(r, variables) is None)
    if not names:
        if not learnable:
            if any(r.weight.kind in (WeightKind.LEARNABLE, WeightKind.TIED) for r in rules.values()):
                raise LearningError(
                    "the learnable weights are on DOMAIN CLUSTER rules: learn them USING SAMPLERANK "
                    "WITH (gold = '<table or query giving mention key, gold entity>')"
                )
            raise LearningError("no rule has a learnable weight: declare one with WEIGHT ? or WEIGHT ?(symbols)")
        return learnable
    chosen = []
    for name in names:
        rule = catalog.rule(name)  # CatalogError with suggestions for an unknown name
        if rule.weight.kind not in (WeightKind.LEARNABLE, WeightKind.TIED):
            raise LearningError(
                f"rule '{name}' has no learnable weight (its weight is {rule.weight.kind.value}): "
                "declare it with WEIGHT ? or WEIGHT ?(symbols)"
            )
        if name not in chosen:
            chosen.append(name)
    return chosen


def _holdout_mask(con: duckdb.DuckDBPyConnection, catalog: Catalog, evidence: np.ndarray, config: LearnConfig) -> np.ndarray:
    if not isinstance(config.holdout, str):
        return choose_holdout(evidence, float(config.holdout), config.seed)
    info = relation_info(con)
    with_ev = sorted(n for n, v in catalog.variables().items() if v.evidence is not None and n in info)
    relation = config.holdout_relation.lower() if config.holdout_relation else None
    if relation is None:
        if len(with_ev) != 1:
            raise OptionError(
                "a holdout query needs holdout_relation = 'name' when several variable relations have evidence: "
                + ", ".join(with_ev)
            )
        relation = with_ev[0]
    if relation not in info:
        raise OptionError(f"holdout_relation '{relation}' is not a variable relation")
    try:
        vids = keys_to_vids(con, relation, config.holdout)
    except (duckdb.Error, SqlglotError) as e:
        raise OptionError(f"the holdout query failed: {e}") from None
    vids = vids[vids >= 0]
    mask = np.zeros(evidence.shape[0], dtype=bool)
    mask[vids[evidence[vids] >= 0]] = True
    if not mask.any():
        raise OptionError("the holdout query selects no evidence variable of '" + relation + "'")
    return mask


def run_statement(
    con: duckdb.DuckDBPyConnection,
    catalog: Catalog,
    stmt: LearnWeights | Show,
    *,
    on_epoch: Callable[[EpochInfo], bool | None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> tuple[pa.Table, dict]:
    """LEARN WEIGHTS, SHOW WEIGHTS or SHOW CALIBRATION: ``(table, diagnostics)``."""
    if isinstance(stmt, Show):
        if stmt.kind.upper() == "WEIGHTS":
            return show_learned_weights(con, catalog), {}
        return show_learning_calibration(con), {}
    out = execute_learn(con, catalog, stmt, on_epoch=on_epoch, should_stop=should_stop)
    diagnostics = {"warnings": list(out.warnings), "version": out.version, "epochs": out.result.epochs,
                   "weight_history": out.result.history}
    if out.holdout is not None:
        diagnostics["holdout"] = out.holdout
    if out.coref_holdout is not None:
        diagnostics["holdout"] = out.coref_holdout
    return out.table, diagnostics


def execute_learn(
    con: duckdb.DuckDBPyConnection,
    catalog: Catalog,
    stmt: LearnWeights,
    *,
    on_epoch: Callable[[EpochInfo], bool | None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> LearnOutcome:
    """Run LEARN WEIGHTS. ``on_epoch(info)`` is called after every epoch; returning True stops
    learning there (the weights of the last full epoch are stored, marked interrupted);
    ``should_stop()`` (a cancel) is also read inside an epoch, between chunks of updates.
    ``time_limit`` counts from here: grounding, learning and the holdout evaluation share it."""
    started = time.perf_counter()
    config = LearnConfig.from_options(stmt.options)
    deadline = None if config.time_limit is None else started + config.time_limit
    if stmt.method is LearnMethod.SAMPLERANK and "learning_rate" not in {k.lower() for k, _ in stmt.options}:
        config = dataclasses.replace(config, learning_rate=1.0)
    if catalog.is_read_only():
        raise PdbqError("cannot LEARN WEIGHTS: the database is open read-only")
    if wants_cluster_learning(catalog, stmt, config):
        out = execute_coref_learn(con, catalog, stmt, config, on_epoch=on_epoch)
        return LearnOutcome(out.table, out.version, out.result, None, out.warnings, out.holdout)
    if config.gold is not None or "objective" in {k.lower() for k, _ in stmt.options}:
        raise OptionError("options 'gold' and 'objective' are for DOMAIN CLUSTER rules; FOR names none")
    names = _learnable_rules(catalog, stmt.rules)
    graph, stats = _ground(con, catalog, started, config.time_limit)
    spans = {name: (w0, w1) for name, w0, w1 in stats.weight_rules}
    mask = np.zeros(graph.weights.shape[0], dtype=bool)
    for name in names:
        if name in spans:
            w0, w1 = spans[name]
            mask[w0:w1] = graph.learnable[w0:w1]
    if not mask.any():
        raise LearningError(f"nothing to learn: rule(s) {', '.join(names)} have no groundings")
    evidence = graph.evidence
    if not (evidence >= 0).any():
        raise LearningError(
            "nothing to learn from: no variable has evidence; give a variable relation an EVIDENCE (SELECT keys..., value) query"
        )
    hold = _holdout_mask(con, catalog, evidence, config)
    train_ev = np.where(hold, -1, evidence).astype(np.int32)
    if not (train_ev >= 0).any():
        raise LearningError(f"the holdout ({int(hold.sum())} variables) leaves no evidence to learn from: hold out less")
    g_train = graph._replace(evidence=train_ev)
    if stmt.method is LearnMethod.SAMPLERANK:
        result = _learn_samplerank(g_train, config, mask, on_epoch)
    else:
        result = learn_sgd(g_train, config, learn=mask, on_epoch=on_epoch, deadline=deadline, should_stop=should_stop)
    if result.epochs == 0 and result.stopped_by_time:
        raise LearningError(
            f"time_limit {config.time_limit:g} s ran out before the first epoch finished "
            f"({config.chains} chain(s) × {config.sweeps} sweep(s) per epoch); the previous weights are kept. "
            "Raise time_limit or lower sweeps/chains"
        )
    warnings: list[str] = []
    if result.interrupted:
        warnings.append(f"learning was stopped after {result.epochs} of {config.epochs} epochs; the weights of the last full epoch were stored")
    elif result.stopped_by_time:
        warnings.append(f"time_limit reached after {result.epochs} of {config.epochs} epochs")
    if result.remaining is not None:
        far = np.flatnonzero(np.abs(result.remaining) > np.where(np.isfinite(result.stderr), 0.5 * result.stderr, 0.0))
        if far.size:
            worst = int(far[np.argmax(np.abs(result.remaining[far]))])
            rule = next((n for n, (w0, w1) in spans.items() if w0 <= worst < w1), "?")
            warnings.append(
                f"not converged: {far.size} weight(s) were still moving when learning ended (rule '{rule}': about "
                f"{result.remaining[worst]:+.3g} to go, beyond half its standard error); "
                "run more epochs, or raise learning_rate or decay"
            )
    report = None
    if hold.any() and result.epochs:
        learned_graph = g_train._replace(weights=result.weights)
        hv = np.flatnonzero(hold)
        left = None if deadline is None else max(deadline - time.perf_counter(), _MIN_EVAL_SECONDS)
        report = evaluate_holdout(learned_graph, hv, evidence[hv], sweeps=config.eval_steps, seed=config.seed + 2,
                                  threads=config.threads, time_limit=left)
        warnings += list(report.warnings)
    version = _store(con, stmt, config, names, spans, mask, result, report)
    table = pa.table({
        "version": pa.array([version], pa.int64()),
        "method": pa.array([stmt.method.value]),
        "rules": pa.array([", ".join(names)]),
        "weights": pa.array([int(mask.sum())], pa.int64()),
        "epochs": pa.array([result.epochs], pa.int64()),
        "seconds": pa.array([round(result.seconds, 3)]),
        "interrupted": pa.array([result.interrupted or result.stopped_by_time]),
        "holdout": pa.array([int(hold.sum())], pa.int64()),
        "accuracy": pa.array([report.accuracy if report else None], pa.float64()),
        "log_loss": pa.array([report.log_loss if report else None], pa.float64()),
        "ece": pa.array([report.ece if report else None], pa.float64()),
    })
    return LearnOutcome(table, version, result, report, tuple(warnings))


def _ground(con: duckdb.DuckDBPyConnection, catalog: Catalog, started: float, limit: float | None):
    """The whole model's graph and grounding stats; with a ``limit`` (seconds from ``started``)
    a grounding statement still running at the deadline is interrupted and rolled back, as a
    query's planning is (`pdbq.grounding.deadline`): a `TimeLimitError`, the weights kept."""
    if limit is None:
        graph, _vids, stats = full_graph(con, catalog.variables(), catalog.rules())
        return graph, stats
    guard = PlanningDeadline(con, started=started, limit=limit, stage="grounding the model to learn from")
    with guard:
        try:
            graph, _vids, stats = full_graph(con, catalog.variables(), catalog.rules())
        except Exception as exc:
            if not guard.fired:
                raise
            guard.handled = True
            raise _grounding_timed_out(guard) from exc
        if guard.fired:  # an interrupted statement's error was handled below: nothing to trust
            guard.handled = True
            raise _grounding_timed_out(guard)
    return graph, stats


def _grounding_timed_out(guard: PlanningDeadline) -> TimeLimitError:
    elapsed = time.perf_counter() - guard.started
    return TimeLimitError(f"time_limit {guard.limit:g} s ran out while {guard.stage} ({elapsed:.2f} s into LEARN "
                          "WEIGHTS), before any epoch; the unfinished grounding was interrupted and rolled back and "
                          "the previous weights are kept: raise time_limit (or ground the model first with "
                          "Database.ground())", stage=guard.stage, elapsed=elapsed)


def _learn_samplerank(graph, config: LearnConfig, mask: np.ndarray, on_epoch) -> SGDResult:
    """SampleRank on a general model: the labelled (training evidence) variables are unclamped
    and walked by single-variable moves; the objective is their accuracy against the labels.
    (Coreference models bring their own ranking problem: entity moves and B³/pairwise F1.)"""
    t0 = time.perf_counter()
    labels = graph.evidence.astype(np.int64)
    problem = GraphRanking(graph._replace(evidence=np.full(graph.n_vars, -1, np.int32)), labels, seed=config.seed)
    n_labels = int((labels >= 0).sum())
    steps = config.epochs * n_labels
    done = [0]

    def progress(step: int) -> bool:
        epoch = step // max(n_labels, 1)
        if epoch > done[0]:
            done[0] = epoch
            if on_epoch is not None:
                return bool(on_epoch(EpochInfo(epoch, config.epochs, float("nan"), time.perf_counter() - t0)))
        return False

    sr = samplerank(
        problem,
        SampleRankConfig(steps=steps, margin=config.margin, learning_rate=config.learning_rate,
                         optimizer=config.optimizer, averaged=config.averaged, walk=config.walk,
                         seed=config.seed, time_limit=config.time_limit),
        initial=graph.weights,
        learn=mask,
        on_progress=progress,
    )
    bad = ~np.isfinite(sr.weights) | (np.abs(sr.weights) > config.max_weight)
    if bad.any():
        raise LearningError(f"SampleRank diverged: weight {int(np.flatnonzero(bad)[0])}; the previous weights are kept")
    interrupted = sr.steps < steps and (config.time_limit is None or sr.seconds < config.time_limit)
    return SGDResult(
        weights=sr.weights, stderr=np.where(mask, np.nan, 0.0), learned=mask,
        groundings=grounding_counts(graph), epochs=sr.steps // max(n_labels, 1), seconds=sr.seconds,
        interrupted=interrupted, stopped_by_time=sr.steps < steps and not interrupted,
        history=sr.weights[mask][None, :],
    )


def _store(con, stmt: LearnWeights, config: LearnConfig, names: list[str], spans: dict, mask: np.ndarray,
           result: SGDResult, report: HoldoutReport | None) -> int:
    names_col: list[pa.Array] = []
    ks: list[np.ndarray] = []
    wids: list[np.ndarray] = []
    for name in names:
        if name not in spans:
            continue
        w0, w1 = spans[name]
        k = w0 + np.flatnonzero(mask[w0:w1])
        ks.append(k)
        wids.append(k - w0)
        names_col.append(pa.array([name] * k.shape[0], pa.string()))
    k = np.concatenate(ks) if ks else np.zeros(0, np.int64)
    se = result.stderr[k]
    learned = pa.table({
        "rule": pa.concat_arrays(names_col) if names_col else pa.array([], pa.string()),
        "wid": pa.array(np.concatenate(wids).astype(np.int32) if wids else np.zeros(0, np.int32)),
        "value": pa.array(result.weights[k].astype(np.float64)),
        "stderr": pa.array(se, mask=~np.isfinite(se)),
        "groundings": pa.array(result.groundings[k].astype(np.int64)),
    })
    calibration = None
    if report is not None:
        cal = report.rows()
        calibration = pa.table({
            "bucket": pa.array([r[0] for r in cal], pa.int32()),
            "lower": pa.array([r[1] for r in cal], pa.float64()),
            "upper": pa.array([r[2] for r in cal], pa.float64()),
            "predicted": pa.array([r[3] for r in cal], pa.int64()),
            "true_count": pa.array([r[4] for r in cal], pa.int64()),
            "false_count": pa.array([r[5] for r in cal], pa.int64()),
            "mean_probability": pa.array([r[6] for r in cal], pa.float64()),
            "observed_fraction": pa.array([r[7] for r in cal], pa.float64()),
        })
    with transaction(con):
        ensure_learning_schema(con)
        version = next_version(con)
        con.register("pdbq_tmp_new_weights", learned)
        try:
            # the factor store's rows: queries read these values from now on
            con.execute(
                "UPDATE pdbq_fs_weights SET value = n.value FROM pdbq_tmp_new_weights n "
                "WHERE pdbq_fs_weights.rule = n.rule AND pdbq_fs_weights.wid = n.wid"
            )
            with_tie = con.sql(
                "SELECT n.rule, r.def_hash AS rule_hash, w.tie, n.value, n.stderr, n.groundings "
                "FROM pdbq_tmp_new_weights n JOIN pdbq_fs_weights w ON w.rule = n.rule AND w.wid = n.wid "
                "JOIN pdbq_fs_rules r ON r.rule = n.rule ORDER BY n.rule, n.wid"
            ).to_arrow_table()
        finally:
            con.unregister("pdbq_tmp_new_weights")
        record_version(
            con,
            version=version,
            method=stmt.method.value,
            rules=names,
            options=json.dumps({k: v for k, v in stmt.options}),
            epochs=result.epochs,
            seconds=result.seconds,
            interrupted=result.interrupted or result.stopped_by_time,
            holdout=report.n if report else 0,
            accuracy=report.accuracy if report else None,
            log_loss=report.log_loss if report else None,
            ece=report.ece if report else None,
            weights=with_tie,
            calibration=calibration,
        )
    return version


def _current_hashes(con: duckdb.DuckDBPyConnection, catalog: Catalog) -> dict[str, str]:
    """Rule -> definition hash of the current definition (what the factor store records)."""
    return {name: definition_hash(rule) for name, rule in catalog.rules().items()}


def show_learned_weights(con: duckdb.DuckDBPyConnection, catalog: Catalog) -> pa.Table:
    """SHOW WEIGHTS: rule, weight text, tie, value, stderr, groundings, version."""
    return show_weights(con, _current_hashes(con, catalog), catalog.rules())


def show_learning_calibration(con: duckdb.DuckDBPyConnection) -> pa.Table:
    """SHOW CALIBRATION: the latest holdout's 10 buckets."""
    return show_calibration(con)


def calibration_from_catalog(con: duckdb.DuckDBPyConnection) -> HoldoutReport:
    """The latest stored calibration as a `HoldoutReport` (for plotting); PdbqError if none."""
    t = show_calibration(con)
    if t.num_rows == 0:
        raise PdbqError("no calibration stored: run LEARN WEIGHTS ... WITH (holdout = 0.25) first")
    version = t.column("version")[0].as_py()
    summary = con.execute(
        "SELECT holdout, accuracy, log_loss, ece FROM pdbq_weight_versions WHERE version = ?", [version]
    ).fetchall()[0]
    mp = np.array([np.nan if v is None else v for v in t.column("mean_probability").to_pylist()], dtype=np.float64)
    return HoldoutReport(
        n=int(summary[0]), accuracy=float(summary[1]), log_loss=float(summary[2]), ece=float(summary[3]),
        predicted=np.asarray(t.column("predicted").to_pylist(), dtype=np.int64),
        true_count=np.asarray(t.column("true_count").to_pylist(), dtype=np.int64),
        mean_probability=mp, max_stderr=float("nan"),
    )


def save_calibration_plot(con: duckdb.DuckDBPyConnection, path) -> None:
    """Save the latest stored calibration plot as a PNG (needs matplotlib: pip install 'pdbq[plot]')."""
    plot_calibration(calibration_from_catalog(con), path)
