"""The estimated pair model for the front door: sniff the fields, fit m/u/λ (or read them from
labels), choose blocking, score the candidate pairs.

`estimate_and_score(con, records, fields, ...)` returns a `PairStage`: the fitted
`pdbq.coref.pair_model.PairModel` (prior refined over the chosen candidates), the scored
candidate pairs (`PairScores`: levels, contributions and match weights in bits), the blocking
choice with its recall estimate (None when the caller gave blocking keys), and warnings.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pdbq.coref.autoblock import BlockingChoice, build_candidates, choose_blocking
from pdbq.coref.comoving import fit_with_groups
from pdbq.coref.dependence import exact_interactions
from pdbq.coref.estimate import EmSettings, fit_from_labels, prior_floor, refine_prior, uncomparable
from pdbq.coref.levels import FieldSpec, prepare_values, sniff_fields
from pdbq.coref.model import MENTION, PAIRS, RECORDS, Blocking, CorefModel, Records, candidate_pairs
from pdbq.coref.pair_model import PairModel, PairScores, score_pairs

__all__ = ["PairStage", "bound_prior", "estimate_and_score"]

# fewer pairs above p = 0.5 than one per this many records (and than one) is "almost no matches"
_FEW_MATCHES_PER = 1_000


def _rescored(scores: PairScores, model: PairModel) -> PairScores:
    return PairScores(scores.a, scores.b, scores.levels, scores.contributions,
                      scores.match_weight - scores.prior_bits + model.prior_bits, model.prior_bits)


def bound_prior(model: PairModel, scores: PairScores, n: int, total_pairs: int,
                what: str = "two records") -> tuple[PairModel, PairScores, list[str]]:
    """The estimated prior checked against the data (`pdbq.coref.estimate.prior_floor`): below the
    bound the mutual best matches set, it is raised to it with a warning (EM collapsed toward no
    match); then a warning when the model still finds almost no match or the prior is degenerate
    (at the limits EM clamps to). Returns (model, scores moved to its prior, warnings)."""
    warnings: list[str] = []
    low, k = prior_floor(scores.a, scores.b, scores.match_weight - scores.prior_bits, n, total_pairs)
    if low > model.prior:
        warnings.append(f"the fitted match prior {model.prior:.3g} is below what the data show: {k} pair(s) are mutual "
                        f"best matches with evidence enough to match at prior {low:.3g}, so the prior is raised to that "
                        "bound; EM collapsed toward no match: check the model (pair_model.table()) or give labels")
        diag = dict(model.diagnostics, prior_fitted=model.prior, prior_floor_pairs=k)
        model = replace(model, prior=low, diagnostics=diag)
        scores = _rescored(scores, model)
    confident = int((scores.match_weight > 0).sum())
    if confident < max(1.0, n / _FEW_MATCHES_PER):
        warnings.append(f"the fitted model finds almost no match: {confident} candidate pair(s) above match probability "
                        f"0.5 among {n:,} records (prior P({what} match) = {model.prior:.3g}); the records may hold no "
                        "duplicates, or the estimate failed: check pair_model.table() or give labels")
    if model.prior <= 1e-11 or model.prior >= 0.5:
        warnings.append(f"the match prior is degenerate ({model.prior:.3g}, at the limit of the estimate): it says "
                        "nothing about how many matches there are; check the model or give labels")
    return model, scores, warnings


@dataclass(frozen=True, eq=False)
class PairStage:
    model: PairModel
    scores: PairScores
    blocking: BlockingChoice | None
    candidate_pairs: int
    warnings: tuple[str, ...]


def estimate_and_score(con, records: Records, fields: list[str], *, specs: dict[str, FieldSpec] | None = None,
                       blocking: tuple[Blocking, ...] | None = None, max_pairs: int = 20_000_000,
                       settings: EmSettings = EmSettings(), model: PairModel | None = None,
                       labels=None, refine: bool = True, link_only: bool = False) -> PairStage:
    """Fit (unless `model` is given; from `labels`, a `pdbq.linkage.labels.Labels`, when given)
    and score (module docstring). `refine=False` keeps the model's prior as it is (a stored
    model re-used: scored exactly as stored). `link_only`: the caller re-estimates the prior over
    the cross-source pairs and checks it there (`bound_prior`), not over all pairs."""
    warnings: list[str] = []
    if model is None:
        fls = sniff_fields(con, RECORDS, records.columns, fields, specs)
    else:
        fls = tuple(f.levels for f in model.fields)
        missing = [c for f in fls for c in (f.sources or (f.field,)) if c not in records.columns]
        if missing:
            from pdbq.coref.layout import CorefInputError

            raise CorefInputError(f"the pair model compares field {missing[0]!r}, which is not a column of the records")
    prepare_values(con, RECORDS, MENTION, records.columns, fls)
    fitted = model is None
    # a field pdbq derived (model codes read out of a text column) that fewer than two records
    # have carries no evidence: left out; a field the caller named is judged in the fit (an error)
    empty = [k for k in uncomparable(con, fls) if fls[k].field not in fields] if fitted else []
    if empty:
        fls = tuple(f for k, f in enumerate(fls) if k not in empty)
        prepare_values(con, RECORDS, MENTION, records.columns, fls)
    if model is None and labels is not None:
        model = fit_from_labels(con, fls, records.n, labels.index, labels.entity, labels.shape, settings)
    elif model is None:
        model, w = fit_with_groups(con, fls, records.n, settings)
        warnings.extend(w)
    if fitted:
        model = replace(model, interactions=exact_interactions(con, model, settings))
    choice = None
    if blocking:
        n_pairs = candidate_pairs(con, records, CorefModel((), tuple(blocking), max_pairs=max_pairs))
        recall = None
    else:
        # a stored model's prior was refined over the candidates its blocking chose with the
        # training rules' prior: block with that one again, so the same data gets the same pairs
        base = model.diagnostics.get("prior_training_rules") if not refine else None
        choice = choose_blocking(con, model if base is None else model.with_prior(base), records.n, max_pairs)
        n_pairs = build_candidates(con, model, choice.rules)
        recall = choice.recall
    scores = score_pairs(con, model, PAIRS)
    if refine and model.source in ("em", "labels-pairs"):
        total = records.n * (records.n - 1) // 2
        lam, ok = refine_prior(scores.match_weight - scores.prior_bits, total, recall if recall is not None else 1.0,
                               model.prior)
        if not ok:
            warnings.append("the match prior did not converge over the candidate pairs; the training rules' estimate is kept")
        else:
            diag = dict(model.diagnostics, prior_training_rules=model.prior)
            model = replace(model, prior=lam, diagnostics=diag)
            scores = PairScores(scores.a, scores.b, scores.levels, scores.contributions,
                                scores.match_weight - scores.prior_bits + model.prior_bits, model.prior_bits)
        if model.source == "em" and not link_only:
            model, scores, w = bound_prior(model, scores, records.n, total)
            warnings.extend(w)
        if choice is not None:
            choice = BlockingChoice(choice.rules, choice.pairs_bound, choice.recall, model.prior * total)
    return PairStage(model, scores, choice, n_pairs, tuple(warnings))
