"""A simple Cora pair model for the Monte Carlo MCMC experiments (seed 000 §4.2).

Records come from ../shared/data/cora/CORA.xml (1,879 citations, 182 papers). Candidate pairs
are the pairs sharing a blocking key — the first author's surname prefix (4 letters) or one of
the title's two longest words — joined in DuckDB; each pair scores
    w = a_t · jw(title) + a_j · jaccard(title words) + a_f · jaccard(words of the whole citation)
        + a_a · jw(authors) + a_y · [same year] − bias
with DuckDB's jaro_winkler_similarity on lower-cased, punctuation-free fields (weights set by
hand: this experiment is about inference, not about the model). Within-entity pairs add w to
ψ(y); non-candidate pairs add nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import sys
import numpy as np

from pdbq.coref.layout import PairGraph, pair_graph

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from shared_data import data_dir  # noqa: E402

DATA = data_dir("cora")

W_TITLE, W_TOKENS, W_FULL, W_AUTHOR, W_YEAR, BIAS = 0.0, 6.0, 20.0, 2.0, 1.0, 15.0


def _clean(s: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^a-z0-9 ]", " ", s.lower())).strip()


def load_records(data: Path = DATA) -> tuple[list[dict], np.ndarray]:
    """Records (id, title, authors, year, surname) and gold entity labels per record."""
    text = (data / "CORA.xml").read_text(encoding="latin-1")
    recs = []
    for rid, body in re.findall(r'<NEWREFERENCE id="(\d+)">(.*?)</NEWREFERENCE>', text, re.S):
        def field(tag):
            m = re.search(rf"<{tag}>(.*?)</{tag}>", body, re.S)
            return _clean(m.group(1)) if m else ""
        title = field("title") or field("booktitle") or field("journal")
        authors = field("author")
        year = re.search(r"(19|20)\d\d", body)
        sur = ""
        m = re.match(r"\s*(?:[a-z]\s+)*([a-z]{2,})", authors)
        if m:
            sur = m.group(1)[:4]
        full = _clean(re.sub(r"<[^>]*>", " ", body.split(None, 1)[1] if body.strip() else ""))
        recs.append({"id": int(rid), "title": title, "authors": authors, "full": full,
                     "year": year.group(0) if year else "", "surname": sur})
    ids = np.array([r["id"] for r in recs])
    pos = {v: k for k, v in enumerate(ids)}
    parent = np.arange(len(recs))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for line in (data / "cora_gold.csv").read_text().splitlines()[1:]:
        a, b = (int(v) for v in line.split(";"))
        ra, rb = find(pos[a]), find(pos[b])
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    gold = np.array([find(i) for i in range(len(recs))])
    return recs, gold


def cora_graph(recs: list[dict], word_terms: bool = True) -> tuple[PairGraph, int]:
    """The pair graph over the records (module docstring) and the number of candidate pairs.
    word_terms=False leaves the two word-Jaccard terms out of the stored score (for a model
    that computes them on demand, examples/mcmcmc/ondemand.py)."""
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    keys = []
    for k, r in enumerate(recs):
        if r["surname"]:
            keys.append((k, "a:" + r["surname"]))
        for w in sorted(set(r["title"].split()), key=lambda w: (-len(w), w))[:2]:
            if len(w) >= 5:
                keys.append((k, "t:" + w))
    con.execute("CREATE TABLE rec(k INTEGER, title VARCHAR, authors VARCHAR, year VARCHAR, body VARCHAR)")
    con.executemany("INSERT INTO rec VALUES (?, ?, ?, ?, ?)",
                    [(k, r["title"], r["authors"], r["year"], r["full"]) for k, r in enumerate(recs)])
    con.execute("ALTER TABLE rec ADD COLUMN toks VARCHAR[]")
    con.execute("UPDATE rec SET toks = list_distinct(string_split(title, ' '))")
    con.execute("ALTER TABLE rec ADD COLUMN ftoks VARCHAR[]")
    con.execute("UPDATE rec SET ftoks = list_filter(list_distinct(string_split(body, ' ')), lambda t: length(t) >= 3)")
    con.execute("CREATE TABLE blk(k INTEGER, key VARCHAR)")
    con.executemany("INSERT INTO blk VALUES (?, ?)", keys)
    rows = con.execute(
        """
        WITH cand AS (
            SELECT DISTINCT x.k AS a, y.k AS b FROM blk x JOIN blk y ON x.key = y.key AND x.k < y.k
        )
        SELECT c.a, c.b,
               ? * jaro_winkler_similarity(r1.title, r2.title)
             + ? * len(list_intersect(r1.toks, r2.toks)) / greatest(len(list_distinct(list_concat(r1.toks, r2.toks))), 1)
             + ? * len(list_intersect(r1.ftoks, r2.ftoks)) / greatest(len(list_distinct(list_concat(r1.ftoks, r2.ftoks))), 1)
             + ? * jaro_winkler_similarity(r1.authors, r2.authors)
             + ? * CAST(r1.year <> '' AND r1.year = r2.year AS DOUBLE) - ? AS w
        FROM cand c JOIN rec r1 ON r1.k = c.a JOIN rec r2 ON r2.k = c.b
        ORDER BY c.a, c.b
        """,
        [W_TITLE, W_TOKENS if word_terms else 0.0, W_FULL if word_terms else 0.0, W_AUTHOR, W_YEAR, BIAS],
    ).fetchnumpy()
    g = pair_graph(len(recs), rows["a"], rows["b"], rows["w"])
    return g, int(rows["a"].size)


def cora_tokens(recs: list[dict]):
    """The on-demand model (`pdbq.coref.tokens`): every pair inside an entity scores
    6·J(title words) + 20·J(citation words of ≥ 3 letters) + 2·J(author-name words) + 1·[same year] − 15
    (J: Jaccard), the stored model's weights with the authors' Jaro–Winkler replaced by a Jaccard,
    computed when a move looks at the pair; blocking (`cora_graph`) only shapes the proposals."""
    from pdbq.coref.tokens import token_model

    return token_model(
        [[r["title"].split() for r in recs], [sorted(citation_words(r)) for r in recs],
         [r["authors"].split() for r in recs], [[r["year"]] if r["year"] else [] for r in recs]],
        [W_TOKENS, W_FULL, W_AUTHOR, W_YEAR], BIAS)


def title_words(r: dict) -> set[str]:
    """The word set DuckDB's list_distinct(string_split(title, ' ')) gives."""
    return set(r["title"].split(" "))


def citation_words(r: dict) -> set[str]:
    return {w for w in r["full"].split(" ") if len(w) >= 3}


def b3_f1(pred: np.ndarray, gold: np.ndarray) -> float:
    """B³ F1 (Bagga & Baldwin 1998): per-mention precision/recall of its cluster, averaged."""
    _, p = np.unique(pred, return_inverse=True)
    _, t = np.unique(gold, return_inverse=True)
    p = p.ravel()
    t = t.ravel()
    both = p.astype(np.int64) * (t.max() + 1) + t
    _, inv, cnt = np.unique(both, return_inverse=True, return_counts=True)
    inter = cnt[inv.ravel()]
    ps = np.bincount(p)[p]
    ts = np.bincount(t)[t]
    prec = float(np.mean(inter / ps))
    rec = float(np.mean(inter / ts))
    return 2 * prec * rec / (prec + rec)
