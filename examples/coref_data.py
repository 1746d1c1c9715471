"""Loaders for the coreference data sets in the shared data folder (examples/shared_data.py: Cora, Fodors–Zagats) as DuckDB
tables.

`load_cora(con)` creates `cora(id, author, title, venue, year, text)` and `cora_gold(id, entity)`;
`load_restaurants(con)` creates `restaurants(id, name, addr, city, phone, phone_digits, type, src)`
and `restaurants_gold(id, entity)` (entity = the smaller id of a gold match, else the id).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

from pdbq.coref.metrics import labels_from_pairs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from shared_data import data_root  # noqa: E402

DATA = data_root()

_FIELD = re.compile(r"<(\w+)>(.*?)</\1>", re.S)


def _clean(s: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]*>", " ", s)).strip()


def load_cora(con, data: Path = DATA) -> None:
    text = (data / "cora" / "CORA.xml").read_text(encoding="latin-1")
    rows = []
    for m in re.finditer(r'<NEWREFERENCE id="(\d+)">(.*?)</NEWREFERENCE>', text, re.S):
        rid, body = int(m.group(1)), m.group(2)
        fields: dict[str, str] = {}
        for tag, val in _FIELD.findall(body):
            fields.setdefault(tag, _clean(val))
        venue = fields.get("journal") or fields.get("booktitle") or fields.get("institution") or fields.get("tech")
        year = re.search(r"(19|20)\d\d", fields.get("year", "") + " " + fields.get("date", ""))
        # the whole citation without the leading citation key (which is not the label)
        full = _clean(body.split(None, 1)[1] if len(body.split(None, 1)) > 1 else body)
        rows.append((rid, fields.get("author"), fields.get("title"), venue, year.group(0) if year else None, full))
    cols = list(zip(*rows))
    tbl = pa.table({"id": pa.array(cols[0], pa.int64()), "author": cols[1], "title": cols[2],
                    "venue": cols[3], "year": cols[4], "text": cols[5]})
    con.register("__cora", tbl)
    con.execute("CREATE OR REPLACE TABLE cora AS SELECT * FROM __cora")
    con.unregister("__cora")
    gold = np.loadtxt(data / "cora" / "cora_gold.csv", delimiter=";", skiprows=1, dtype=np.int64)
    ids = np.array(cols[0], dtype=np.int64)
    ent = labels_from_pairs(ids, gold[:, 0], gold[:, 1])
    con.register("__cg", pa.table({"id": ids, "entity": ent}))
    con.execute("CREATE OR REPLACE TABLE cora_gold AS SELECT * FROM __cg")
    con.unregister("__cg")


def load_restaurants(con, data: Path = DATA) -> None:
    d = data / "restaurants_fodors_zagats"
    con.execute(
        "CREATE OR REPLACE TABLE restaurants AS SELECT *, regexp_replace(phone, '[^0-9]', '', 'g') AS phone_digits "
        "FROM (SELECT *, 'fodors' AS src FROM read_csv(?) UNION ALL SELECT *, 'zagats' AS src FROM read_csv(?))",
        [str(d / "fodors.csv"), str(d / "zagats.csv")],
    )
    m = con.execute("SELECT fodors_id, zagats_id FROM read_csv(?)", [str(d / "matches_fodors_zagats.csv")]).fetchnumpy()
    ids = con.execute("SELECT id FROM restaurants ORDER BY id").fetchnumpy()["id"]
    ent = labels_from_pairs(ids, m["fodors_id"], m["zagats_id"])
    con.register("__rg", pa.table({"id": ids, "entity": ent}))
    con.execute("CREATE OR REPLACE TABLE restaurants_gold AS SELECT * FROM __rg")
    con.unregister("__rg")
