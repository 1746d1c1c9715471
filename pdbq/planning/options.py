"""Typed options of a probabilistic query: ``USING method WITH (name = value, ...)``.

Every option has a type, a range and a default; unknown names and wrong types raise
`OptionError` naming the option and listing the valid ones.

>>> opts = QueryOptions.from_pairs((("seed", 7), ("tolerance", 0.01)))
>>> (opts.seed, opts.tolerance, opts.chains)
(7, 0.01, 4)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pdbq.errors import OptionError, suggest
from pdbq.inference.exact.auto import DEFAULT_EXACT_BUDGET
from pdbq.inference.mcmc.config import MAX_CHAIN_COPIES, check_maximum
from pdbq.option_values import MAX_COUNT, number, shown, whole

__all__ = ["QueryOptions", "OPTION_HELP", "SELECTIONS", "EXTERNAL_OPTIONS"]

SELECTIONS = ("trail", "uniform", "query_only", "distance", "tv", "mi")

# Options whose value reaches outside this process, and how. SQL functions refuse to set them
# unless the Python caller allowed it (docs/udf.md): SQL stored in a database file (a view) runs
# for whoever queries it, and must not make them connect to an address the file's author chose.
EXTERNAL_OPTIONS = {"scheduler": "it connects to the Dask scheduler at that address"}


@dataclass(frozen=True)
class QueryOptions:
    """Options of one probabilistic query (all optional in SQL).

    ``steps`` counts single-variable updates per chain; ``sweeps`` counts them in units of the
    number of sampled variables (x_q ∪ x_l); ``burn_in`` is in the unit of whichever was given
    (sweeps by default). With an explicit ``steps``/``sweeps`` and no ``tolerance`` or
    ``time_limit`` a run does exactly that many updates; otherwise it stops at the first of:
    tolerance reached, time limit, the default budget.
    """

    steps: int | None = None
    sweeps: float | None = None
    burn_in: float | None = None
    chains: int = 4
    threads: int | None = None  # None: min(chains, cores)
    seed: int | None = None  # None: fresh entropy (the answer says which seed it used)
    time_limit: float | None = None
    tolerance: float | None = None
    selection: str = "trail"
    epsilon: float = 0.05
    power: float = 1.0
    max_table: int = 2**26
    exact_budget: float = DEFAULT_EXACT_BUDGET  # AUTO: exact whenever its estimated time is at most this (s)
    temperature: float = 2.0  # ANNEAL: start temperature
    cooling: float | None = None  # ANNEAL: geometric factor per sweep (None: reach 0.01 at the end)
    tempering: int = 1  # GIBBS/QAM: copies per chain for replica exchange (1: off)
    blocks: str | int = "off"  # GIBBS/QAM: exact block moves: 'off' | 'auto' | max variables per block
    block_table: int = 2**10  # GIBBS/QAM: largest clique table of a block (entries)
    clusters: bool = False  # GIBBS/QAM: Swendsen–Wang cluster moves over the equality couplings
    jumps: int = 0  # GIBBS/QAM: local modes kept for mode jumps (0: off)
    cutset: bool | int = False  # GIBBS/QAM: cutset sampling: False | True (size as needed) | max cutset variables
    cutset_table: int = 2**10  # GIBBS/QAM: largest clique table of the cutset's remainder (entries)
    workers: int | None = None  # GIBBS/QAM/AUTO: run the chains in this many groups on Dask workers
    scheduler: str | None = None  # GIBBS/QAM/AUTO: address of the Dask scheduler (None: an in-process cluster)

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, Any]], defaults: Mapping[str, Any] | None = None) -> "QueryOptions":
        """Build from ``WITH`` pairs (already lower-cased names), over ``defaults`` (e.g. --seed)."""
        values: dict[str, Any] = {}
        for name, value in list((defaults or {}).items()) + list(pairs):
            name = str(name).lower()
            if name not in _SPECS:
                valid = ", ".join(sorted(_SPECS))
                raise OptionError(f"unknown option '{name}'.{suggest(name, _SPECS)} Valid options: {valid}")
            values[name] = _coerce(name, value)
        if values.get("steps") is not None and values.get("sweeps") is not None:
            raise OptionError("give either 'steps' or 'sweeps', not both")
        copies = values.get("chains", cls.chains) * values.get("tempering", cls.tempering)
        if copies > MAX_CHAIN_COPIES:
            raise OptionError(f"chains × tempering is {copies:,}: at most {MAX_CHAIN_COPIES:,} chain copies are run "
                              "(each is a full state swept every cycle); lower 'chains' or 'tempering'")
        return cls(**values)

    def replace(self, **changes: Any) -> "QueryOptions":
        return dataclasses.replace(self, **{k: _coerce(k, v) for k, v in changes.items()})

    @property
    def fixed_length(self) -> bool:
        """True when the run length is exactly what the user asked for."""
        return (self.steps is not None or self.sweeps is not None) and self.tolerance is None and self.time_limit is None


# name -> (kind, lower bound, lower inclusive, help)
_SPECS: dict[str, tuple[str, float | None, bool, str]] = {
    "steps": ("int", 1, True, "single-variable updates per chain"),
    "sweeps": ("float", 0, False, "updates per chain in units of |x_q ∪ x_l|"),
    "burn_in": ("float", 0, True, "updates discarded first (unit of steps/sweeps)"),
    "chains": ("int", 1, True, "independent chains (default 4)"),
    "threads": ("int", 1, True, "threads running chains (default: min(chains, cores))"),
    "seed": ("int", 0, True, "random seed; same seed, same answer"),
    "time_limit": ("float", 0, False, "stop after this many seconds"),
    "tolerance": ("float", 0, False, "stop when every answer is within this (95% half-widths, jointly over the answers)"),
    "selection": ("choice", None, True, "trail | uniform | query_only | distance | tv | mi"),
    "epsilon": ("float", 0, True, "uniform share mixed into the selection distribution (≤ 1)"),
    "power": ("float", 0, False, "exponent N of selection = distance (distance^-N)"),
    "max_table": ("int", 1, True, "largest exact-inference table (entries)"),
    "exact_budget": ("float", 0, True, "AUTO: seconds of exact inference accepted (default 5)"),
    "temperature": ("float", 0, False, "ANNEAL start temperature"),
    "cooling": ("float", 0, False, "ANNEAL temperature factor per sweep (< 1)"),
    "tempering": ("int", 1, True, "GIBBS/QAM: tempered copies per chain, replica exchange (1: off)"),
    "blocks": ("blocks", None, True, "GIBBS/QAM: exact block moves: 'auto' | 'off' | max variables per block"),
    "block_table": ("int", 2, True, "GIBBS/QAM: largest clique table of a block move (entries)"),
    "clusters": ("bool", None, True, "GIBBS/QAM: Swendsen–Wang cluster moves over equality couplings (true | false)"),
    "jumps": ("int", 0, True, "GIBBS/QAM: mode jumps between this many local modes found in burn-in (0: off; else 2–64; needs tempering >= 2)"),
    "cutset": ("cutset", None, True, "GIBBS/QAM: sample a cutset, answer the rest exactly: true | false | max cutset variables"),
    "cutset_table": ("int", 2, True, "GIBBS/QAM: largest clique table of the cutset's exact remainder (entries)"),
    "workers": ("int", 1, True, "GIBBS/QAM/AUTO: run the chains on this many Dask workers (needs steps or sweeps)"),
    "scheduler": ("address", None, True, "GIBBS/QAM/AUTO: Dask scheduler address, e.g. 'tcp://host:8786'"),
}

OPTION_HELP = {name: spec[3] for name, spec in _SPECS.items()}


def _coerce(name: str, value: Any) -> Any:
    kind, low, inclusive, _ = _SPECS[name]
    if value is None:
        if name in ("chains", "selection", "epsilon", "power", "max_table", "exact_budget", "temperature", "tempering", "blocks",
                    "block_table", "clusters", "jumps", "cutset", "cutset_table"):
            raise OptionError(f"option '{name}' cannot be NULL")
        return None
    if kind == "bool":
        if isinstance(value, str) and value.lower() in ("true", "false", "on", "off"):
            return value.lower() in ("true", "on")
        if not isinstance(value, bool) and not (isinstance(value, int) and value in (0, 1)):
            raise OptionError(f"option '{name}' must be true or false, got {value!r}")
        return bool(value)
    if kind == "blocks":
        if isinstance(value, str) and value.lower() in ("auto", "off"):
            return value.lower()
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not value.is_integer()) or value < 2:
            raise OptionError(f"option 'blocks' must be 'auto', 'off' or a whole number of variables >= 2, got {value!r}")
        return int(value)
    if kind == "cutset":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "on", "false", "off"):
            return value.lower() in ("true", "on")
        if not isinstance(value, (int, float)) or (isinstance(value, float) and not value.is_integer()) or value < 1:
            raise OptionError(f"option 'cutset' must be true, false or a whole number of variables >= 1, got {value!r}")
        return int(value)
    if kind == "address":
        if not isinstance(value, str) or not value.strip():
            raise OptionError(f"option '{name}' must be an address such as 'tcp://host:8786', got {value!r}")
        return value.strip()
    if kind == "choice":
        if not isinstance(value, str) or value.lower() not in SELECTIONS:
            raise OptionError(
                f"option 'selection' must be one of {', '.join(SELECTIONS)}, got {value!r}."
                + (suggest(value, SELECTIONS) if isinstance(value, str) else "")
            )
        return value.lower()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise OptionError(f"option '{name}' takes a number, got {shown(value)}")
    if kind == "int":
        if isinstance(value, float) and not math.isfinite(value):
            raise OptionError(f"option '{name}' takes a whole number, got {shown(value)}")
        check_maximum(name, value)  # the option's own maximum, with its reason
        value = whole(name, value, low=-MAX_COUNT, high=MAX_COUNT)
    else:
        value = number(name, value)
    if low is not None and (value < low or (value == low and not inclusive)):
        bound = f">= {low:g}" if inclusive else f"> {low:g}"
        raise OptionError(f"option '{name}' must be {bound}, got {value!r}")
    if name == "epsilon" and value > 1:
        raise OptionError(f"option 'epsilon' must be at most 1, got {value!r}")
    if name == "cooling" and value >= 1:
        raise OptionError(f"option 'cooling' must be below 1, got {value!r}")
    return value
