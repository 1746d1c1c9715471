"""pdbq.io: model files in and out (UAI competition format)."""

from pdbq.io.uai import (
    UaiFormatError,
    UaiModel,
    read_evid,
    read_map,
    read_mar,
    read_pr,
    read_uai,
    read_uai_graph,
    write_evid,
    write_uai,
)

__all__ = [
    "UaiFormatError",
    "UaiModel",
    "read_evid",
    "read_map",
    "read_mar",
    "read_pr",
    "read_uai",
    "read_uai_graph",
    "write_evid",
    "write_uai",
]
