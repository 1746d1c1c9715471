"""Warnings that name variables by relation and key rather than by graph index.

The samplers (inference layer) know only the pruned graph's variable indices and write
"variable 17"; the plan knows which global variable (and so which relation row) each index is.
`label_warnings` rewrites those mentions as ``is_popular('Up')`` for the user.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["label_warnings"]

_MENTION = re.compile(r"\bvariable (\d+)\b")


def label_warnings(warnings: Sequence[str], graph_vids: Any, labels_of: Any) -> list[str]:
    """``warnings`` with each "variable <graph index>" replaced by ``labels_of(global vids)``'s
    label (a dict vid -> text); mentions that cannot be mapped are left as written.

    >>> label_warnings(["not converged (worst 1.4 for variable 1)"], np.array([5, 9]),
    ...                lambda vids: {9: "x(3)"})
    ['not converged (worst 1.4 for x(3))']
    """
    if graph_vids is None or not warnings:
        return list(warnings)
    gv = np.asarray(graph_vids, dtype=np.int64)
    local = sorted({int(m) for w in warnings for m in _MENTION.findall(w)})
    local = [i for i in local if 0 <= i < gv.size]
    if not local:
        return list(warnings)
    try:
        names = labels_of(gv[np.array(local, dtype=np.int64)])
    except Exception:  # noqa: BLE001 - a label is a courtesy: never fail an answer over it
        return list(warnings)

    def sub(m: re.Match[str]) -> str:
        i = int(m.group(1))
        label = names.get(int(gv[i])) if 0 <= i < gv.size else None
        return label if label else m.group(0)

    return [_MENTION.sub(sub, w) for w in warnings]
