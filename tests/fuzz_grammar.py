"""A grammar of pdbq statements for hypothesis (tests/test_fuzz_statements.py, examples/bench/fuzz.py).

Each drawn statement is a valid statement of one kind (a query with each method and option, a
query inside COPY / CREATE TABLE AS / INSERT / EXPLAIN, nested, CREATE VARIABLE with odd
domains, CREATE RULE, LEARN WEIGHTS, IMPORT/EXPORT UAI, DROP, SHOW) whose leaves are drawn
from values at the edges: numbers such as 2147483648, 1e, -0, nan, 1e400, wrong-typed keys
(text for a BIGINT key, a float for a text key), NULL, unknown names; about one in four is then
mutated character-wise as `fuzz_corpus.mutate` does. They run against the smokers model of
`fuzz_corpus` plus relations with BIGINT keys, a value domain, CATEGORICAL and CLUSTER domains
(`EXTRA`), through `fuzz_corpus.run_case`: a failure must be a `PdbqError` that leaves the
catalog, the data and the learned weights as they were.
"""

from __future__ import annotations

import os
import random
import time

from fuzz_corpus import MODEL, Outcome, mutate, run_case, state
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

import pdbq

EXTRA = """
CREATE TABLE nums AS SELECT range AS i FROM range(4);
CREATE TABLE pairs AS SELECT a.i AS a, b.i AS b FROM nums a, nums b WHERE a.i < b.i;
CREATE VARIABLE nb(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM nums);
CREATE VARIABLE grade(person TEXT) DOMAIN ('a', 'b', 'c') FROM (SELECT person FROM people);
CREATE VARIABLE level(i BIGINT) DOMAIN CATEGORICAL(3) FROM (SELECT i FROM nums);
CREATE RULE nb_tie WEIGHT 0.5 FUNCTION EQUAL AS nb(a) = nb(b) :- pairs(a, b);
CREATE RULE level_up WEIGHT 0.3 AS level(i) = 2 :- nums(i), i > 1;
CREATE RULE good_grade WEIGHT 0.4 AS grade(p) = 'a' :- smoking(p, s), NOT s;
CREATE TABLE recs(id INT, name TEXT);
INSERT INTO recs VALUES (1, 'ann'), (2, 'anne'), (3, 'bob');
CREATE VARIABLE ent(id INT) DOMAIN CLUSTER FROM (SELECT id FROM recs);
"""

# (relation, key columns' sample keys as SQL, whether boolean, values of the domain as SQL)
RELATIONS = {
    "smokes": (["'Anna'", "'Bob'", "'Zed'"], ["TRUE", "FALSE"]),
    "cancer": (["'Chris'", "'Daniel'"], ["TRUE", "FALSE"]),
    "nb": (["0", "3", "7"], ["TRUE", "FALSE"]),
    "grade": (["'Anna'", "'Edward'"], ["'a'", "'c'"]),
    "level": (["1", "2"], ["0", "2"]),
    "ent": (["1", "2"], ["1"]),
}
KEY_COLUMN = {"smokes": "person", "cancer": "person", "nb": "i", "grade": "person", "level": "i", "ent": "id"}

EXTREME_NUMBERS = ["2147483648", "2147483647", "-2147483649", "9223372036854775808", "4611686018427387904",
                   "1e", "1e400", "-1e400", "1e-400", "-0", "0", "-1", "0.5", "1e308", "1e20", "-1e20",
                   "'nan'", "'inf'", "'-inf'", "NULL", "1" + "0" * 40, "1.5", "3", "2"]
ODD_KEYS = ["'abc'", "''", "1.5", "-0", "2147483648", "9223372036854775808", "NULL", "TRUE", "'Anna'", "1e",
            "'nan'", "x'00'", "[1, 2]", "{'a': 1}", "DATE '2020-01-01'"]
ODD_VALUES = ["TRUE", "FALSE", "NULL", "0", "1", "2", "3", "-1", "2147483648", "'a'", "'d'", "'TRUE'", "1.5",
              "'nan'", "1e", "-0"]
