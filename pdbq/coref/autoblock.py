"""Automatic blocking for a fitted `PairModel`: rules chosen to keep candidate pairs under a
budget, with the share of true matches they are estimated to miss.

Candidate rules over the normalised values (`pdbq_fs_values`):

* `equal(f)` / `equal(f, g)`: the records agree exactly on one field (two fields: the narrower
  rule tried where one field alone is too broad);
* `token(f, s)`: the records share a word of a string or text field, words held by more than
  `s` records skipped (stop words; narrowed to a smaller `s` where the broad one is too costly).

**Recall estimate.** Under the fitted model, with fields independent given a match (the model's
own assumption), field f of a true pair is exact with probability q_f·m_f[exact], shares a word
with about q_f·(1 − m_f[else]) (text) or q_f·(m_f[exact] + m_f[first fuzzy level]) (short
strings), where q_f is the share of record pairs with f non-NULL on both sides. Enumerating these
per-field states gives P(some rule catches a match) under that assumption. A token rule that
skips frequent words also misses matches whose shared words are all frequent (the records of a
large entity): it fires with probability `kept`, the share of equal-valued record pairs (weighted
as matches are: by pairs, big groups first) that still share a kept word.

**Choice.** Greedy: repeatedly add the rule with the largest estimated gain in recall per
candidate pair it adds (pairs counted per rule, overlaps not subtracted: an upper bound), among
those that fit the remaining budget and catch at least one expected match per `pairs_per_match`
pairs; stop when nothing qualifies.
"""

from __future__ import annotations

import math

from dataclasses import dataclass

import numpy as np

from pdbq.coref.layout import CorefInputError
from pdbq.coref.levels import VALUES
from pdbq.coref.pair_model import PairModel

__all__ = ["BlockRule", "BlockingChoice", "choose_blocking", "build_candidates", "rules_recall"]

PAIRS = "pdbq_coref_pairs"


@dataclass(frozen=True)
class BlockRule:
    """`kind` "equal" (fields: indices agreeing exactly) or "token" (one field sharing a word,
    words in more than `max_key_size` records skipped). `pairs`: counted pairs (upper bound)."""

    kind: str
    fields: tuple[int, ...]
    max_key_size: int = 0
    pairs: int = 0
    kept: float = 1.0

    def describe(self, model: PairModel) -> str:
        names = [model.fields[k].field for k in self.fields]
        if self.kind == "equal":
            return " AND ".join(f"{n} equal" for n in names)
        what = "code" if model.fields[self.fields[0]].levels.kind == "codes" else "word"
        return f"{names[0]} shares a {what} ({what}s in > {self.max_key_size} records skipped)"


@dataclass(frozen=True)
class BlockingChoice:
    """The chosen rules, their counted pairs, and the estimated recall (share of true matches
    that are candidate pairs) and the expected number of matches missed."""

    rules: tuple[BlockRule, ...]
    pairs_bound: int
    recall: float
    expected_matches: float

    @property
    def recall_stderr(self) -> float:
        """The recall's standard error as a share of the expected matching pairs: a binomial
        proportion over `expected_matches` (a 4-record table expects about 2, and its recall
        estimate says next to nothing: ± 0.3)."""
        e = max(self.expected_matches, 1.0)
        return math.sqrt(max(self.recall * (1.0 - self.recall), 0.0) / e)

    def recall_text(self) -> str:
        """``estimated recall R ± se`` (the CLI's and the result's summary)."""
        return f"estimated recall {self.recall:.4f} ± {self.recall_stderr:.2g}"

    @property
    def expected_missed(self) -> float:
        return self.expected_matches * (1.0 - self.recall)

    def describe(self, model: PairModel) -> list[str]:
        return [r.describe(model) for r in self.rules]


def _tokens_sql(k: int, kind: str) -> str:
    src = f"t{k}" if kind in ("text", "codes") else f"list_distinct(string_split(v{k}, ' '))"
    return f"list_filter({src}, lambda x: length(x) >= 2)"


