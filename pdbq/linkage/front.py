"""The practical front door to coreference: `pdbq.dedupe(source, id=..., fields=[...])` → (id, cluster).

Reads a CSV/Parquet file or a DuckDB table/view and, by default, estimates a Fellegi–Sunter
pair model from the records themselves (no labels, no weights to set): comparison levels per
field sniffed from the values, u from random pairs, m and the match prior by EM, term
frequencies; chooses blocking under `max_pairs` with an estimate of the matches it loses; scores
the candidate pairs (posterior log-odds); resolves the MAP clustering with entity moves; and
returns (and optionally writes) a table `(id, cluster)` where `cluster` is the smallest id in
the record's cluster. Labels (`train=`) replace EM; hand-set linear `comparisons` replace the
estimated model (below: a table of three records is too small to estimate anything from).

>>> import duckdb
>>> con = duckdb.connect()
>>> _ = con.execute("CREATE TABLE people AS SELECT * FROM (VALUES (1, 'John Smith'), "
...                 "(2, 'Jon Smith'), (3, 'Mary Jones')) t(id, name)")
>>> dedupe("people", id="id", comparisons=[Comparison("name", "jaro_winkler", 8.0)], con=con).clusters.to_pydict()
{'id': [1, 2, 3], 'cluster': [1, 1, 3]}
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pdbq.coref.layout import CorefInputError
from pdbq.coref.metrics import Scores, align_gold, b_cubed, pairwise
from pdbq.coref.model import (
    Blocking,
    Comparison,
    CorefModel,
    candidate_pairs,
    PairFeatures,
    default_comparisons,
    load_records,
    pair_features,
)
from pdbq.coref.autoblock import BlockingChoice
from pdbq.coref.estimate import EmSettings
from pdbq.coref.levels import FieldSpec
from pdbq.coref.pair_model import PairModel, PairScores
from pdbq.arrow_arrays import arrow_array
from pdbq.files import atomic_path
from pdbq.progress import expect_compiles, watch_compiles
from pdbq.inference.coreference.resolve import CorefConfig, group_clash, resolve_map
from pdbq.linkage.labels import Labels, read_labels
from pdbq.linkage.pairs import bound_prior, estimate_and_score
from pdbq.linkage.posterior import POSTERIOR_CONFIG, match_probabilities, overconfidence_warning
from pdbq.linkage.sources import (cross_source, cross_source_prior, duplicate_free, exclusive_prior, source_count,
                                  source_groups)
from pdbq.linkage.stored import check_can_store, connection_of, store_model, stored_model

__all__ = ["dedupe", "DedupeResult", "DEFAULT_CONFIG", "POSTERIOR_CONFIG", "evaluate"]

DEFAULT_CONFIG = CorefConfig(sweeps=20, temperature=0.5, chains=1, p_split_merge=0.2, init="components", init_threshold=2.0)
# the estimated model's pair scores are posterior log-odds: start from the pairs above p = 0.5
_FS_CONFIG = replace(DEFAULT_CONFIG, init_threshold=0.0)


@dataclass(frozen=True, eq=False)
class DedupeResult:
    """`clusters`: Arrow table (id, cluster). `diagnostics`: counts and seconds per phase.
    With the estimated model (the default): `pair_model` (fitted, frozen), `scores` (every
    candidate pair's levels, per-field contributions and match weight, in bits; dense record
    indices: `ids[scores.a]`), `blocking` (chosen rules and estimated recall; None when keys
    were given) and `ids` (dense index → id). With explicit linear `comparisons`: `model` and
    `features` (the candidate pairs' similarities).
    With `probabilities=`: `pairs` (id_l, id_r, match_probability, se) for every candidate pair
    and `cluster_confidence` (cluster, size, probability, se), least certain first
    (`pdbq.linkage.posterior`). `explain()`: per pair and field, level and contribution."""

    clusters: pa.Table
    model: CorefModel | None
    diagnostics: dict
    warnings: tuple[str, ...]
    pair_model: PairModel | None = None
    scores: PairScores | None = None
    blocking: BlockingChoice | None = None
    ids: np.ndarray | None = None
    pairs: pa.Table | None = None
    cluster_confidence: pa.Table | None = None
    features: PairFeatures | None = None

    def __repr__(self) -> str:
        """A summary, one line each: records, pairs and clusters; the model; blocking; warnings
        (the tables and arrays are attributes: ``res.clusters``, ``res.pair_model.table()``, ...)."""
        d = self.diagnostics
        sizes = pc.value_counts(self.clusters.column("cluster")).field("counts") if self.clusters.num_rows else None
        largest = pc.max(sizes).as_py() if sizes is not None else 0
        lines = [f"DedupeResult: {d.get('records', self.clusters.num_rows)} records, "
                 f"{d.get('candidate_pairs', '?')} candidate pairs, {d.get('clusters', '?')} clusters "
                 f"(largest {largest})"]
        if self.pair_model is not None:
            pm = self.pair_model
            how = "from labels" if pm.source == "labels" else "estimated without labels"
            fields = ", ".join(f"{f.field} ({f.levels.kind})" for f in pm.fields)
            lines.append(f"  pair model: {how}, prior {pm.prior:.3g}; fields {fields}")
        elif self.model is not None:
            fields = ", ".join(f"{c.field} ({c.method})" for c in self.model.comparisons)
            lines.append(f"  linear model: bias {self.model.bias:g}; comparisons {fields}")
        if self.blocking is not None:
            b = self.blocking
            recall = "recall not estimated" if not math.isfinite(b.recall) else b.recall_text()
            lines.append(f"  blocking: {len(b.rules)} rule{'' if len(b.rules) == 1 else 's'}, {recall}")
        if self.pairs is not None:
            lines.append(f"  posterior: {self.pairs.num_rows} pair probabilities, "
                         f"{0 if self.cluster_confidence is None else self.cluster_confidence.num_rows} cluster confidences")
        lines.append(f"  warnings: {len(self.warnings)}" + (f" (first: {self.warnings[0]})" if self.warnings else ""))
        return "\n".join(lines)

    __str__ = __repr__

    def explain(self, id_l=None, id_r=None) -> pa.Table:
        """Per pair and field, the comparison level and its contribution to the match weight
        (`pdbq.linkage.explain.explain_pairs`): every candidate pair, or the pairs given."""
        from pdbq.linkage.explain import explain_pairs, terms_estimated, terms_linear  # noqa: PLC0415

        terms = terms_estimated(self.pair_model, self.scores) if self.scores is not None else \
            terms_linear(self.model, self.features)
        return explain_pairs(self.ids, terms, id_l=id_l, id_r=id_r)


def _default_blocking(records, comparisons) -> tuple[Blocking, ...]:
    out = []
    for c in comparisons:
        t = records.columns[c.field].upper()
        name = '"' + c.field.replace('"', '""') + '"'
        if t.startswith("VARCHAR") or t in ("TEXT", "STRING"):
            out.append(Blocking(
                f"list_filter(string_split(regexp_replace(lower({name}), '[^a-z0-9 ]', ' ', 'g'), ' '), x -> length(x) >= 4)",
                200,
            ))
        else:
            out.append(Blocking(name, 200))
    return tuple(dict.fromkeys(out))


def _announcing_compiles(fn):
    """A Python call's first use on a machine says so before the kernels' compilation (a
    `pdbq.CompileNotice` warning); inside the ``pdbq dedupe`` command the command's own watch
    (its progress bar) is the one that speaks."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        with watch_compiles():
            # about 12 CPU s on a 2-core machine (docs/benchmarks.md, "Cold start")
            expect_compiles("pdbq's entity resolution kernels", 12.0)
            return fn(*args, **kwargs)

    return call


@_announcing_compiles
def dedupe(
    source,
    *,
    id: str,
    fields: list[str] | None = None,
    comparisons: list[Comparison] | None = None,
    compare: list[FieldSpec] | None = None,
    blocking: list[Blocking | str] | None = None,
    bias: float = 0.0,
    max_pairs: int = 20_000_000,
    nulls: str = "ignore",
    config: CorefConfig | None = None,
    output: str | Path | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
    model: PairModel | str | None = None,
    model_name: str | None = None,
    em: EmSettings = EmSettings(),
    train=None,
    probabilities: bool | CorefConfig = False,
    link_only: str | None = None,
    one_to_one: bool | None = None,
) -> DedupeResult:
    """Cluster the records of `source` (module docstring).

    fields: columns to compare. By default each field's comparison levels are chosen from its
        values and the match model (m, u, prior) is estimated from the records without labels
        (`pdbq.coref.pair_model`); blocking is chosen automatically under `max_pairs`.
    compare: `FieldSpec`s overriding the kind / thresholds of some fields.
    model: a fitted `PairModel` to score with instead of estimating one, or the name of one
        stored in the database `con` ("name": latest version, "name@2"), scored as stored
        (`pdbq.linkage.stored`); `fields` may be omitted, else must be the model's.
    model_name: store the fitted model in the database `con` (writable: checked before any work)
        as a new version of this name once the clustering succeeded, unless EM did not converge
        (a warning); `diagnostics["stored_model"]` gives name and version.
    em: settings of the estimation (`pdbq.coref.estimate.EmSettings`).
    train: labels to fit m and u from instead of EM (`pdbq.linkage.labels`: a file or table of
        (id, entity) clusters or of matching id pairs). Half of the labelled entities are held
        out first: the model fitted on the other half clusters the records and
        `diagnostics["holdout"]` scores it on the held-out records; then the model is refitted on
        all labels for the result.
    comparisons: explicit linear comparisons (`Comparison`): the hand-weighted model
        score = Σ weight·(sim − center) − bias instead of the estimated one.
    blocking: keys (`Blocking` or DuckDB expressions); default per field (module docstring).
    nulls: "ignore" (a NULL compares as no evidence; the result carries a warning counting them)
        or "error" (a `CorefInputError` naming the column).
    output: a .csv or .parquet path the (id, cluster) table is written to.
    probabilities: True (or the sampler's `CorefConfig`, default `POSTERIOR_CONFIG`): also sample
        the clustering posterior for `pairs` and `cluster_confidence` (`pdbq.linkage.posterior`).
    link_only: a column naming each record's source: only pairs across sources are compared;
        `one_to_one`: and no cluster holds two records of one source (`pdbq.link` sets both);
        None (default): decided from the data with the estimated model
        (`pdbq.linkage.sources.duplicate_free`; `diagnostics["one_to_one"]` says what was found).
    """
    _check_options(nulls, probabilities, one_to_one, link_only)
    con = connection_of(con)
    stored, model, fields = _stored_model_args(con, model, model_name, fields, comparisons, compare)
    _check_fields(fields, comparisons)
    own = con is None
    con = duckdb.connect() if own else con
    t0 = time.perf_counter()
    warnings: list[str] = []
    # library code does not draw on the terminal: DuckDB's progress bar is off for the call
    bar = con.execute("SELECT current_setting('enable_progress_bar')").fetchall()[0][0]
    con.execute("SET enable_progress_bar = false")
    try:
        wanted = [c.field for c in comparisons] if comparisons else list(fields)
        records = load_records(con, source, id, list(dict.fromkeys(wanted)))
        if link_only is not None and link_only not in records.columns:
            from pdbq.errors import suggest  # noqa: PLC0415

            raise CorefInputError(f"link_only names {link_only!r}, which is not a column of the records."
                                  f"{suggest(link_only, records.columns)}")
        for f, k in records.null_counts.items():
            if k and nulls == "error":
                raise CorefInputError(f"field {f!r} has {k} NULL value(s) (nulls='error')")
            if k:
                warnings.append(f"field {f!r} has {k} NULL value(s), compared as no evidence")
        t1 = time.perf_counter()
        pair_model = scores = choice = None
        extra: dict = {}
        blocks = tuple(b if isinstance(b, Blocking) else Blocking(str(b)) for b in blocking) if blocking else None
        if comparisons is None:
            specs = {s.field: s for s in (compare or [])}
            unknown = sorted(set(specs) - set(fields))
            if unknown:
                raise CorefInputError(f"compare names field {unknown[0]!r}, which is not in fields={list(fields)}")
            run_config = config if config is not None else _FS_CONFIG
            labels = None
            if train is not None:
                if model is not None:
                    raise CorefInputError("give either a fitted model or training labels, not both")
                labels = read_labels(con, train, records.ids, id, "train")
                holdout = _holdout(con, records, list(fields), specs, blocks, max_pairs, em, labels, run_config)
                if holdout is not None:
                    extra["holdout"] = holdout
            stage = estimate_and_score(con, records, list(fields), specs=specs, blocking=blocks, max_pairs=max_pairs,
                                       settings=em, model=model, labels=labels, refine=stored.get("used_model") is None,
                                       link_only=link_only is not None)
            warnings.extend(stage.warnings)
            pair_model, scores, choice, n_pairs = stage.model, stage.scores, stage.blocking, stage.candidate_pairs
            if link_only is not None and one_to_one is None:
                one_to_one = _detect_one_to_one(con, link_only, pair_model, stored, extra)
            if link_only is not None:
                pair_model, scores, n_pairs = _cross_pairs(con, link_only, pair_model, scores, choice,
                                                           stored.get("used_model") is None, warnings, one_to_one)
                if choice is not None:  # the matches expected are those across the sources
                    choice = BlockingChoice(choice.rules, choice.pairs_bound, choice.recall,
                                            _expected_cross_matches(pair_model, scores) / max(choice.recall, 1e-9))
            lin = feats = None
            graph = scores.graph(records.n)
        else:
            lin, feats, n_pairs, graph = _linear_stage(con, records, comparisons, blocks, bias, max_pairs, link_only)
            run_config = config if config is not None else DEFAULT_CONFIG
        t2 = time.perf_counter()
        res, group = _resolve(con, graph, run_config, link_only if one_to_one else None, records.ids, warnings)
        cluster = records.ids[res.labels]
        extra.update(_store(con, stored, pair_model, records.n, n_pairs, warnings))
        # built from the arrays' buffers: pyarrow.array would import pandas (35 MiB) for them
        table = pa.table({"id": arrow_array(records.ids), "cluster": arrow_array(cluster)})
        pairs, confidence, post_diag = _outputs(table, id, output, graph, scores if scores is not None else feats,
                                                records.ids, res.labels, probabilities, warnings, group)
        diag = {
            "records": records.n,
            "candidate_pairs": n_pairs,
            "clusters": int(np.unique(res.labels).size),
            "factor_evaluations": res.factor_evaluations,
            "proposals": res.proposals,
            "accepted": res.accepted,
            "log_score": res.log_score,
            "seconds_load": t1 - t0,
            "seconds_pairs": t2 - t1,  # with the estimated model: sniffing, estimation, blocking, scoring
            "seconds_map": res.seconds,
            "seconds": time.perf_counter() - t0,
            "bytes_graph": graph.nbytes(),
            **extra,
        }
        if pairs is not None:
            diag.update(post_diag)
        return DedupeResult(table, lin, diag, tuple(warnings), pair_model, scores, choice, records.ids, pairs,
                            confidence, feats)
    finally:
        if own:
            con.close()
        else:
            con.execute(f"SET enable_progress_bar = {'true' if bar else 'false'}")


def _linear_stage(con, records, comparisons, blocks, bias, max_pairs, link_only):
    """The hand-weighted model's stage: (its `CorefModel`, the pair features, the candidate pairs,
    the factor graph); ``method="auto"`` comparisons get the method sniffed from the values."""
    auto = [c for c in comparisons if c.method == "auto"]
    resolved = {c.field: c for c in default_comparisons(con, records, [c.field for c in auto])} if auto else {}
    comps = tuple(replace(c, method=resolved[c.field].method) if c.method == "auto" else c for c in comparisons)
    lin = CorefModel(comps, blocks or _default_blocking(records, comps), bias=bias, max_pairs=max_pairs)
    n_pairs = candidate_pairs(con, records, lin)
    feats = pair_features(con, records, lin)
    if link_only is not None:
        feats = cross_source(con, link_only, feats)
        n_pairs = int(feats.a.size)
    return lin, feats, n_pairs, feats.graph(records.n, lin.scores(feats.x))


def _outputs(table, id, output, graph, candidates, ids, labels, probabilities, warnings, group):
    """The output stage: the (id, cluster) table written to ``output`` when given, then the
    clustering posterior when ``probabilities`` asks for it: (pairs, confidence, diagnostics),
    (None, None, None) without."""
    if output is not None:
        _write(id_named(table, id), Path(output))
    if probabilities is False:
        return None, None, None
    return _posterior(graph, candidates, ids, labels, probabilities, warnings, group)


def _check_options(nulls, probabilities, one_to_one, link_only) -> None:
    if nulls not in ("ignore", "error"):
        raise CorefInputError(f"nulls must be 'ignore' or 'error', got {nulls!r}")
    if not isinstance(probabilities, (bool, CorefConfig)):
        raise CorefInputError(f"probabilities must be True, False or a CorefConfig, got {probabilities!r}")
    if one_to_one and link_only is None:
        raise CorefInputError("one_to_one needs link_only: it is a constraint between the records of two sources")


def _check_fields(fields, comparisons) -> None:
    if comparisons is not None:
        return
    if not fields:
        raise CorefInputError("give the fields to compare (fields=[...]) or explicit comparisons")
    twice = next((f for i, f in enumerate(fields) if f in fields[:i]), None)
    if twice is not None:  # its evidence would be counted twice
        raise CorefInputError(f"field {twice!r} is listed twice in fields={list(fields)}")


def _expected_cross_matches(pair_model, scores) -> float:
    """Σ P(match) over the cross-source candidates under the cross-source prior (a one-to-one
    link's matching prior weighs competing pairs for the clustering, not as independent pairs)."""
    lam = pair_model.diagnostics.get("prior_cross_pairs", pair_model.prior)
    bits = scores.match_weight - scores.prior_bits + np.log2(lam / (1.0 - lam))
    return float((1.0 / (1.0 + np.exp2(-bits))).sum())


def _detect_one_to_one(con, column, pair_model, stored, extra) -> bool:
    """Whether a link_only run whose caller did not say is one-to-one: each source detected free
    of duplicates (`duplicate_free`), on the records as estimated (not with a stored model:
    it links as it did when stored, without the constraint unless asked)."""
    if stored.get("used_model") is not None:
        return False
    if source_count(con, column) != 2:
        return False  # the constraint is between two sources' records: more (or one) is not detected
    verdict, evidence = duplicate_free(con, column, pair_model)
    extra["one_to_one"] = {"detected": verdict, "evidence": evidence}
    return verdict


def _cross_pairs(con, column, pair_model, scores, choice, refine: bool, warnings, one_to_one: bool = False):
    """link_only: (model, the cross-source candidate pairs' scores, their count), the prior
    re-estimated over the cross-source pairs when the model's prior is refined at all (not a
    stored model re-used as stored: `pdbq.linkage.sources.cross_source_prior`)."""
    scores = cross_source(con, column, scores)
    if refine and pair_model.source in ("em", "labels-pairs"):
        pair_model, scores, w = cross_source_prior(con, column, pair_model, scores,
                                                   choice.recall if choice is not None else None)
        warnings.extend(w)
        if pair_model.source == "em":
            sizes = np.bincount(source_groups(con, column))
            pair_model, scores, w = bound_prior(pair_model, scores, int(sizes.sum()), int(sizes[0]) * int(sizes[-1]),
                                                "a record of one source and one of the other")
            warnings.extend(w)
        if one_to_one:
            pair_model, scores = _exclusive(con, column, pair_model, scores)
    return pair_model, scores, int(scores.a.size)


def _exclusive(con, column, pair_model, scores):
    """A one-to-one link's prior (`pdbq.linkage.sources.exclusive_prior`): the model and the
    scores moved to it; the cross-source prior stays in `diagnostics["prior_cross_pairs"]`."""
    group = source_groups(con, column)
    sizes = np.bincount(group, minlength=2)
    bits, k = exclusive_prior(scores, group.size, int(sizes[0]), int(sizes[1]))
    lam = 1.0 / (1.0 + 2.0 ** -bits)
    if not 0.0 < lam < 1.0 or bits <= scores.prior_bits:
        return pair_model, scores
    diag = dict(pair_model.diagnostics, prior_cross_pairs=pair_model.prior, mutual_best_matches=k)
    model = replace(pair_model, prior=lam, diagnostics=diag)
    shift = model.prior_bits - scores.prior_bits
    return model, PairScores(scores.a, scores.b, scores.levels, scores.contributions, scores.match_weight + shift,
                             model.prior_bits)


def _resolve(con, graph, config, source, ids, warnings):
    """(MAP clustering, cannot-link groups): with `source` (the source column of a one-to-one
    link; None: no constraint) no cluster holds two records of one source, checked."""
    group = source_groups(con, source) if source is not None else None
    res = resolve_map(graph, config, cannot_link=group)
    warnings.extend(res.warnings)
    clash = group_clash(res.labels, group)
    if clash is not None:  # the moves never make one: a broken invariant is said, not hidden
        warnings.append(f"one_to_one violated: records {ids[clash[0]]!r} and {ids[clash[1]]!r} of one source "
                        "share a cluster")
    return res, group


def _stored_model_args(con, model, model_name, fields, comparisons, compare):
    """Check `model=` (a stored model's name) and `model_name=` before any work: (what to record:
    {"used_model": {"name", "version"}} for a stored model, {"stored_name"} when storing; the
    model to score with; the fields, the stored model's when none were given)."""
    out: dict = {}
    if model_name is not None:
        if comparisons is not None:
            raise CorefInputError("model_name stores the estimated pair model; explicit comparisons have none to store")
        out["stored_name"] = check_can_store(con, model_name, own=con is None)
    if isinstance(model, str):
        if comparisons is not None or compare:
            raise CorefInputError(f"model={model!r} scores with the stored model's comparisons: "
                                  "leave out comparisons= and compare=")
        model, name, version = stored_model(con, model, fields)
        out["used_model"] = {"name": name, "version": version}
        fields = list(fields) if fields else [f.field for f in model.fields if not f.levels.derived]
    return out, model, fields


def _store(con, stored: dict, pair_model, n_records: int, n_pairs: int, warnings: list[str]) -> dict:
    """After a successful clustering: store the fitted model when asked (not an unconverged fit:
    the previous version stays the latest); the diagnostics to add."""
    out = {k: v for k, v in stored.items() if k == "used_model"}
    name = stored.get("stored_name")
    if name is None:
        return out
    if pair_model.diagnostics.get("converged") is False:
        warnings.append(f"EM did not converge: pair model {name!r} was not stored")
        return out
    version = store_model(con, name, pair_model, records=n_records, candidate_pairs=n_pairs)
    return {**out, "stored_model": {"name": name, "version": version}}


def _holdout(con, records, fields, specs, blocks, max_pairs, em, labels: Labels, config) -> dict | None:
    """Fit on half the labelled entities, cluster, score on the other half's records."""
    ents = np.unique(labels.entity)
    rng = np.random.default_rng(em.seed)
    train_half = rng.random(ents.size) < 0.5
    in_a = train_half[np.searchsorted(ents, labels.entity)]
    a = Labels(labels.index[in_a], labels.entity[in_a], labels.shape)
    b_idx, b_ent = labels.index[~in_a], labels.entity[~in_a]
    if b_idx.size < 2 or np.unique(a.entity).size == a.entity.size:
        return None
    stage = estimate_and_score(con, records, fields, specs=specs, blocking=blocks, max_pairs=max_pairs, settings=em,
                               labels=a)
    res = resolve_map(stage.scores.graph(records.n), config)
    pred = res.labels[b_idx]
    b3, pw = b_cubed(pred, b_ent), pairwise(pred, b_ent)
    return {"records": int(b_idx.size), "b3_precision": b3.precision, "b3_recall": b3.recall, "b3_f1": b3.f1,
            "pairwise_precision": pw.precision, "pairwise_recall": pw.recall, "pairwise_f1": pw.f1}


def _posterior(graph, candidates, ids, labels, probabilities, warnings, group=None):
    """(pairs, cluster_confidence, diagnostics) of `probabilities=` (`pdbq.linkage.posterior`);
    `candidates`: the scored pairs (`PairScores` or `PairFeatures`)."""
    cfg = probabilities if isinstance(probabilities, CorefConfig) else POSTERIOR_CONFIG
    pairs, confidence, post = match_probabilities(graph, candidates.a, candidates.b, ids, labels, cfg, group)
    warnings.extend(post.warnings)
    if getattr(candidates, "match_probability", None) is not None:  # the estimated model's: log-odds
        note = overconfidence_warning(post.pair_prob, candidates.match_probability)
        warnings.extend([note] if note else [])
    return pairs, confidence, {"seconds_posterior": post.seconds, "posterior_samples": post.samples,
                               "posterior_proposals": post.proposals, "posterior_accepted": post.accepted}


def id_named(clusters: pa.Table, id: str, right_id: str | None = None) -> pa.Table:
    """The (id, cluster) table as written out: its id column named as the records' own id column
    (``person_id``), unless that name is ``cluster`` or ``source``. A link's (source, id, cluster)
    keeps ``id`` only where its two sources name their id columns differently (``right_id``)."""
    names = clusters.column_names
    if id.lower() in ("cluster", "source"):
        return clusters
    if names == ["id", "cluster"]:
        return clusters.rename_columns([id, "cluster"])
    if names == ["source", "id", "cluster"] and (right_id is None or right_id == id):
        return clusters.rename_columns(["source", id, "cluster"])
    return clusters


def _write(table: pa.Table, path: Path) -> None:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        import pyarrow.csv as pacsv

        with atomic_path(path, "output") as tmp:
            pacsv.write_csv(table, str(tmp))
    elif suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        with atomic_path(path, "output") as tmp:
            pq.write_table(table, str(tmp))
    else:
        raise CorefInputError(f"output must end in .csv or .parquet, got {path.name!r}")


def evaluate(clusters: pa.Table, gold_ids, gold_entity) -> tuple[Scores, Scores]:
    """(B³, pairwise) scores of a dedupe result against a gold table (id, entity); a gold id
    that is not a record id, or a record without a gold entity, is a `CorefInputError`."""
    ids = np.asarray(clusters.column("id").to_numpy(zero_copy_only=False))
    ent = align_gold(ids, np.asarray(gold_ids), np.asarray(gold_entity))
    pred = np.asarray(clusters.column("cluster").to_numpy(zero_copy_only=False))
    return b_cubed(pred, ent), pairwise(pred, ent)
