"""The inventor generator (tests/inventors_data.py) does what examples/bench/er_inventors.py
relies on: seeded, large heavy-tailed entities, list-valued co-inventors and codes, careers that
change employer and home, name variants."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st


def _inventors():
    spec = importlib.util.spec_from_file_location("pdbq_tests_inventors_data", Path(__file__).parent / "inventors_data.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_inventor_careers_are_large_and_change(seed):
    mod = _inventors()
    tbl, ent = mod.inventors(6000, seed=seed)
    again, ent2 = mod.inventors(6000, seed=seed)
    assert tbl.equals(again) and np.array_equal(ent, ent2), seed  # seeded
    assert tbl.num_rows == ent.size >= 6000
    sizes = np.bincount(ent)
    assert sizes.max() <= mod.MAX_MENTIONS and (sizes == 1).sum() > 0.2 * sizes.size, (seed, sizes.max())
    assert str(tbl.schema.field("coinventors").type) == "list<item: string>"
    assert str(tbl.schema.field("classes").type) == "list<item: string>"
    rows = tbl.to_pylist()
    big = int(np.argmax(sizes))
    mine = [r for r, e in zip(rows, ent) if e == big]
    if len(mine) >= 60:  # a long career: several employers and first-name spellings
        assert len({r["assignee"] for r in mine}) >= 2, seed
        assert len({r["first_name"] for r in mine}) >= 2, seed
