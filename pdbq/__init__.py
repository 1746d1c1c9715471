"""pdbq: a probabilistic database for Python on DuckDB.

``import pdbq`` loads only the error classes and the version: the rest (DuckDB, the engine and
its numba kernels, Arrow) is imported on first use of a name (``pdbq.connect``, ``pdbq.dedupe``,
...), so a command's ``--help`` and a script that only imports pdbq start in a fraction of a
second.
"""

from importlib import import_module
from typing import TYPE_CHECKING

from pdbq.errors import (
    CatalogError,
    CorefInputError,
    EvidenceError,
    GroundingError,
    InferenceError,
    LearningError,
    OptionError,
    ParseError,
    PdbqError,
    SchemaVersionError,
    TimeLimitError,
)
from pdbq.version import __version__

# public name -> the module that defines it, imported when the name is first used
_LAZY = {
    "Database": "pdbq.api",
    "Result": "pdbq.api",
    "analyze": "pdbq.api",
    "infer": "pdbq.api",
    "joint": "pdbq.api",
    "probability": "pdbq.api",
    "connect": "pdbq.udf",
    "register": "pdbq.udf",
    "unregister": "pdbq.udf",
    "Blocking": "pdbq.coref.model",
    "Comparison": "pdbq.coref.model",
    "FieldSpec": "pdbq.coref.levels",
    "PairModel": "pdbq.coref.pair_model",
    "PairScores": "pdbq.coref.pair_model",
    "DedupeResult": "pdbq.linkage",
    "dedupe": "pdbq.linkage",
    "link": "pdbq.linkage.link",
    "CompileNotice": "pdbq.progress",
}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from pdbq.api import Database, Result, analyze, infer, joint, probability
    from pdbq.coref.levels import FieldSpec
    from pdbq.coref.model import Blocking, Comparison
    from pdbq.coref.pair_model import PairModel, PairScores
    from pdbq.linkage import DedupeResult, dedupe
    from pdbq.linkage.link import link
    from pdbq.progress import CompileNotice
    from pdbq.udf import connect, register, unregister


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        if not name.startswith("_"):  # a subpackage used as an attribute (``pdbq.coref.metrics``)
            try:
                return import_module(f"pdbq.{name}")
            except ModuleNotFoundError as e:
                if e.name != f"pdbq.{name}":
                    raise
        raise AttributeError(f"module 'pdbq' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later uses skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "connect",
    "Database",
    "Result",
    "analyze",
    "infer",
    "probability",
    "joint",
    "register",
    "unregister",
    "dedupe",
    "link",
    "DedupeResult",
    "Comparison",
    "Blocking",
    "FieldSpec",
    "PairModel",
    "PairScores",
    "CompileNotice",
    "CorefInputError",
    "PdbqError",
    "ParseError",
    "CatalogError",
    "GroundingError",
    "EvidenceError",
    "InferenceError",
    "LearningError",
    "OptionError",
    "SchemaVersionError",
    "TimeLimitError",
    "__version__",
]
