"""The pdbq SQL dialect: parsing scripts into typed statement nodes."""

from pdbq.language.dialect import PdbqDialect
from pdbq.language.parser import PLACEHOLDER_PREFIX, parse_script, parse_statement
from pdbq.language.split import Chunk, split_script, statement_complete

__all__ = [
    "PdbqDialect",
    "PLACEHOLDER_PREFIX",
    "Chunk",
    "parse_script",
    "parse_statement",
    "split_script",
    "statement_complete",
]