def _words(con, k: int, kind: str) -> str:
    """A TEMP table (m, w, c) of each record's distinct words of field k with the number of
    records holding the word, built once per field for all the token rules' counts."""
    name = f"__pdbq_words{k}"
    if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ? AND temporary", [name]).fetchall()[0][0]:
        con.execute(f"CREATE TEMP TABLE {name} AS WITH tw AS (SELECT DISTINCT m, unnest({_tokens_sql(k, kind)}) AS w "
                    f"FROM {VALUES}) SELECT m, w, count(*) OVER (PARTITION BY w) AS c FROM tw")
    return name


def drop_word_tables(con, K: int) -> None:
    for k in range(K):
        con.execute(f"DROP TABLE IF EXISTS __pdbq_words{k}")


def _count(con, rule: BlockRule, kinds) -> int:
    if rule.kind == "equal":
        cols = ", ".join(f"v{k}" for k in rule.fields)
        nn = " AND ".join(f"v{k} IS NOT NULL" for k in rule.fields)
        q = f"SELECT count(*) AS c FROM {VALUES} WHERE {nn} GROUP BY {cols}"
        return int(con.execute(f"SELECT coalesce(sum(c * (c - 1) / 2), 0) FROM ({q})").fetchall()[0][0])
    words = _words(con, rule.fields[0], kinds[rule.fields[0]])
    return int(con.execute(f"SELECT coalesce(sum(c * (c - 1) / 2), 0) FROM (SELECT w, any_value(c) AS c FROM {words} "
                           f"GROUP BY w) WHERE c <= ?", [rule.max_key_size]).fetchall()[0][0])


def _keyed_sql(con, rule: BlockRule, kinds) -> str:
    if rule.kind == "equal":
        cols = ", ".join(f"v{k}" for k in rule.fields)
        nn = " AND ".join(f"v{k} IS NOT NULL" for k in rule.fields)
        return f"SELECT m, row({cols}) AS w FROM {VALUES} WHERE {nn}"
    words = _words(con, rule.fields[0], kinds[rule.fields[0]])
    return f"SELECT m, w FROM {words} WHERE c <= {int(rule.max_key_size)}"


def _kept_share(con, rule: BlockRule, kinds) -> float:
    """For a token rule: the share of pairs of records with equal values (weighted like true
    matches, big groups first) that still share a word once frequent words are skipped: what
    skipping stop words costs the matches of large entities. 1.0 for equality rules."""
    if rule.kind != "token":
        return 1.0
    k = rule.fields[0]
    words = _words(con, k, kinds[k])
    q = (f"WITH rare AS (SELECT DISTINCT m FROM {words} WHERE c <= {int(rule.max_key_size)}), "
         f"grp AS (SELECT v{k} AS v, count(*) AS c, count(rare.m) AS r FROM {VALUES} LEFT JOIN rare USING (m) "
         f"WHERE v{k} IS NOT NULL GROUP BY v{k} HAVING count(*) > 1) "
         f"SELECT sum(c * (c - 1) / 2), sum(CASE WHEN r > 0 THEN c * (c - 1) / 2 ELSE 0 END) FROM grp")
    tot, kept = con.execute(q).fetchall()[0]
    if not tot:
        return 1.0
    return float(kept) / float(tot)


def _states(model: PairModel, q: np.ndarray):
    """Per field: P(exact), P(shares a word but not exact) for a true match (module docstring)."""
    out = []
    for k, f in enumerate(model.fields):
        m = f.m
        ex = q[k] * m[0]
        if f.levels.kind in ("text", "codes"):
            share = q[k] * (1.0 - m[-1])
        elif f.levels.kind == "string" and m.size > f.levels.first_similar + 1:
            share = q[k] * (m[0] + m[f.levels.first_similar])
        else:
            share = ex
        out.append((ex, max(share - ex, 0.0)))
    return out


def rules_recall(model: PairModel, rules, q: np.ndarray) -> float:
    """P(some rule catches a true match) under the model (module docstring)."""
    if not rules:
        return 0.0
    st = _states(model, q)
    involved = sorted({k for r in rules for k in r.fields})
    col = {k: i for i, k in enumerate(involved)}
    # every joint state of the involved fields: 0 exact, 1 shares a word, 2 neither
    states = np.indices((3,) * len(involved)).reshape(len(involved), -1).T
    p = np.ones(states.shape[0])
    for k in involved:
        ex, sh = st[k]
        p *= np.array([ex, sh, max(1.0 - ex - sh, 0.0)])[states[:, col[k]]]
    missed = np.ones(states.shape[0])
    for r in rules:
        if r.kind == "equal":
            fires = np.all(states[:, [col[k] for k in r.fields]] == 0, axis=1).astype(float)
        else:  # a shared word survives stop-word skipping with probability `kept`
            fires = r.kept * (states[:, col[r.fields[0]]] <= 1)
        missed *= 1.0 - fires
    return float(min((p * (1.0 - missed)).sum(), 1.0))


