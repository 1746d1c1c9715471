"""pdbq: a probabilistic database for Python on DuckDB."""

from pdbq.errors import (
    CatalogError,
    EvidenceError,
    GroundingError,
    InferenceError,
    OptionError,
    ParseError,
    PdbqError,
    SchemaVersionError,
)
from pdbq.api import Database, Result, analyze, connect
from pdbq.udf import register, unregister
from pdbq.version import __version__


__all__ = [
    "connect",
    "Database",
    "Result",
    "analyze",
    "register",
    "unregister",
    "PdbqError",
    "ParseError",
    "CatalogError",
    "GroundingError",
    "EvidenceError",
    "InferenceError",
    "OptionError",
    "SchemaVersionError",
    "__version__",
]
