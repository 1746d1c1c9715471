"""The practical front door to coreference: `pdbq.dedupe(source, id=..., fields=[...])` → (id,
cluster), and the ``pdbq dedupe`` command (`pdbq.linkage.cli`).

The function and its results live in `pdbq.linkage.front`; its names are reachable here and are
imported on first use, so ``pdbq dedupe --help`` starts without the engine.
"""

from importlib import import_module

__all__ = ["dedupe", "DedupeResult", "DEFAULT_CONFIG", "POSTERIOR_CONFIG", "evaluate"]


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(f"module 'pdbq.linkage' has no attribute {name!r}")
    front = import_module("pdbq.linkage.front")
    try:
        value = getattr(front, name)
    except AttributeError:
        raise AttributeError(f"module 'pdbq.linkage' has no attribute {name!r}") from None
    globals()[name] = value
    return value
