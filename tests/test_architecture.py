"""The layer contract and the architecture page hold for the tree as it is (docs/architecture.md)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pdbq"


def _children(package: Path = PACKAGE) -> set[str]:
    """A package's direct children: sub-packages and modules (``errors``, ``progress``, ...)."""
    out = {p.name for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    out |= {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    return out


def _cycles(adjacency: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(adjacency):
        if root in index:
            continue
        work = [(root, iter(sorted(adjacency[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = counter
                    counter += 1
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(adjacency[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles_anywhere_in_pdbq():
    graph = grimp.build_graph("pdbq")
    modules = set(graph.modules)
    adjacency = {m: set(graph.find_modules_directly_imported_by(m)) & modules for m in modules}
    assert _cycles(adjacency) == []


def test_layer_contract_holds_and_covers_every_package():
    from importlinter.cli import lint_imports

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    covered = set()
    for contract in config["contracts"]:
        (container,) = contract["containers"]
        named = {name.strip() for layer in contract["layers"] for name in layer.split("|")}
        assert named == _children(ROOT.joinpath(*container.split("."))), container
        assert contract.get("exhaustive") is True
        covered.add(container)
    # the package and inference's families each have a layer contract
    assert covered == {"pdbq", "pdbq.inference"}
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_logo=True, no_cache=True) == 0


def test_architecture_page_names_every_package():
    page = (ROOT / "docs" / "architecture.md").read_text()
    missing = [name for name in sorted(_children()) if name != "__main__" and f"pdbq/{name}" not in page]
    assert missing == []


@pytest.mark.parametrize("name", ["read_uai", "read_uai_graph", "write_uai", "read_mar"])
def test_io_reexports(name):
    import pdbq.io

    assert callable(getattr(pdbq.io, name))