def _nonnull_share(con, K: int) -> np.ndarray:
    n = con.execute(f"SELECT count(*), {', '.join(f'count(v{k})' for k in range(K))} FROM {VALUES}").fetchall()[0]
    return np.array([(c / n[0]) ** 2 if n[0] else 0.0 for c in n[1:]])


def choose_blocking(con, model: PairModel, n: int, max_pairs: int, pairs_per_match: float = 10_000.0,
                    key_sizes: tuple[int, ...] = (200, 50, 15)) -> BlockingChoice:
    """Choose blocking rules for `model` under `max_pairs` (module docstring)."""
    K = len(model.fields)
    kinds = [f.levels.kind for f in model.fields]
    q = _nonnull_share(con, K)
    expected = model.prior * n * (n - 1) / 2
    cands: list[BlockRule] = []
    for k in range(K):
        if kinds[k] != "list":
            cands.append(BlockRule("equal", (k,)))
        if kinds[k] in ("text", "string", "codes"):
            cands.extend(BlockRule("token", (k,), s) for s in key_sizes if s < n)
    cands = [BlockRule(r.kind, r.fields, r.max_key_size, _count(con, r, kinds), _kept_share(con, r, kinds)) for r in cands]
    broad = [r.fields[0] for r in cands if r.kind == "equal" and r.pairs > max_pairs]
    for a in broad:
        for b in range(K):
            if b != a and kinds[b] != "list":
                r = BlockRule("equal", tuple(sorted((a, b))))
                if all(c.fields != r.fields or c.kind != "equal" for c in cands):
                    cands.append(BlockRule(r.kind, r.fields, 0, _count(con, r, kinds)))
    chosen: list[BlockRule] = []
    used, recall = 0, 0.0
    while True:
        best, best_score, best_rec = None, 0.0, recall
        for r in cands:
            if r in chosen or used + r.pairs > max_pairs:
                continue
            rec = rules_recall(model, chosen + [r], q)
            gain = rec - recall
            if gain <= 0 or gain * expected * pairs_per_match < r.pairs:
                continue
            score = gain / max(r.pairs, 1)
            if score > best_score:
                best, best_score, best_rec = r, score, rec
        if best is None:
            break
        chosen.append(best)
        used += best.pairs
        recall = best_rec
    if not chosen:
        cheapest = min(cands, key=lambda r: r.pairs, default=None)
        if cheapest is None or cheapest.pairs > max_pairs:
            raise CorefInputError(f"no blocking rule keeps the candidate pairs under max_pairs = {max_pairs:,}; "
                                  "raise max_pairs or give a blocking key")
        chosen, used, recall = [cheapest], cheapest.pairs, rules_recall(model, [cheapest], q)
    return BlockingChoice(tuple(chosen), used, recall, expected)


def build_candidates(con, model: PairModel, rules: tuple[BlockRule, ...]) -> int:
    """Create `pdbq_coref_pairs(a, b)` (a < b) as the union of the rules' pairs; its size."""
    kinds = [f.levels.kind for f in model.fields]
    parts = []
    for i, r in enumerate(rules):
        con.execute(f"CREATE OR REPLACE TEMP TABLE __pdbq_key{i} AS {_keyed_sql(con, r, kinds)}")
        parts.append(f"SELECT l.m AS a, r.m AS b FROM __pdbq_key{i} l JOIN __pdbq_key{i} r ON l.w = r.w AND l.m < r.m")
    con.execute(f"CREATE OR REPLACE TEMP TABLE {PAIRS} AS SELECT DISTINCT a, b FROM ({' UNION ALL '.join(parts)})")
    for i in range(len(rules)):
        con.execute(f"DROP TABLE IF EXISTS __pdbq_key{i}")
    drop_word_tables(con, len(kinds))
    return int(con.execute(f"SELECT count(*) FROM {PAIRS}").fetchall()[0][0])
