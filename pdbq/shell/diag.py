"""The text of ``.last`` (alias ``.diag``): how the shell's last probabilistic query was answered.

>>> print(format_diagnostics({"method": "GIBBS", "method_reason": "USING GIBBS", "steps": 1000,
...     "burn_in": 100, "chains": 4, "rhat_max": 1.01, "max_stderr": 0.004, "seconds": 0.52,
...     "grounding_seconds": 0.1, "inference_seconds": 0.4, "query_vars": 2, "latent_vars": 5,
...     "evidence_vars": 1, "seed": 7, "warnings": ["tolerance 0.001 not reached"]}))
method     GIBBS (USING GIBBS)
variables  2 query, 5 latent, 1 evidence
steps      1,000 per chain, 4 chains (burn-in 100)
R-hat      1.01, the largest: the chains agree (at most 1.1)
stderr     0.004 (largest)
seed       7
time       0.520 s (grounding 0.100 s, inference 0.400 s)
warning    tolerance 0.001 not reached
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["format_diagnostics"]


def _num(x: Any) -> str:
    if isinstance(x, float) and math.isfinite(x):
        return f"{x:.4g}"
    return str(x)


def format_diagnostics(d: dict[str, Any]) -> str:
    """A few labelled lines from a `Result.diagnostics` dict (keys it lacks are skipped)."""
    rows: list[tuple[str, str]] = []
    if "method" in d:
        reason = d.get("method_reason")
        rows.append(("method", f"{d['method']}" + (f" ({reason})" if reason else "")))
    if "query_vars" in d:
        rows.append(("variables", f"{d.get('query_vars', 0)} query, {d.get('latent_vars', 0)} latent, "
                                  f"{d.get('evidence_vars', 0)} evidence"))
    if d.get("steps"):
        text = f"{int(d['steps']):,} per chain"
        if d.get("chains"):
            text += f", {d['chains']} chains"
        if d.get("burn_in"):
            text += f" (burn-in {int(d['burn_in']):,})"
        rows.append(("steps", text))
    if d.get("rhat_max") is not None:
        rhat = d["rhat_max"]
        verdict = ("the chains disagree (above 1.1)" if isinstance(rhat, (int, float)) and rhat > 1.1
                   else "the chains agree (at most 1.1)" if isinstance(rhat, (int, float)) and math.isfinite(rhat)
                   else "not measured")
        rows.append(("R-hat", f"{_num(rhat)}, the largest: {verdict}"))
    if d.get("max_stderr") is not None:
        rows.append(("stderr", f"{_num(d['max_stderr'])} (largest)"))
    if d.get("seed") is not None:
        rows.append(("seed", str(d["seed"])))
    if d.get("dask"):
        k = d["dask"]
        rows.append(("dask", f"{k.get('scheduler')}: {k.get('groups')} task(s) per round on {k.get('dask_workers')} "
                             f"worker(s), {k.get('rounds')} round(s); compute {k.get('compute_max', 0.0):.3f} s "
                             f"(slowest task, summed over rounds), overhead {k.get('overhead', 0.0):.3f} s"
                             + (f"; {k['mode']} rounds" if k.get("mode") else "")
                             + (f"; {k['replayed']:,} updates replayed after lost workers" if k.get("replayed") else "")
                             + ("; the workers were late for the time limit" if k.get("late") else "")))
    if d.get("seconds") is not None:
        text = f"{d['seconds']:.3f} s"
        parts = [f"{k} {d[k + '_seconds']:.3f} s" for k in ("grounding", "inference") if d.get(k + "_seconds") is not None]
        if parts:
            text += f" ({', '.join(parts)})"
        rows.append(("time", text))
    for w in d.get("warnings") or ():
        rows.append(("warning", str(w)))
    width = max((len(k) for k, _ in rows), default=0) + 2
    return "\n".join(f"{k.ljust(width)}{v}".rstrip() for k, v in rows)
