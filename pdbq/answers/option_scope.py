"""Which query options act on which method: an option the user wrote that the chosen method
would ignore is an `OptionError`, never a setting silently dropped.

AUTO may answer exactly or by sampling, so it takes the options of both (and ``exact_budget``,
which only AUTO reads); ANNEAL reads its own temperature schedule and the chain settings.

>>> refuse_inert(Method.EXACT, frozenset({"max_table"}))
>>> refuse_inert(Method.EXACT, frozenset({"steps"}))
Traceback (most recent call last):
...
pdbq.errors.OptionError: option 'steps' has no effect with USING EXACT (it applies to GIBBS, QAM, AUTO, ANNEAL)
"""

from __future__ import annotations

from pdbq.errors import OptionError
from pdbq.language.nodes import Method

__all__ = ["refuse_inert", "SCOPE", "DASK_OPTIONS"]

DASK_OPTIONS = frozenset({"workers", "scheduler"})
_CHAINS = frozenset({"steps", "sweeps", "chains", "threads", "seed"})
_SAMPLING = _CHAINS | {"burn_in", "tolerance", "tempering", "blocks", "block_table", "clusters", "jumps", "cutset",
                       "cutset_table"} | DASK_OPTIONS
_SELECTION = frozenset({"selection", "epsilon", "power"})
_EVERY = frozenset({"time_limit"})  # bounds planning as well as inference

SCOPE: dict[Method, frozenset[str]] = {
    Method.EXACT: _EVERY | {"max_table"},
    # GIBBS accepts selection = 'uniform' (what it does anyway); another selection is refused by the engine
    Method.GIBBS: _EVERY | _SAMPLING | {"selection"},
    Method.QAM: _EVERY | _SAMPLING | _SELECTION,
    Method.AUTO: _EVERY | _SAMPLING | _SELECTION | {"max_table", "exact_budget"},
    Method.ANNEAL: _EVERY | _CHAINS | {"temperature", "cooling"},
}

_ORDER = (Method.GIBBS, Method.QAM, Method.AUTO, Method.ANNEAL, Method.EXACT)


def refuse_inert(method: Method, explicit: frozenset[str]) -> None:
    """`OptionError` naming the first option in ``explicit`` (the names the user wrote) that
    ``method`` does not read, and the methods that do."""
    allowed = SCOPE.get(method)
    if allowed is None:
        return
    for name in sorted(explicit - allowed):
        if method is Method.ANNEAL and name in DASK_OPTIONS:
            raise OptionError(f"option '{name}' has no effect with USING ANNEAL on this query: annealed MAP runs in "
                              "this process (Dask runs the chains of GIBBS, QAM and AUTO, and the MAP of a DOMAIN "
                              "CLUSTER relation)")
        users = [m.value for m in _ORDER if name in SCOPE[m]]
        if not users:
            continue  # not a query option at all: QueryOptions reports it
        raise OptionError(f"option '{name}' has no effect with USING {method.value} (it applies to {', '.join(users)})")
