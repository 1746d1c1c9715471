"""Answer a probabilistic query over a `DOMAIN CLUSTER` relation (docs/coreference.md).

    SELECT e.id, MAP(e) AS cluster FROM entity AS e;                      -- MAP clustering
    SELECT e.id, PROB(e = 17) AS p, STDERR(e) AS se FROM entity AS e
    WHERE e.id IN (18, 19);                                               -- P(same entity as 17)
    SELECT e.id, DIST(e) FROM entity AS e WHERE e.id = 17;                -- size of 17's entity

MAP is the annealed MAP clustering (`pdbq.inference.coreference.resolve.resolve_map`); each row gets its
entity's smallest key, so labels are stable across runs that agree. PROB/STDERR/DIST sample
the clustering at τ = 1 with several chains (standard errors across chains). Options (WITH):
the fields of `CorefConfig` (sweeps, burn_in, chains, seed, temperature, min_temperature,
greedy_sweeps, p_new, p_split_merge, time_limit, init, init_threshold, subsample, proposal) and max_pairs.
Diagnostics carry factor evaluations, proposals, acceptances, pairs and seconds.

`pdbq.planning.execute.execute_query` calls `is_cluster_query` / `execute_cluster_query` in one
branch: cluster relations never enter the factor store or the Gibbs engine.
"""

from __future__ import annotations

import re

import time
import uuid
from dataclasses import fields

import duckdb
import numpy as np
import pyarrow as pa
import sqlglot
from sqlglot import exp

from pdbq.catalog.cluster import is_cluster
from pdbq.coref.ground import design, drop_map, map_table, mention_map
from pdbq.distributed.config import MAX_PARTITIONS, MAX_ROUNDS
from pdbq.errors import InferenceError, OptionError, suggest
from pdbq.grounding.deadline import PlanningDeadline
from pdbq.grounding.store import col, ident, sql_text, table_ref
from pdbq.inference.coreference.resolve import CorefConfig, CorefMapResult, initial_labels, resolve_map, sample_pairs
from pdbq.inference.coreference.subsample import SubsampleConfig
from pdbq.language.nodes import EstimateKind, Method, ProbQuery
from pdbq.planning.cluster_cache import input_key, keep_design, kept_design
from pdbq.planning.duck_errors import check_list_types, query_error
from pdbq.planning.coref_pairs import VID, check_pair_relations, lookup_pairs, pair_estimates, pair_rows
from pdbq.planning.plan import QueryAnswer
from pdbq.planning.rewrite import PLACEHOLDER_PREFIX, check_aliases, substitute

__all__ = ["is_cluster_query", "execute_cluster_query"]

_OPTIONS = {f.name for f in fields(CorefConfig)} | {"max_pairs", "interval", "decide", "workers", "scheduler", "rounds"}
_MAX_PAIRS = 20_000_000
# options of an in-process MAP that the distributed rounds do not read (why, for the error)
_INERT_ON_DASK = {
    "chains": "the rounds anneal one clustering (in this process MAP keeps the best of 'chains')",
    "greedy_sweeps": "the rounds end with 2 zero-temperature rounds of their own",
    "burn_in": "MAP keeps no samples, so it has no burn-in",
    "subsample": "the rounds score every changed pair exactly",
    "interval": "the rounds score every changed pair exactly",
    "decide": "the rounds score every changed pair exactly",
}
_MAX_DIST_SIZE = 500
# a Dask address: protocol://host[:port] (tcp, tls, ws, wss, ucx, inproc)
_SCHEDULER = re.compile(r"^(tcp|tls|ws|wss|ucx|inproc)://[^\s\x00/]+(:\d{1,5})?/?$")


def _relations(db, stmt: ProbQuery, variables=None) -> dict[str, str]:
    calls = {e.alias: e.kind.value for e in stmt.estimates}
    calls.update({e.other: e.kind.value for e in stmt.estimates if e.other is not None and e.other not in calls})
    return check_aliases(stmt.tree, calls, set(db.catalog.variables() if variables is None else variables))


