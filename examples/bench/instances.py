"""The 15 networks the exact-inference benchmarks use: the 8 UAI 2014 files with answers in
../shared/data/uai2014 and 7 generated ones (pairwise grids and random partial k-trees of
chosen width), written as UAI files so that every system reads the same numbers.

    from instances import instances
    for inst in instances(): print(inst.name, inst.path, inst.evid)

Generated models are deterministic (fixed seeds) and written once to a temporary folder.
"""

from __future__ import annotations

import os
import tempfile
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_HERE = Path(__file__).resolve()
sys.path.insert(0, str(_HERE.parents[1]))
from shared_data import data_dir  # noqa: E402

DATA = data_dir("uai2014")
if os.environ.get("PDBQ_UAI_DATA"):
    DATA = Path(os.environ["PDBQ_UAI_DATA"])
UAI_2014 = ("Alchemy_11", "CSP_12", "DBN_11", "Grids_12", "ObjectDetection_11", "Promedus_24", "Promedus_26",
            "Segmentation_11")


@dataclass(frozen=True)
class Instance:
    name: str
    path: Path
    evid: Path | None
    generated: bool


def _write(path: Path, card: list[int], scopes: list[tuple[int, ...]], tables: list[np.ndarray]) -> None:
    lines = ["MARKOV", str(len(card)), " ".join(map(str, card)), str(len(scopes))]
    lines += [f"{len(s)} " + " ".join(map(str, s)) for s in scopes]
    for t in tables:
        lines.append(f"{t.size}\n" + " ".join(f"{x:.6g}" for x in t.ravel()))
    path.write_text("\n".join(lines) + "\n")


def grid(n: int, seed: int, path: Path, coupling: float = 1.0) -> None:
    """An n x n Ising-like grid: unary and pairwise positive tables (induced width n)."""
    rng = np.random.default_rng(seed)
    v = lambda i, j: i * n + j  # noqa: E731
    scopes, tables = [], []
    for i in range(n):
        for j in range(n):
            scopes.append((v(i, j),))
            tables.append(np.exp(rng.normal(0, 0.5, 2)))
            for di, dj in ((0, 1), (1, 0)):
                if i + di < n and j + dj < n:
                    w = rng.normal(0, coupling)
                    scopes.append((v(i, j), v(i + di, j + dj)))
                    tables.append(np.exp(np.array([[w, -w], [-w, w]])))
    _write(path, [2] * (n * n), scopes, tables)


def ktree(n: int, k: int, seed: int, path: Path, keep: float = 0.7, card: int = 2) -> None:
    """A random partial k-tree on n variables (induced width at most k): each new variable joins
    a random k-clique of the earlier ones, keeping each edge with probability ``keep``; one
    pairwise table per kept edge and one unary table per variable."""
    rng = np.random.default_rng(seed)
    cliques = [tuple(range(k + 1))]
    edges = {(a, b) for a in range(k + 1) for b in range(a + 1, k + 1)}
    for u in range(k + 1, n):
        base = cliques[rng.integers(len(cliques))]
        drop = rng.integers(len(base))
        c = tuple(x for i, x in enumerate(base) if i != drop)
        cliques.append(c + (u,))
        edges |= {(x, u) for x in c}
    kept = [e for e in sorted(edges) if rng.random() < keep]
    scopes = [(i,) for i in range(n)] + kept
    tables = [np.exp(rng.normal(0, 0.5, card)) for _ in range(n)]
    tables += [np.exp(rng.normal(0, 0.8, (card, card))) for _ in kept]
    _write(path, [card] * n, scopes, tables)


GENERATED = (
    ("grid_10x10", lambda p: grid(10, 1, p)),
    ("grid_14x14", lambda p: grid(14, 2, p)),
    ("grid_16x16", lambda p: grid(16, 3, p)),
    ("grid_17x17", lambda p: grid(17, 3, p)),
    ("ktree_300_w8", lambda p: ktree(300, 8, 5, p)),
    ("ktree_100_w20", lambda p: ktree(100, 20, 6, p)),
    ("ktree_60_w9_k3", lambda p: ktree(60, 9, 7, p, card=3)),
)


def instances(folder: str | os.PathLike | None = None, which: str = "all") -> list[Instance]:
    """``which``: "uai" (the 8 files), "generated" (the 7 models) or "all"."""
    out: list[Instance] = []
    if which in ("uai", "all"):
        for name in UAI_2014:
            evid = DATA / f"{name}.uai.evid"
            out.append(Instance(name, DATA / f"{name}.uai", evid if evid.exists() else None, False))
    if which in ("generated", "all"):
        root = Path(folder) if folder is not None else Path(tempfile.gettempdir()) / "pdbq_bench_models"
        root.mkdir(parents=True, exist_ok=True)
        for name, make in GENERATED:
            path = root / f"{name}.uai"
            if not path.exists():
                make(path)
            out.append(Instance(name, path, None, True))
    return out
