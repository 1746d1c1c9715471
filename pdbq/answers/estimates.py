"""Estimates as Arrow columns: one table per estimate alias (``__pdbq_vid`` + ``__pdbq_est_<i>``).

Column types (docs/queries.md):

| call | type |
|---|---|
| ``PROB(v)``, ``PROB(v = value)`` | DOUBLE |
| ``STDERR(v)`` | DOUBLE: booleans, the standard error of P(true); otherwise the largest per-value one |
| ``STDERR(v = value)`` | DOUBLE: the standard error of ``PROB(v = value)`` |
| ``DIST(v)`` | MAP(value → DOUBLE), value BOOLEAN / VARCHAR (``DOMAIN ('a', ...)``) / INTEGER (CATEGORICAL) |
| ``MAP(v)`` | the value: BOOLEAN / VARCHAR / INTEGER |

>>> import numpy as np
>>> from pdbq.language.nodes import Domain, DomainKind
>>> d = Domain(DomainKind.VALUES, ("'a'", "'b'"), 2)
>>> value_array(d, np.array([1, 0])).to_pylist()
['b', 'a']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute for MAP's NULLs

from pdbq.errors import InferenceError
from pdbq.language.nodes import CreateVariable, Domain, DomainKind, Estimate, EstimateKind

__all__ = ["clean_stderr", "STDERR_FLOOR", "Marginals", "value_type", "value_array", "domain_labels", "estimate_column", "estimates_table", "check_estimate"]


@dataclass(frozen=True, eq=False)
class Marginals:
    """Answers for a set of variables (rows aligned with ``vids``).

    marginals/stderr: float64[n, max_card] (0 beyond a variable's cardinality); map_values:
    int64[n] internal values (joint MAP or the marginal's arg-max) or None when not computed.
    """

    vids: np.ndarray
    cardinality: np.ndarray
    marginals: np.ndarray
    stderr: np.ndarray
    map_values: np.ndarray | None


#: Standard errors below this are rounding noise of sums of probabilities (a deterministic or
#: exactly computed answer shows 8.99e-14 rather than 0): they are reported as 0.
STDERR_FLOOR = 1e-12


def clean_stderr(se: np.ndarray) -> np.ndarray:
    """``se`` with rounding noise (below `STDERR_FLOOR`) set to exactly 0; NaN stays NaN.

    >>> clean_stderr(np.array([8.99e-14, 0.02, np.nan])).tolist()
    [0.0, 0.02, nan]
    """
    se = np.asarray(se, dtype=np.float64)
    return np.where(np.abs(se) < STDERR_FLOOR, 0.0, se)


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'")
    return text


def value_type(domain: Domain) -> pa.DataType:
    if domain.kind is DomainKind.BOOLEAN:
        return pa.bool_()
    if domain.kind is DomainKind.VALUES:
        return pa.string()
    return pa.int32()


def domain_labels(domain: Domain, size: int) -> list:
    """The user-facing values of internal values ``0 .. size-1``."""
    if domain.kind is DomainKind.BOOLEAN:
        return [False, True][:size]
    if domain.kind is DomainKind.VALUES:
        return [_unquote(v) for v in domain.values[:size]]
    return list(range(size))


def value_array(domain: Domain, values: np.ndarray) -> pa.Array:
    """Internal values -> an Arrow array of domain values (typed by `value_type`)."""
    values = np.asarray(values, dtype=np.int64)
    if domain.kind is DomainKind.BOOLEAN:
        return pa.array(values.astype(bool), type=pa.bool_())
    if domain.kind is DomainKind.VALUES:
        labels = np.asarray(domain_labels(domain, domain.size), dtype=object)
        return pa.array(labels[values].tolist() if values.size else [], type=pa.string())
    return pa.array(values.astype(np.int32), type=pa.int32())


def check_estimate(est: Estimate, v: CreateVariable, call: str) -> int | None:
    """Validate an estimate against its relation's domain before any inference; returns the
    internal value of ``PROB(v = value)`` / ``STDERR(v = value)`` (None otherwise)."""
    from pdbq.grounding.variables import domain_index  # noqa: PLC0415 - keeps this module light

    if est.kind is EstimateKind.PROB:
        if est.value is None:
            if v.domain.kind is not DomainKind.BOOLEAN:
                raise InferenceError(
                    f"{call}: {v.name} is not boolean (domain {v.domain.kind.value}); "
                    f"use PROB({est.alias} = value) or DIST({est.alias})"
                )
            return 1
        try:
            return domain_index(v.domain, est.value, what=call)
        except Exception as e:  # GroundingError: re-raise as an inference request problem
            raise InferenceError(str(e)) from None
    if est.value is not None:
        if est.kind is not EstimateKind.STDERR:
            raise InferenceError(f"{call}: only PROB and STDERR take a value")
        try:  # STDERR(v = value): the standard error of PROB(v = value)
            return domain_index(v.domain, est.value, what=call)
        except Exception as e:  # GroundingError: re-raise as an inference request problem
            raise InferenceError(str(e)) from None
    return None


def estimate_column(est: Estimate, domain: Domain, m: Marginals, value: int | None) -> pa.Array:
    """One estimate's column for the variables of ``m``."""
    n = m.vids.shape[0]
    if est.kind is EstimateKind.PROB:
        col = m.marginals[:, value] if n and value < m.marginals.shape[1] else np.zeros(n)
        # NaN: no estimate (too few updates; a warning says so) -> SQL NULL, never a number
        return pa.array(np.asarray(col, dtype=np.float64), type=pa.float64(), from_pandas=True)
    if est.kind is EstimateKind.STDERR:
        if value is not None:
            se = m.stderr[:, value] if n and value < m.stderr.shape[1] else np.zeros(n)
        elif domain.kind is DomainKind.BOOLEAN:
            se = m.stderr[:, 1] if n else np.zeros(0)
        else:
            se = m.stderr.max(axis=1) if n and m.stderr.shape[1] else np.zeros(n)
        return pa.array(clean_stderr(se), type=pa.float64(), from_pandas=True)
    if est.kind is EstimateKind.MAP:
        if m.map_values is None:
            raise InferenceError("internal: MAP values were not computed")  # engine bug, not user input
        unknown = np.asarray(m.map_values) < 0  # -1: no estimate -> NULL
        values = value_array(domain, np.where(unknown, 0, m.map_values))
        return pa.compute.if_else(pa.array(unknown), pa.nulls(n, values.type), values) if unknown.any() else values
    # DIST: a MAP(value -> probability) per variable, values in domain order
    kmax = int(m.marginals.shape[1]) if n else 0
    labels = domain_labels(domain, max(kmax, domain.size if domain.kind is not DomainKind.CATEGORICAL else kmax))
    card = np.asarray(m.cardinality, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(card, out=offsets[1:])
    mask = np.arange(kmax)[None, :] < card[:, None] if n else np.zeros((0, 0), dtype=bool)
    keys = np.tile(np.arange(kmax), n)[mask.ravel()] if n else np.zeros(0, dtype=np.int64)
    items = m.marginals[mask] if n else np.zeros(0)
    key_arr = value_array(domain, keys) if domain.kind is not DomainKind.VALUES else pa.array(
        [labels[k] for k in keys.tolist()], type=pa.string()
    )
    return pa.MapArray.from_arrays(pa.array(offsets, type=pa.int32()), key_arr,
                                   pa.array(items, type=pa.float64(), from_pandas=True))


def estimates_table(
    estimates: Sequence[tuple[Estimate, int | None]], domain: Domain, m: Marginals, vid_column: str
) -> pa.Table:
    """``vid_column`` (int32) plus one ``Estimate.placeholder`` column per estimate."""
    cols = {vid_column: pa.array(np.asarray(m.vids, dtype=np.int32), type=pa.int32())}
    for est, value in estimates:
        cols[est.placeholder] = estimate_column(est, domain, m, value)
    return pa.table(cols)