OPTIONS = ["steps", "sweeps", "burn_in", "chains", "threads", "seed", "time_limit", "tolerance", "selection", "epsilon",
           "power", "max_table", "exact_budget", "temperature", "cooling", "tempering", "blocks", "block_table",
           "clusters", "jumps", "cutset", "cutset_table", "workers", "bogus", "scheduler"]
OPTION_VALUES = EXTREME_NUMBERS + ["'auto'", "'off'", "TRUE", "FALSE", "'trail'", "'mi'", "'nonsense'",
                                   "'tcp://127.0.0.1:1'", "'tcp://'", "''"]
METHODS = ["EXACT", "GIBBS", "QAM", "AUTO", "ANNEAL", "MAGIC"]
LEARN_OPTIONS = ["epochs", "seed", "learning_rate", "reg", "holdout", "chains", "sweeps", "method", "decay", "bogus"]


def pick(items: list[str]) -> st.SearchStrategy[str]:
    return st.sampled_from(items)


@st.composite
def options(draw, names: list[str] = OPTIONS) -> str:
    n = draw(st.integers(0, 3))
    pairs = [f"{draw(pick(names))} = {draw(pick(OPTION_VALUES))}" for _ in range(n)]
    # a bounded run in most cases, so the fuzzer explores statements rather than waits on samplers
    if draw(st.integers(0, 4)):
        pairs.append(draw(pick(["steps = 50", "sweeps = 2", "time_limit = 0.5", "steps = 20, chains = 2"])))
    return f" WITH ({', '.join(pairs)})" if pairs else ""


@st.composite
def key_of(draw, rel: str) -> str:
    keys, _ = RELATIONS[rel]
    return draw(st.one_of(pick(keys), pick(ODD_KEYS)))


@st.composite
def given_clause(draw) -> str:
    atoms = []
    for _ in range(draw(st.integers(1, 3))):
        rel = draw(pick(list(RELATIONS)))
        _, values = RELATIONS[rel]
        value = draw(st.one_of(pick(values), pick(ODD_VALUES)))
        atoms.append(f"{rel}({draw(key_of(rel))}) = {value}")
    if draw(st.integers(0, 5)) == 0:
        atoms.append(f"(SELECT i, {draw(pick(ODD_VALUES))} FROM nums) AS nb")
    return " GIVEN " + ", ".join(atoms)


@st.composite
def query(draw) -> str:
    rel = draw(pick(list(RELATIONS)))
    alias = "v"
    _, values = RELATIONS[rel]
    key = f"{alias}.{KEY_COLUMN[rel]}"
    calls = draw(st.lists(pick([f"PROB({alias})", f"DIST({alias})", f"MAP({alias})", f"STDERR({alias})",
                                f"PROB({alias} = {draw(st.one_of(pick(values), pick(ODD_VALUES)))})",
                                f"PROB({alias}) * {draw(pick(EXTREME_NUMBERS))}"]), min_size=1, max_size=2))
    cols = ", ".join([key] + [f"{c} AS c{i}" for i, c in enumerate(calls)])
    text = f"SELECT {cols} FROM {rel} {alias}"
    if draw(st.booleans()):
        op = draw(pick(["=", "<>", "<", "IN"]))
        rhs = f"({draw(key_of(rel))}, {draw(key_of(rel))})" if op == "IN" else draw(key_of(rel))
        text += f" WHERE {key} {op} {rhs}"
    if draw(st.booleans()):
        text += draw(given_clause())
    if draw(st.integers(0, 5)):
        text += f" USING {draw(pick(METHODS))}{draw(options())}"
    return text


