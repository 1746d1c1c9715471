"""pdbq.grounding: rules → DuckDB factor store (see docs/grounding.md).

Graph arrays and query-driven graphs live one layer up, in `pdbq.graph.from_store`.
"""

from pdbq.grounding.ground import GroundingStats, ground_all, prepare
from pdbq.grounding.limits import GroundingConfig
from pdbq.grounding.variables import (
    RelationInfo,
    keys_to_vids,
    relation_info,
    stored_evidence,
    sync_variables,
    vids_to_keys,
)

__all__ = [
    "GroundingConfig",
    "GroundingStats",
    "RelationInfo",
    "ground_all",
    "prepare",
    "keys_to_vids",
    "vids_to_keys",
    "relation_info",
    "stored_evidence",
    "sync_variables",
]
