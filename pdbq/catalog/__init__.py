"""pdbq.catalog: variable relations and rules, validated at CREATE and stored in ``pdbq_*`` tables."""

from pdbq.catalog.store import SCHEMA_VERSION, Catalog

__all__ = ["Catalog", "SCHEMA_VERSION"]
