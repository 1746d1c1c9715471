"""What the first query after an import would do before inference, done by the import instead,
as a database builds an index at load time (issue 20: a fresh query's fixed cost).

`prepare_after_import` runs the store check a query runs first (catalog, `prepare`, store token;
`pdbq.planning.store_state`) until it is kept, checks that the stored evidence has non-zero
probability (kept with the check, as a query keeps it), and reads the whole stored model into
the database's graph cache (as the first query's graph builder does for a small store). Nothing
here moves DuckDB's statement count after the kept check, so a query that follows finds all of
it; any statement in between moves the count and the query checks in full, as without this.
Inference is not run: a query's answer is computed by the query.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pdbq.answers.feasibility import check_evidence_possible
from pdbq.grounding.store import schema_known
from pdbq.grounding.variables import stored_evidence
from pdbq.planning.evidence import resolve_evidence
from pdbq.planning.plan import build_graph
from pdbq.planning.store_state import checked_store, kept_state

__all__ = ["prepare_after_import"]


def prepare_after_import(db: Any, relation: str) -> None:
    """Check and keep the store of ``db`` and warm its graph cache with the whole model of the
    imported ``relation``. Errors propagate (the importer ignores them: the next query reports
    them)."""
    con = db.duckdb
    with schema_known(con):
        for _ in range(2):
            # the first check builds the import's vid map and stored evidence (writes: not kept);
            # the second finds them built and is kept when nothing else ran
            checked_store(db, with_token=getattr(db, "graph_cache", None) is not None)
            state = kept_state(db)
            if state is not None:
                break
        else:
            return
    info = state.prepared.sync.info.get(relation)
    if info is None or info.n == 0:
        return
    stored = state.remember("stored_evidence", state, lambda: stored_evidence(con))
    evidence = resolve_evidence(con, state.variables, (), stored)
    check_evidence_possible(con, state.variables, evidence.as_tuple(), state.prepared.imports)
    state.possible.add(evidence.vids.tobytes() + b"|" + evidence.values.tobytes())
    if getattr(db, "graph_cache", None) is None:
        return
    plan_args = {"variables": state.variables, "rules": state.rules, "prepared": state.for_query(), "token": state.token}
    seed = np.array([int(info.base)], dtype=np.int64)
    build_graph(db, plan_args, seed, evidence, None, None)