def is_cluster_query(db, stmt: ProbQuery, variables=None) -> bool:
    """True when some estimate names a cluster relation (then all must; mixing is an error).
    ``variables``: the catalog's variable relations when the caller has them."""
    if stmt.tree is None or not stmt.estimates:
        return False
    if variables is None:
        variables = db.catalog.variables()
    try:
        rels = _relations(db, stmt, variables)
    except Exception:  # noqa: BLE001 - the ordinary path reports alias errors itself
        return False
    kinds = {is_cluster(variables[r]) for r in rels.values()}
    if kinds == {True, False}:
        raise InferenceError("a query cannot mix a DOMAIN CLUSTER relation with other variable relations")
    return kinds == {True}


def _distributed(opts: dict) -> dict | None:
    """The Dask options of a MAP query (docs/distributed.md): ``workers``, ``scheduler``,
    ``rounds``; None when the query runs in this process."""
    keys = {k: opts.pop(k) for k in ("workers", "scheduler", "rounds") if k in opts}
    if not keys:
        return None
    sched = keys.get("scheduler")
    if "scheduler" in keys and (not isinstance(sched, str) or not _SCHEDULER.match(sched)):
        raise OptionError(f"option 'scheduler' must be an address such as 'tcp://host:8786', got {sched!r}")
    for name, top in (("rounds", MAX_ROUNDS), ("workers", MAX_PARTITIONS)):
        v = keys.get(name, 1)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise OptionError(f"option '{name}' must be a positive integer, got {v!r}")
        if v > top:
            raise OptionError(f"option '{name}' must be at most {top:,}, got {v if v < 10**15 else 'a huge number'}")
    return keys


def _config(stmt: ProbQuery) -> tuple[CorefConfig, int]:
    opts = dict(stmt.options)
    dist = _distributed(opts)  # checked and run by _resolve_map
    if dist and not any(e.kind is EstimateKind.MAP for e in stmt.estimates):
        raise OptionError(f"option '{sorted(dist)[0]}' has no effect on PROB/DIST of a cluster relation: "
                          "workers, scheduler and rounds distribute MAP(...) rounds; PROB and DIST sample in this process")
    unknown = sorted(set(opts) - _OPTIONS)
    if unknown:
        raise OptionError(f"option '{unknown[0]}' is not an option of cluster queries.{suggest(unknown[0], _OPTIONS)}")
    max_pairs = opts.pop("max_pairs", _MAX_PAIRS)
    # seed 000: WITH (subsample = 0.1) or (subsample = 'confidence', interval = 20[, decide = true])
    opts["subsample"] = SubsampleConfig.from_options(opts.pop("subsample", None), opts.pop("interval", None),
                                                     opts.pop("decide", None))
    if isinstance(max_pairs, bool) or not isinstance(max_pairs, int) or max_pairs < 1:
        raise OptionError(f"option 'max_pairs' must be a positive integer, got {max_pairs!r}")
    base = CorefConfig(sweeps=30, temperature=0.5, chains=2, p_split_merge=0.2) if any(
        e.kind is EstimateKind.MAP for e in stmt.estimates) else CorefConfig(sweeps=200, burn_in=50, chains=4, temperature=1.0)
    try:
        cfg = CorefConfig(**{**base.__dict__, **opts})
    except TypeError as exc:  # pragma: no cover - guarded by _OPTIONS
        raise OptionError(str(exc)) from exc
    return cfg.check(), max_pairs


