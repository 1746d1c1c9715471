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

__version__ = "0.1.0"

__all__ = [
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