@st.composite
def wrapped(draw, tmp: str) -> str:
    inner = draw(query())
    for _ in range(draw(st.integers(0, 2))):
        if draw(st.booleans()):
            inner = f"SELECT * FROM ({inner})"  # a subquery around the probabilistic query
    kind = draw(pick(["copy", "ctas", "insert", "explain", "explain_copy"]))
    if kind == "copy":
        fmt = draw(pick(["", " (HEADER)", " (FORMAT PARQUET)", " (FORMAT 'nonsense')"]))
        return f"COPY ({inner}) TO '{tmp}/out_{draw(st.integers(0, 3))}.csv'{fmt}"
    if kind == "ctas":
        return f"CREATE {draw(pick(['', 'OR REPLACE ', 'TEMP ']))}TABLE answers_{draw(st.integers(0, 2))} AS {inner}"
    if kind == "insert":
        return f"INSERT INTO {draw(pick(['people', 'nums', 'recs', 'missing']))} {inner}"
    if kind == "explain":
        return f"EXPLAIN {inner}"
    return f"COPY (EXPLAIN {inner}) TO '{tmp}/explain.csv'"


@st.composite
def domain(draw) -> str:
    return draw(pick([
        "BOOLEAN", "CLUSTER", "('a')", "('a', 'a')", "('a', 'b', NULL)", "()", "(1, 2)", "('', ' ')",
        f"CATEGORICAL({draw(pick(['0', '1', '2', '3', '256', '257', '65536', '2147483647', '2147483648', '9223372036854775808', '1e', '-1', '1.5', '1' + '0' * 30]))})",
    ]))


@st.composite
def create_variable(draw) -> str:
    name = draw(pick(["fresh", "smokes", "grade", "nb", "people"]))
    ktype = draw(pick(["TEXT", "BIGINT", "INTEGER", "HUGEINT", "DOUBLE", "BOOLEAN", "DATE", "BLOB", "INT[]"]))
    source = draw(pick(["SELECT person FROM people", "SELECT i FROM nums", "SELECT NULL", "SELECT 'x' UNION ALL SELECT 'x'",
                        "SELECT i::TEXT FROM nums", "SELECT 2147483648", "SELECT 'nan'::DOUBLE", "SELECT * FROM missing"]))
    text = f"CREATE {draw(pick(['', 'OR REPLACE ']))}VARIABLE {name}(k {ktype}) DOMAIN {draw(domain())} FROM ({source})"
    if draw(st.booleans()):
        text += f" EVIDENCE (SELECT person, {draw(pick(ODD_VALUES))} FROM people)"
    return text


@st.composite
def create_rule(draw) -> str:
    weight = draw(st.one_of(pick(EXTREME_NUMBERS), pick(["?", "?(person)", "= 1 / 0", "= 'a'", "= 1e308 * 10"])))
    head_rel = draw(pick(["smokes", "cancer", "grade", "level", "nb"]))
    _, values = RELATIONS[head_rel]
    sym = "i" if head_rel in ("level", "nb") else "p"
    table = "nums(i)" if sym == "i" else "people(p)"
    head = f"{head_rel}({sym})"
    if head_rel in ("grade", "level") or draw(st.booleans()):
        head += f" = {draw(st.one_of(pick(values), pick(ODD_VALUES)))}"
    body = [table]
    for _ in range(draw(st.integers(0, 2))):  # joins, up to a 3-way cross join of the key table
        body.append(draw(pick([f"{table.split('(')[0]}(q{len(body)})", f"{sym} <> {draw(pick(ODD_KEYS))}",
                               "smokes(p)" if sym == "p" else "nb(i)"])))
    func = draw(pick(["", " FUNCTION IMPLY_MLN", " FUNCTION EQUAL", " FUNCTION ISTRUE", " FUNCTION TABLE", " FUNCTION NOPE"]))
    sem = draw(pick(["", " SEMANTICS RATIO", " SEMANTICS LOGICAL", " SEMANTICS BOGUS"]))
    return f"CREATE RULE fz_{draw(st.integers(0, 2))} WEIGHT {weight}{func}{sem} AS {head} :- {', '.join(body)}"


@st.composite
def learn(draw) -> str:
    target = draw(pick(["", " FOR friends_smoke_alike", " FOR nothing", " FOR smoking_causes_cancer"]))
    return f"LEARN WEIGHTS{target}{draw(options(LEARN_OPTIONS))}"


