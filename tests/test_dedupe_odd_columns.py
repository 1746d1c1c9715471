"""Columns a dedupe cannot use are said, not crashed on: a derived field no two records have is
left out, a named all-NULL field and a link_only column that does not exist are CorefInputErrors
naming them, and a text source column (shop 'a' / 'b') works as a 0/1 one does."""
import random

import pytest

import pdbq
from pdbq.errors import CorefInputError


def _people(rng: random.Random, n: int) -> list[dict]:
    first = ["ann", "bob", "cyd", "dee", "eve", "fay", "gus", "hal", "ida", "jon"]
    last = ["smith", "jones", "brown", "green", "white", "black", "young", "king"]
    rows = []
    for i in range(n):
        base = rows[rng.randrange(len(rows))] if rows and rng.random() < 0.3 else None
        name = base["name"] if base else f"{rng.choice(first)} {rng.choice(last)}"
        city = base["city"] if base else rng.choice(["leeds", "york", "hull", "bath", "ely"])
        rows.append({"pid": i, "name": name, "city": city, "shop": rng.choice(["a", "b"])})
    return rows


def _csv(tmp_path, rows, blank=()):
    p = tmp_path / "r.csv"
    cols = ["pid", "name", "city", "shop", *blank]
    p.write_text("\n".join([",".join(cols)] + [",".join(str(r.get(c, "")) for c in cols) for r in rows]) + "\n")
    return str(p)


def test_a_derived_field_no_record_has_is_left_out(tmp_path):
    # names with a digit in one token made pdbq derive a model-code field that fewer than two
    # records have: once an error about a field the caller never named
    p = tmp_path / "x.csv"
    p.write_text("pid,name,city\n" + "".join(f"{i},name{i % 7} smith,city{i % 3}\n" for i in range(40)))
    res = pdbq.dedupe(str(p), id="pid", fields=["name", "city"])
    assert res.clusters.num_rows == 40


def test_a_named_all_null_field_is_an_error(tmp_path):
    path = _csv(tmp_path, _people(random.Random(1), 20), blank=("notes",))
    with pytest.raises(CorefInputError, match="'notes'"):
        pdbq.dedupe(path, id="pid", fields=["name", "notes"])


def test_link_only_names_a_column(tmp_path):
    path = _csv(tmp_path, _people(random.Random(2), 30))
    with pytest.raises(CorefInputError, match="'nosuch'"):
        pdbq.dedupe(path, id="pid", fields=["name", "city"], link_only="nosuch")


def test_a_text_source_column_links(tmp_path):
    path = _csv(tmp_path, _people(random.Random(3), 40))
    res = pdbq.dedupe(path, id="pid", fields=["name", "city"], link_only="shop")
    assert res.clusters.num_rows == 40
