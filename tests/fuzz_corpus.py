"""A seeded mutation fuzzer for pdbq's own statements (shared by tests/test_fuzz_statements.py and
examples/bench/fuzz.py).

Seeds: the pdbq statements of examples/*.sql and of the ```sql blocks in docs/*.md, plus
templates for every statement kind (queries with each method and option, LEARN WEIGHTS, COPY /
CREATE TABLE AS / INSERT around a query, IMPORT/EXPORT UAI, EXPLAIN, SHOW), all run against the
smokers model. A mutation inserts a keyword or punctuation, deletes or duplicates a span, swaps
a number for an extreme one (10^400, 2^62, -1, 0, 1e-300, NaN text) or nests a span in many
parentheses. Only statements that parse as pdbq statements are run (plain SQL is DuckDB's).

`run_case` checks the audit's rule: a failure is a `PdbqError`, and leaves the catalog, the data
and the learned weights as they were; a statement is cancelled after `CASE_SECONDS` (its
`CancelToken`) and counted as a hang if it still has not returned `HANG_SECONDS` later.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

import pdbq
from pdbq.errors import ParseError
from pdbq.language.nodes import PassThrough
from pdbq.language.parser import parse_script
from pdbq.progress import CancelToken

ROOT = Path(__file__).resolve().parents[1]
CASE_SECONDS = 3.0
HANG_SECONDS = 60.0  # beyond a first numba compilation of a kernel variant on a loaded machine

MODEL = """
CREATE TABLE people(person TEXT);
INSERT INTO people VALUES ('Anna'), ('Bob'), ('Chris'), ('Daniel'), ('Edward');
CREATE TABLE friends(a TEXT, b TEXT);
INSERT INTO friends VALUES ('Anna', 'Bob'), ('Bob', 'Chris'), ('Chris', 'Daniel'), ('Daniel', 'Edward');
CREATE TABLE smoking(person TEXT, smokes BOOLEAN);
INSERT INTO smoking VALUES ('Anna', TRUE), ('Edward', TRUE), ('Chris', FALSE);
CREATE TABLE diagnoses(person TEXT, cancer BOOLEAN);
INSERT INTO diagnoses VALUES ('Daniel', TRUE);
CREATE VARIABLE smokes(person TEXT) DOMAIN BOOLEAN FROM (SELECT person FROM people)
    EVIDENCE (SELECT person, smokes FROM smoking);
CREATE VARIABLE cancer(person TEXT) DOMAIN BOOLEAN FROM (SELECT person FROM people)
    EVIDENCE (SELECT person, cancer FROM diagnoses);
