"""pdbq: a probabilistic database for Python on DuckDB."""

from pdbq.errors import (
    CatalogError,
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
from pdbq.api import Database, Result, analyze, infer, joint, probability
from pdbq.udf import connect, register, unregister
from pdbq.version import __version__
from pdbq.coref.layout import CorefInputError
from pdbq.coref.model import Blocking, Comparison
from pdbq.coref.levels import FieldSpec
from pdbq.coref.pair_model import PairModel, PairScores
from pdbq.linkage import DedupeResult, dedupe
from pdbq.linkage.link import link


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
