"""Entity resolution three ways (docs/coreference.md): the Python front door on Cora, the same
model in pdbq SQL on Fodors–Zagats, and evaluation with the coref_b3 / coref_pairwise macros.

    python examples/coreference.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "bench"))

import pdbq  # noqa: E402
from coref import CONFIG, CORA_BIAS, CORA_BLOCKING, CORA_COMPARISONS  # noqa: E402
from coref_data import load_cora, load_restaurants  # noqa: E402
from pdbq.coref.metrics import register_sql  # noqa: E402

SQL = """
-- candidate pairs by blocking (same phone, or a shared name word, or the same address start),
-- one row per pair with its comparisons: plain DuckDB
CREATE TABLE rest_pairs AS
WITH words AS (SELECT id, unnest(string_split(lower(name), ' ')) AS w FROM restaurants),
cand AS (
    SELECT l.id AS a, r.id AS b FROM restaurants l JOIN restaurants r ON l.id < r.id AND l.phone_digits = r.phone_digits
    UNION SELECT l.id, r.id FROM words l JOIN words r ON l.id < r.id AND l.w = r.w AND length(l.w) >= 3
    UNION SELECT l.id, r.id FROM restaurants l JOIN restaurants r ON l.id < r.id AND substr(lower(l.addr), 1, 6) = substr(lower(r.addr), 1, 6))
SELECT c.a, c.b,
       jaro_winkler_similarity(l.name, r.name) AS name_jw,
       jaro_winkler_similarity(l.addr, r.addr) AS addr_jw,
       jaro_winkler_similarity(l.city, r.city) AS city_jw,
       (l.phone_digits = r.phone_digits)::DOUBLE AS phone_eq,
       (l.src = r.src)::DOUBLE AS same_source
FROM cand c JOIN restaurants l ON l.id = c.a JOIN restaurants r ON r.id = c.b;

CREATE VARIABLE restaurant(id BIGINT) DOMAIN CLUSTER FROM (SELECT id FROM restaurants);
CREATE RULE affinity
    WEIGHT = 8 * (name_jw - 0.8) + 4 * (addr_jw - 0.85) + 3 * (city_jw - 0.9)
             + 4 * (phone_eq - 0.5) - 8 * same_source + 1
    FUNCTION EQUAL AS restaurant(a) = restaurant(b) :- rest_pairs(a, b, name_jw, addr_jw, city_jw, phone_eq, same_source);
"""


def main() -> None:
    db = pdbq.connect()
    load_cora(db.duckdb)
    load_restaurants(db.duckdb)
    register_sql(db.duckdb)

    # 1. the Python front door on Cora
    t0 = time.perf_counter()
    res = pdbq.dedupe("cora", id="id", comparisons=CORA_COMPARISONS, blocking=CORA_BLOCKING, bias=CORA_BIAS,
                      config=CONFIG, con=db.duckdb)
    db.duckdb.register("cora_clusters", res.clusters)
    b3 = db.duckdb.execute("SELECT * FROM coref_b3('cora_clusters', 'cora_gold')").fetchone()
    print(f"Cora: {res.diagnostics['clusters']} clusters in {time.perf_counter() - t0:.1f} s, B3 F1 {b3[2]:.3f}")

    # 2. the SQL model on Fodors-Zagats
    db.execute(SQL)
    t0 = time.perf_counter()
    out = db.execute("SELECT r.id, MAP(r) AS cluster FROM restaurant AS r WITH (seed = 1)")
    db.duckdb.register("rest_clusters", out.arrow())
    pw = db.duckdb.execute("SELECT * FROM coref_pairwise('rest_clusters', 'restaurants_gold')").fetchone()
    print(f"Fodors-Zagats (SQL): {out.diagnostics['r.entities']} entities in {time.perf_counter() - t0:.1f} s, "
          f"pairwise P {pw[0]:.3f} R {pw[1]:.3f} F1 {pw[2]:.3f}")
    # 3. uncertainty: how sure are we that Fodors' 'arnie mortons of chicago' (534) is Zagat's 219?
    p = db.execute("SELECT r.id, PROB(r = 534) AS p, STDERR(r) AS se FROM restaurant AS r WHERE r.id IN (219, 220)"
                   " ORDER BY r.id WITH (sweeps = 100, seed = 1)")
    print(p)


if __name__ == "__main__":
    main()