CREATE RULE smoking_causes_cancer WEIGHT 1.5 FUNCTION IMPLY_MLN AS cancer(x) :- smokes(x);
CREATE RULE friends_smoke_alike WEIGHT ? FUNCTION EQUAL AS smokes(a) = smokes(b) :- friends(a, b);
CREATE RULE few_smoke WEIGHT -0.4 FUNCTION ISTRUE AS smokes(x) :- people(x);
"""

TEMPLATES = [
    "SELECT c.person, PROB(c) AS p FROM cancer c ORDER BY c.person USING EXACT",
    "SELECT c.person, MAP(c) FROM cancer c USING ANNEAL WITH (seed = 1, steps = 200)",
    "SELECT s.person, PROB(s), STDERR(s) FROM smokes s USING GIBBS WITH (seed = 2, steps = 300, chains = 2)",
    "SELECT s.person, PROB(s) FROM smokes s WHERE s.person = 'Bob' GIVEN cancer('Bob') = TRUE USING EXACT",
    "SELECT s.person, PROB(s) FROM smokes s USING QAM WITH (seed = 3, steps = 300, selection = 'trail', epsilon = 0.1)",
    "SELECT PROB(s) FROM smokes s USING AUTO WITH (seed = 4, time_limit = 1, max_table = 1024)",
    "SELECT PROB(s) FROM smokes s USING GIBBS WITH (seed = 5, steps = 200, tempering = 2, jumps = 2, blocks = 'auto')",
    "SELECT PROB(s) FROM smokes s USING GIBBS WITH (seed = 6, steps = 200, cutset = true, cutset_table = 16)",
    "EXPLAIN SELECT c.person, PROB(c) FROM cancer c USING EXACT",
    "LEARN WEIGHTS WITH (epochs = 3, seed = 1, learning_rate = 0.1, reg = 0.01)",
    "LEARN WEIGHTS FOR friends_smoke_alike WITH (epochs = 2, holdout = 0.3, chains = 2, sweeps = 2)",
    "CREATE TABLE answers AS SELECT c.person, PROB(c) AS p FROM cancer c USING EXACT",
    "INSERT INTO people SELECT c.person || 'x' FROM cancer c WHERE PROB(c) > 2 USING EXACT",
    "COPY (SELECT c.person, PROB(c) AS p FROM cancer c USING EXACT) TO '{tmp}/answer.csv' (HEADER)",
    "EXPORT UAI cancer TO '{tmp}/model.uai'",
    "IMPORT UAI '{tmp}/missing.uai' AS net",
    "CREATE RULE extra WEIGHT 0.3 FUNCTION ISTRUE AS cancer(x) :- people(x), x <> 'Anna'",
    "CREATE VARIABLE grade(person TEXT) DOMAIN ('a', 'b', 'c') FROM (SELECT person FROM people)",
    "DROP RULE IF EXISTS nothing",
    "SHOW RULES", "SHOW VARIABLES", "SHOW WEIGHTS",
]

PIECES = ["(", ")", ",", ";", "'", '"', ":-", "^", "=", "?", "NOT ", "AS ", "WEIGHT ", "DOMAIN ", "FROM ", "WHERE ",
          "GIVEN ", "USING ", "WITH (", "PROB(", "MAP(", "DIST(", "STDERR(", "EXPLAIN ", "--", "/*", "\n", "\x00",
          "NULL", "TRUE", "1e400", "-1", "smokes", "cancer", "c.name", "time_limit = 1, ", "chains = 1024, ",
          "tempering = 4611686018427387904, ", "scheduler = 'nonsense', ", "max_table = 4611686018427387904, "]
NUMBERS = ["1" + "0" * 400, "4611686018427387904", "-1", "0", "1e-300", "1e308", "0.5", "'nan'", "99999999999"]


def doc_statements() -> list[str]:
    """pdbq statements of the ```sql blocks in docs/ and of examples/*.sql."""
    texts = [p.read_text() for p in sorted((ROOT / "examples").glob("*.sql"))]
    for p in sorted((ROOT / "docs").glob("*.md")):
        texts += re.findall(r"```sql\n(.*?)```", p.read_text(), flags=re.S)
    out = []
    for text in texts:
        try:
            stmts = parse_script(text)
        except pdbq.PdbqError:
            continue
        out += [s.text for s in stmts if not isinstance(s, PassThrough) and getattr(s, "text", "")]
    return out


def seeds() -> list[str]:
    return TEMPLATES + doc_statements()


def mutate(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 2)):
        op = rng.choice(("insert", "insert", "delete", "duplicate", "number", "number", "nest"))
        i = rng.randint(0, len(text))
        j = min(len(text), i + rng.randint(1, 12))
        if op == "insert":
            text = text[:i] + rng.choice(PIECES) + text[i:]
        elif op == "delete":
            text = text[:i] + text[j:]
        elif op == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        elif op == "number":
            nums = list(re.finditer(r"(?<![\w.])\d+(\.\d+)?(e-?\d+)?", text))
            if nums:
                m = rng.choice(nums)
                text = text[: m.start()] + rng.choice(NUMBERS) + text[m.end():]
        else:
            k = rng.choice((50, 300, 1200))
            text = text[:i] + "(" * k + text[i:j] + ")" * k + text[j:]
    return text


def fresh_db() -> pdbq.Database:
    db = pdbq.connect()
    db.execute(MODEL)
    return db


def state(db: pdbq.Database) -> tuple:
    """What a failed statement must leave unchanged: catalog, user data, learned weights."""
    con = db.duckdb
    # the factor store (pdbq_fs_*) is a cache a failed statement may have filled
    tables = sorted(r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT internal").fetchall()
                    if not r[0].startswith("pdbq_fs_"))
    data = []
    for t in tables:
        data.append((t, con.execute(f'SELECT count(*), sum(hash(x)) FROM "{t}" x').fetchall()))
    return (tuple(db.execute("SHOW VARIABLES").fetchall()), tuple(db.execute("SHOW RULES").fetchall()),
            tuple(db.execute("SHOW WEIGHTS").fetchall()), tuple(tables), tuple(data))


@dataclass
class Outcome:
    cases: int = 0
    ran: int = 0  # parsed as pdbq statements and executed
    ok: int = 0
    pdbq_errors: int = 0
    non_pdbq: list = field(default_factory=list)  # (text, error)
    changed: list = field(default_factory=list)  # (text, error): a failure that changed the state
    hangs: list = field(default_factory=list)
    seconds: float = 0.0


def run_case(db: pdbq.Database, text: str, out: Outcome) -> bool:
    """Run one case; True when the database may have changed (a success) and should be rebuilt."""
    out.cases += 1
    try:
        stmts = parse_script(text)
    except pdbq.PdbqError:
        out.pdbq_errors += 1
        return False
    except BaseException as exc:  # noqa: BLE001 - the fuzzer's finding
        out.non_pdbq.append((text, f"{type(exc).__name__}: {exc}"[:300]))
        return False
    if len(stmts) != 1 or isinstance(stmts[0], PassThrough):
        return False
    out.ran += 1
    before = state(db)
    token = CancelToken()
    timer = threading.Timer(CASE_SECONDS, token.cancel)
    timer.start()
    t0 = time.perf_counter()
    try:
        db.execute(text, cancel=token)
        out.ok += 1
        return True
    except pdbq.PdbqError as exc:
        out.pdbq_errors += 1
        if state(db) != before:
            out.changed.append((text, f"{type(exc).__name__}: {exc}"[:300]))
            return True
        return False
    except BaseException as exc:  # noqa: BLE001
        out.non_pdbq.append((text, f"{type(exc).__name__}: {exc}"[:300]))
        return True
    finally:
        timer.cancel()
        took = time.perf_counter() - t0
        out.seconds += took
        if took > CASE_SECONDS + HANG_SECONDS:
            out.hangs.append((text, took))


def fuzz(n: int, seed: int, tmp: str) -> Outcome:
    """``n`` mutated cases from the seed corpus, reproducible from ``seed``."""
    rng = random.Random(seed)
    corpus = [s.replace("{tmp}", tmp) for s in seeds()]
    out = Outcome()
    here = os.getcwd()
    os.chdir(tmp)  # the docs' COPY ... TO 'risk.parquet' writes relative to the working folder
    db = fresh_db()
    try:
        for _ in range(n):
            if run_case(db, mutate(rng.choice(corpus), rng), out):
                db.close()
                db = fresh_db()
    finally:
        db.close()
        os.chdir(here)
    return out


__all__ = ["fuzz", "seeds", "mutate", "run_case", "Outcome", "ParseError", "duckdb"]