def _resolve_map(graph, config: CorefConfig, stmt: ProbQuery, poll=None, deadline: float | None = None):
    """MAP in this process, or by Dask map/redistribute rounds when the query names ``workers``
    or a ``scheduler`` (same total proposals: ``sweeps`` passes over the mentions); with the
    Dask run's summary for the diagnostics (None in this process). ``poll()``: the statement's
    cancel check, called between passes and while waiting on Dask rounds."""
    dist = _distributed(dict(stmt.options))
    if dist is None:
        return resolve_map(graph, config, poll=poll, deadline=deadline), None
    if config.proposal != "neighbour":
        raise OptionError(f"option 'proposal' = {config.proposal!r} is not available with workers/scheduler "
                          "(distributed rounds run the neighbour mention moves)")
    inert = sorted(_INERT_ON_DASK.keys() & set(dict(stmt.options)))
    if inert:
        raise OptionError(f"option '{inert[0]}' has no effect with workers, scheduler or rounds: {_INERT_ON_DASK[inert[0]]}")
    from pdbq.distributed import DistributedConfig, resolve_distributed  # noqa: PLC0415 - Dask only when asked

    workers = dist.get("workers", 2)
    rounds = dist.get("rounds", 8)
    n = graph.indptr.shape[0] - 1
    greedy = 2
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise OptionError(f"option 'rounds' must be a positive integer, got {rounds!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise OptionError(f"option 'workers' must be a positive integer, got {workers!r}")
    cfg = DistributedConfig(
        workers=workers, rounds=rounds, greedy_rounds=greedy,
        steps_per_round=max(1, config.sweeps * n // (rounds + greedy) // workers),
        temperature=config.temperature, min_temperature=config.min_temperature, p_new=config.p_new,
        p_split_merge=config.p_split_merge, seed=config.seed, time_limit=_time_left(config.time_limit, deadline),
    ).check()
    init = initial_labels(graph, config)
    if _shardable(graph, workers):
        return _resolve_sharded(graph, cfg, init, rounds + greedy, poll, dist.get("scheduler"))
    res = resolve_distributed(graph, cfg, labels=init, scheduler=dist.get("scheduler"), poll=poll)
    warnings = _time_warnings(res, config.time_limit, rounds + greedy, "distributed",
                              "the clustering is the last finished round's")
    summary = {"mode": "dealt", **res.summary()}
    return CorefMapResult(res.labels, res.log_score, np.array([res.log_score]), res.factor_evaluations, res.proposals,
                          res.accepted, res.seconds, warnings), summary


def _time_left(limit: float | None, deadline: float | None) -> float | None:
    """The rounds' time limit: what the query's deadline leaves of it (its grounding spent the
    rest), at least a millisecond (the rounds then stop at once and keep the starting labels)."""
    if deadline is None:
        return limit
    return max(deadline - time.perf_counter(), 1e-3)


def _time_warnings(res, time_limit: float, planned: int, kind: str, kept: str) -> tuple[str, ...]:
    """What a time limit that ended ``kind`` ("distributed" or "sharded") MAP rounds leaves to say:
    ``kept`` names the clustering answered when some round finished."""
    if not res.stopped_by_time:
        return ()
    if res.rounds:
        return (f"time_limit {time_limit:g} s reached after {len(res.rounds)} of {planned} {kind} rounds: {kept}",)
    return (f"time_limit {time_limit:g} s reached before the first of {planned} {kind} rounds finished (it was "
            "cancelled): the clustering is the starting one, not a MAP estimate; raise time_limit or lower workers",)


def _shardable(graph, workers: int) -> bool:
    """Whether the sharded rounds run: with two or more workers and at least a mention per shard.
    Components larger than a shard's share are split, entities moving across the cut pairs between
    rounds, so no component keeps the dealt rounds (whose every worker holds all the pairs)."""
    n = graph.indptr.shape[0] - 1
    return workers >= 2 and n >= workers


def _resolve_sharded(graph, cfg, init: np.ndarray, planned: int, poll=None, scheduler: str | None = None):
    """The MAP rounds over shards of candidate-pair components, written as Parquet files to a
    temporary directory here (removed after the run): the in-process cluster's workers read their
    shards from them; a ``scheduler``'s cannot, so each shard's rows are sent to its worker."""
    import shutil  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    from pdbq.distributed.shards import resolve_sharded, shard_by_components  # noqa: PLC0415
    from pdbq.inference.coreference.entity_moves import partition_score  # noqa: PLC0415

    where = tempfile.mkdtemp(prefix="pdbq-shards-")
    try:
        res = resolve_sharded(shard_by_components(where, graph, init), cfg, poll=poll, scheduler=scheduler,
                              ship=scheduler is not None)
    finally:
        shutil.rmtree(where, ignore_errors=True)
    warnings = _time_warnings(res, cfg.time_limit, planned, "sharded",
                              "each shard's clustering is the last round it finished")
    score = float(partition_score(graph, res.labels))
    return CorefMapResult(res.labels, score, np.array([score]), sum(r.evaluations for r in res.rounds),
                          sum(r.proposals for r in res.rounds), sum(r.accepted for r in res.rounds), res.seconds,
                          warnings), res.summary()


def _anchor(con, key_type: str, literal: str, keys: np.ndarray, alias: str) -> int:
    try:
        value = con.execute(sql_text(exp.select(exp.Cast(this=sqlglot.parse_one(literal, read="duckdb"),
                                                         to=exp.DataType.build(key_type, dialect="duckdb"))))).fetchall()[0][0]
    except Exception as exc:  # noqa: BLE001
        raise InferenceError(f"PROB({alias} = {literal}): {literal} is not a key of type {key_type}") from exc
    pos = int(np.searchsorted(keys, value))
    if pos >= keys.size or keys[pos] != value:
        raise InferenceError(f"PROB({alias} = {literal}): no mention has key {literal}")
    return pos


def execute_cluster_query(db, stmt: ProbQuery, cancel=None) -> QueryAnswer:
    """Answer a query over DOMAIN CLUSTER relations (module docstring); ``cancel``: the
    statement's `pdbq.progress.CancelToken`, checked between the samplers' passes and while
    waiting on Dask rounds."""
    started = time.perf_counter()
    poll = None if cancel is None else cancel.check
    if stmt.explain:
        raise InferenceError("EXPLAIN is not available for DOMAIN CLUSTER queries yet; the query's diagnostics "
                             "(Result.diagnostics) give pairs, proposals and factor evaluations")
    if stmt.given:
        raise InferenceError("GIVEN is not supported for DOMAIN CLUSTER relations yet (give known matches as pairs with a large weight)")
    if stmt.method not in (Method.AUTO, Method.ANNEAL, Method.GIBBS):
        raise InferenceError(f"USING {stmt.method.value} is not available for DOMAIN CLUSTER relations (AUTO, ANNEAL or GIBBS)")
    config, max_pairs = _config(stmt)
    # the samplers' deadline: the query's time limit counts from its start, grounding included
    deadline = None if config.time_limit is None else started + config.time_limit
    con = db.duckdb
    variables = db.catalog.variables()
    rules = db.catalog.rules()
    relations = _relations(db, stmt)
    pair_rels = check_pair_relations(stmt, relations)
    diag: dict = {"method": "entity moves (MH: mention moves, split/merge)", "options": dict(stmt.options)}
    sources = {}
    names: list[str] = []
    warnings: list[str] = []
    grounded: dict[str, tuple] = {}
    try:
        for alias, relation in relations.items():
            v = variables[relation]
            if relation not in grounded:  # two aliases of one relation share its grounding
                t0 = time.perf_counter()
                d = _ground(db, v, variables, rules, max_pairs, started, config.time_limit)
                grounded[relation] = (np.asarray(d.keys), d.graph())
                diag[f"{alias}.grounding_seconds"] = time.perf_counter() - t0
                if d.models:  # which stored pair model (name@version) answered each WEIGHT MODEL rule
                    diag[f"{alias}.pair_models"] = {m.rule: f"{m.name}@{m.version}" for m in d.models}
            keys, graph = grounded[relation]
            diag[f"{alias}.mentions"] = int(keys.size)
            diag[f"{alias}.candidate_pairs"] = graph.n_pairs
            diag[f"{alias}.subsample"] = config.subsample.label()
            ests = [e for e in stmt.estimates if e.alias == alias and e.other is None]
            table = _alias_estimates(con, stmt, alias, v.columns[0], keys, graph, ests, config, diag, warnings, poll,
                                     deadline)
            name = f"__pdbq_cluster_est_{uuid.uuid4().hex}"
            con.register(name, table)
            names.append(name)
            sources[alias] = _source(v, name, [e.placeholder for e in ests])
        tree = stmt.tree
        if pair_rels:
            tree = _pair_answers(con, stmt, tree, sources, pair_rels, grounded, config, max_pairs, names, diag, warnings,
                                 poll, deadline)
        try:
            out = con.sql(sql_text(substitute(tree, sources))).to_arrow_table()
        except duckdb.Error as exc:
            check_list_types(exc, stmt)
            raise query_error(exc, {a: (r, variables[r].columns) for a, r in relations.items()}) from None
    finally:
        for name in names:
            con.unregister(name)
        for relation in set(relations.values()):
            drop_map(con, relation)
    keep = [c for c in out.column_names if not c.startswith(PLACEHOLDER_PREFIX)]
    if len(keep) != len(out.column_names):
        out = out.select(keep)
    diag["warnings"] = warnings
    diag["seconds"] = time.perf_counter() - started
    return QueryAnswer(out, diag)


def _ground(db, v, variables, rules, max_pairs: int, started: float, limit: float | None):
    """`design` under the query's time limit: its DuckDB statements are interrupted at the
    deadline (`pdbq.grounding.deadline.PlanningDeadline`: a `TimeLimitError` naming the stage,
    nothing kept); the grounding of an earlier query when its inputs are unchanged
    (`pdbq.planning.cluster_cache`)."""
    con = db.duckdb

    def ground():
        key = input_key(con, v, variables, rules, max_pairs)
        kept = kept_design(db, v.name, key)
        if kept is not None and np.array_equal(mention_map(con, v), kept.keys):  # the map table again
            return kept
        made = design(con, v, variables, rules, max_pairs)
        keep_design(db, v.name, key, made)
        return made

    if limit is None:
        return ground()
    with PlanningDeadline(con, started=started, limit=limit, stage=f"grounding cluster relation '{v.name}'"):
        return ground()


def _source(v, name: str, placeholders: list[str]):
    """The relation standing for an alias of cluster relation `v` in the final query: its key,
    its mention number (`VID`) and the alias's estimates (registered as `name`)."""
    key = v.columns[0]

    def make(a):
        sel = exp.select(col(key.name, "__pdbq_m").as_(ident(key.name)), col("vid", "__pdbq_m").as_(ident(VID)),
                         *[col(p, "__pdbq_e").as_(ident(p)) for p in placeholders])
        sel = sel.from_(table_ref(map_table(v.name), "__pdbq_m")).join(
            table_ref(name, "__pdbq_e"), on=exp.EQ(this=col("vid", "__pdbq_m"), expression=col("__pdbq_cvid", "__pdbq_e")))
        al = a.copy() if isinstance(a, exp.TableAlias) else exp.TableAlias(this=exp.to_identifier(a))
        node = exp.Subquery(this=sel, alias=al)
        node.meta["pdbq_source"] = True
        return node

    return make


def _alias_estimates(con, stmt, alias, key, keys, graph, ests, config, diag, warnings, poll=None,
                     deadline: float | None = None) -> pa.Table:
    """One row per mention of `alias`'s relation: its MAP, PROB(alias = k), STDERR, DIST columns."""
    cols: dict[str, object] = {"__pdbq_cvid": np.arange(keys.size, dtype=np.int64)}
    if any(e.kind is EstimateKind.MAP for e in ests):
        res, dask = _resolve_map(graph, config, stmt, poll, deadline)
        if dask is not None:
            diag["dask"] = dask
        warnings.extend(res.warnings)
        diag.update({f"{alias}.factor_evaluations": res.factor_evaluations, f"{alias}.proposals": res.proposals,
                     f"{alias}.accepted": res.accepted, f"{alias}.log_score": res.log_score,
                     f"{alias}.entities": res.n_entities, f"{alias}.map_seconds": res.seconds})
        for e in ests:
            if e.kind is EstimateKind.MAP:
                cols[e.placeholder] = pa.array(keys[res.labels])
    anchors = sorted({e.value for e in ests if e.kind is EstimateKind.PROB and e.value is not None}, key=str)
    for e in ests:
        if e.kind is EstimateKind.PROB and e.value is None:
            raise InferenceError(f"PROB({alias}) needs a key: PROB({alias} = <key>) is P(same entity as <key>), "
                                 f"PROB({alias} = b) for a second alias b P(the two rows are one entity)")
        if e.kind is EstimateKind.STDERR and len(anchors) != 1:
            raise InferenceError(f"STDERR({alias}) is the standard error of the one PROB({alias} = <key>) of the query; "
                                 f"it has {len(anchors)} (for two aliases write STDERR({alias} = b))")
    n = keys.size
    if anchors:
        # pairs (row, anchor) for every row of the relation; the query's WHERE picks rows
        qa = np.tile(np.arange(n), len(anchors))
        qb = np.repeat([_anchor(con, key.type, a, keys, alias) for a in anchors], n)
        post = sample_pairs(graph, qa, qb, config, poll=poll, deadline=deadline)
        warnings.extend(post.warnings)
        diag.update({f"{alias}.sample_factor_evaluations": post.factor_evaluations,
                     f"{alias}.sample_proposals": post.proposals, f"{alias}.sample_seconds": post.seconds})
        for e in ests:
            if e.kind in (EstimateKind.PROB, EstimateKind.STDERR):
                k = anchors.index(e.value) if e.kind is EstimateKind.PROB else 0
                block = slice(k * n, (k + 1) * n)
                cols[e.placeholder] = post.prob[block] if e.kind is EstimateKind.PROB else post.stderr[block]
    if any(e.kind is EstimateKind.DIST for e in ests):
        dist = _size_distribution(graph, config, min(n, _MAX_DIST_SIZE), poll, deadline, warnings)
        # a row the time limit left without a kept pass is NaN: NULL, never an empty distribution
        unknown = np.isnan(dist).any(axis=1)
        entries = [None if bad else [(int(s), float(p)) for s, p in enumerate(row) if p > 0]
                   for bad, row in zip(unknown.tolist(), dist)]
        arr = pa.array(entries, type=pa.map_(pa.int64(), pa.float64()))
        for e in ests:
            if e.kind is EstimateKind.DIST:
                cols[e.placeholder] = arr
    return pa.table(cols)


def _pair_answers(con, stmt, tree, sources, pair_rels, grounded, config, max_pairs, names, diag, warnings, poll=None,
                  deadline: float | None = None):
    """`PROB(a = b)` / `STDERR(a = b)` (`pdbq.planning.coref_pairs`): sample the pairs the query
    selects, register them, and return the tree with each pair estimate a lookup there."""
    first = substitute(tree, sources)
    tables = {}
    for (alias, other), relation in pair_rels.items():
        qa, qb = pair_rows(con, first, alias, other, max_pairs)
        post = sample_pairs(grounded[relation][1], qa, qb, config, poll=poll, deadline=deadline)
        warnings.extend(post.warnings)
        tag = f"{alias}={other}"
        diag.update({f"{tag}.pairs": int(qa.size), f"{tag}.sample_factor_evaluations": post.factor_evaluations,
                     f"{tag}.sample_proposals": post.proposals, f"{tag}.sample_seconds": post.seconds})
        name = f"__pdbq_cluster_pairs_{uuid.uuid4().hex}"
        con.register(name, pa.table({"qa": qa, "qb": qb, "p": np.asarray(post.prob, np.float64),
                                     "se": np.asarray(post.stderr, np.float64)}))
        names.append(name)
        tables[(alias, other)] = name
    return lookup_pairs(tree, pair_estimates(stmt), tables)


def _size_distribution(graph, config: CorefConfig, cap: int, poll=None, deadline: float | None = None,
                       warnings: list[str] | None = None) -> np.ndarray:
    """P(the entity of mention m has size s) for every m, s < cap+1 (sizes above cap count as cap)."""
    from pdbq.inference.coreference.resolve import sample_sizes  # noqa: PLC0415

    return sample_sizes(graph, config, cap, poll, deadline, warnings)
