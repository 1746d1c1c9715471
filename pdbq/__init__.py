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
)
from pdbq.api.database import Database, connect
from pdbq.api.result import Result
from pdbq.api.udf import register, unregister
from pdbq.coref.layout import CorefInputError
from pdbq.coref.model import Blocking, Comparison
from pdbq.linkage import DedupeResult, dedupe

__version__ = "0.1.0"

__all__ = [
    "connect",
    "Database",
    "Result",
    "register",
    "unregister",
    "dedupe",
    "DedupeResult",
    "Comparison",
    "Blocking",
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
    "__version__",
]