@st.composite
def uai(draw, tmp: str) -> str:
    if draw(st.booleans()):
        rel = draw(pick(list(RELATIONS) + ["missing"]))
        return f"EXPORT UAI {rel} TO '{tmp}/{draw(pick(['m.uai', 'sub/none.uai', '']))}'"
    path = draw(pick([f"{tmp}/rand.uai", f"{tmp}/missing.uai", "/dev/null", "/dev/zero", "/etc/hostname", tmp,
                      f"{tmp}/rand.uai' EVIDENCE '{tmp}/rand.uai"]))
    return f"IMPORT UAI '{path}' AS {draw(pick(['imp', 'smokes', 'select']))}"


def random_uai_file(tmp: str, rng: random.Random) -> None:
    """A file that is nearly a UAI network: numbers at the edges, some tokens wrong."""
    nums = [rng.choice(["2", "3", "1", "0", "2147483648", "1e", "-1", "nan", "1e400", "x", "\u00e9"]) for _ in range(rng.randint(0, 24))]
    with open(os.path.join(tmp, "rand.uai"), "w", encoding="utf-8") as f:
        f.write(rng.choice(["MARKOV ", "BAYES ", "", "markov "]) + " ".join(nums))


@st.composite
def simple(draw) -> str:
    return draw(pick(["SHOW RULES", "SHOW VARIABLES", "SHOW WEIGHTS", "SHOW CALIBRATION", "DROP RULE IF EXISTS nothing",
                      "DROP VARIABLE grade", "DROP RULE nb_tie", "DROP VARIABLE missing", "EXPLAIN MATCH ent(1, 2)"]))


def statements(tmp: str) -> st.SearchStrategy[str]:
    """Statements of every kind (plus a character-wise mutation of one in four)."""
    base = st.one_of(query(), query(), wrapped(tmp), wrapped(tmp), create_variable(), create_rule(), learn(),
                     uai(tmp), simple())

    @st.composite
    def maybe_mutated(draw) -> str:
        text = draw(base)
        if draw(st.integers(0, 3)) == 0:
            text = mutate(text, random.Random(draw(st.integers(0, 2**32 - 1))))
        return text

    return maybe_mutated()


def grammar_db() -> pdbq.Database:
    db = pdbq.connect()
    db.execute(MODEL)
    db.execute(EXTRA)
    return db


def grammar_fuzz(n: int, seconds: float, seed: int, tmp: str, report=None) -> Outcome:
    """Up to ``n`` statements drawn from `statements` (hypothesis, from ``seed``) within about
    ``seconds``, each run by `run_case` on the grammar's model; a statement that changed the
    model (a CREATE that succeeded) is followed by a fresh model. ``report(kind, text, error)`` is
    called on each finding as it happens (long runs)."""
    out = Outcome()
    stop = time.monotonic() + seconds
    holder = [grammar_db()]
    clean = [state(holder[0])]

    @hypothesis_seed(seed)
    @settings(max_examples=n, deadline=None, database=None, phases=(Phase.generate,),
              suppress_health_check=list(HealthCheck))
    @given(text=statements(tmp), uai_seed=st.integers(0, 2**32 - 1))
    def case(text: str, uai_seed: int) -> None:
        if time.monotonic() > stop:
            return
        random_uai_file(tmp, random.Random(uai_seed))
        found = len(out.non_pdbq), len(out.changed)
        changed = run_case(holder[0], text, out)
        if report is not None:
            for kind, rows, k in (("non-PdbqError", out.non_pdbq, found[0]), ("changed state", out.changed, found[1])):
                for row in rows[k:]:
                    report(kind, *row)
        if changed and state(holder[0]) != clean[0]:
            holder[0].close()
            holder[0] = grammar_db()
            clean[0] = state(holder[0])

    here = os.getcwd()
    os.chdir(tmp)  # a mutated COPY target may be a relative path
    try:
        case()
    finally:
        holder[0].close()
        os.chdir(here)
    return out


__all__ = ["EXTRA", "statements", "random_uai_file", "grammar_db", "grammar_fuzz"]
