"""Refuse evidence of probability zero before any inference runs (issue 12, item 3).

`check_evidence_possible(con, variables, evidence)` propagates the evidence through every hard
factor of the model (`pdbq.inference.mcmc.feasibility`), including factors whose variables are all
observed, which query-driven grounding prunes from the query's graph. A contradiction is an
`EvidenceError` naming the factor (its imported model and factor number), its variables and
their observed values. Rule factors have finite weights, so only imported tables (zeros in a
UAI file) can make evidence impossible.
"""

from __future__ import annotations

from collections.abc import Mapping

import duckdb
import numpy as np

from pdbq.errors import EvidenceError
from pdbq.grounding.imported import hard_import_arrays, live_imports
from pdbq.grounding.variables import cardinalities
from pdbq.inference.mcmc.feasibility import HardFactors, propagate
from pdbq.language.nodes import CreateVariable

__all__ = ["check_evidence_possible"]


def check_evidence_possible(
    con: duckdb.DuckDBPyConnection,
    variables: Mapping[str, CreateVariable],
    evidence: tuple[np.ndarray, np.ndarray],
    imports: list | None = None,
) -> None:
    """`EvidenceError` when the evidence ``(sorted vids, values)`` has probability zero under the
    model's hard factors (as far as constraint propagation can tell). ``imports``: the live
    imported models when the caller has them (`pdbq.grounding.ground.Prepared.imports`)."""
    if imports is None:
        imports = live_imports(con, variables)
    if not imports:
        return
    parts = [(info, *hard_import_arrays(con, info)) for info in imports]
    parts = [p for p in parts if p[1].n_factors]
    if not parts:
        return
    card_all = cardinalities(con)
    offsets, vids, t_offsets, tables, owner = [np.zeros(1, np.int64)], [], [np.zeros(1, np.int64)], [], []
    e0 = t0 = 0
    for k, (_info, arrays, fids) in enumerate(parts):
        offsets.append(arrays.offsets[1:] + e0)
        t_offsets.append(arrays.table_offsets[1:] + t0)
        vids.append(arrays.vids)
        tables.append(arrays.tables)
        owner.append(np.stack([np.full(fids.shape[0], k), fids], axis=1))
        e0 += int(arrays.offsets[-1])
        t0 += int(arrays.table_offsets[-1])
    all_vids = np.concatenate(vids)
    hard = HardFactors(
        np.concatenate(offsets), all_vids, np.concatenate(t_offsets), np.concatenate(tables),
        card_all[all_vids].astype(np.int64),
    )
    ev_vids, ev_values = (np.asarray(evidence[0], dtype=np.int64), np.asarray(evidence[1], dtype=np.int64))
    found = propagate(hard, ev_vids, ev_values)
    if found is None:
        return
    k, fid = (int(x) for x in np.concatenate(owner)[found.factor])
    info = parts[k][0]
    scope = hard.vids[hard.offsets[found.factor] : hard.offsets[found.factor + 1]].tolist()
    pos = np.searchsorted(ev_vids, scope)
    shown = []
    for v, i in zip(scope, pos.tolist()):
        label = f"{info.relation}({v - info.base})"
        if i < ev_vids.shape[0] and ev_vids[i] == v:
            label += f" = {int(ev_values[i])}"
        shown.append(label)
    if found.fixed:
        why = "gives probability zero to these values"
    else:
        why = "leaves some variable no possible value given the evidence and the other hard factors"
    table = hard.tables[hard.table_offsets[found.factor] : hard.table_offsets[found.factor + 1]]
    if not np.any(table > -np.inf):
        why = "is all zeros: no value of its variables is possible"
    raise EvidenceError(
        f"the evidence has probability zero: factor {fid} of the imported model '{info.relation}' over "
        f"{', '.join(shown)} {why}"
    )
