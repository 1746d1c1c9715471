"""The audit's reproducers of raw exceptions, unchecked allocations and unbounded file reads, each
a regression test: the error is a PdbqError naming the offending thing, the database is as it
was, nothing large is allocated before a check, and a UAI reader never echoes a file's content."""

from __future__ import annotations

import os
import sys

import pytest

import pdbq
import pdbq.memory
from pdbq.errors import CatalogError, EvidenceError, GroundingError, InferenceError, OptionError, ParseError, PdbqError
from pdbq.io.uai import UaiFormatError
from pdbq.progress import Cancelled, CancelToken

sys.path.insert(0, os.path.dirname(__file__))
from fuzz_corpus import MODEL, state  # noqa: E402


@pytest.fixture
def db():
    with pdbq.connect() as d:
        d.execute(MODEL)
        d.execute("CREATE TABLE nums AS SELECT range AS i FROM range(4)")
        d.execute("CREATE VARIABLE nb(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM nums)")
        yield d


def _fails_unchanged(db, text, error, pattern):
    before = state(db)
    with pytest.raises(error, match=pattern):
        db.execute(text)
    assert state(db) == before


# ------------------------------------------------------------------------------------ raw errors


def test_a_categorical_domain_beyond_32_bits_is_a_parse_error(db):
    _fails_unchanged(db, "CREATE VARIABLE g(person TEXT) DOMAIN CATEGORICAL(2147483648) FROM (SELECT person FROM people)",
                     ParseError, r"CATEGORICAL\(k\) takes at most k = 2,147,483,647")


def test_a_text_given_key_on_a_bigint_relation_is_an_evidence_error(db):
    _fails_unchanged(db, "SELECT PROB(n) FROM nb n GIVEN nb('abc') = TRUE USING EXACT",
                     EvidenceError, r"'nb': a key does not convert to its key columns \(i BIGINT\)")


def test_export_uai_of_a_cluster_relation_says_why_not(db, tmp_path):
    db.execute("CREATE TABLE recs(id INT); INSERT INTO recs VALUES (1), (2)")
    db.execute("CREATE VARIABLE ent(id INT) DOMAIN CLUSTER FROM (SELECT id FROM recs)")
    _fails_unchanged(db, f"EXPORT UAI ent TO '{tmp_path}/ent.uai'", PdbqError, "'ent' .* is a cluster relation")
    assert not (tmp_path / "ent.uai").exists()


@pytest.mark.parametrize("wrap", ["COPY ({q}) TO '{tmp}/x.csv'", "CREATE TABLE t1 AS {q}", "INSERT INTO people {q}"])
def test_a_malformed_number_inside_copy_or_ctas_is_a_parse_error(db, tmp_path, wrap):
    q = "SELECT c.person, PROB(c) FROM cancer c USING GIBBS WITH (steps = 1e)"
    _fails_unchanged(db, wrap.format(q=q, tmp=tmp_path), ParseError, r"'1e' is not a number")
    assert not (tmp_path / "x.csv").exists()


# ------------------------------------------------------------------------------------ UAI files


def test_a_file_that_is_not_uai_is_named_but_never_echoed(db, tmp_path):
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0:hunter2secret:/root:/bin/bash\nmore:lines\n")
    with pytest.raises(UaiFormatError) as err:
        db.execute(f"IMPORT UAI '{secret}' AS pw")
    assert "not a UAI file" in str(err.value) and "hunter2" not in str(err.value) and "root:x" not in str(err.value)
    if os.path.exists("/etc/passwd"):
        with pytest.raises(UaiFormatError, match="not a UAI file") as err:
            db.execute("IMPORT UAI '/etc/passwd' AS pw")
        assert "root:" not in str(err.value)


def test_a_long_bad_token_is_described_not_quoted(db, tmp_path):
    bad = tmp_path / "bad.uai"
    bad.write_text("MARKOV 2 2 2 1 2 0 1 4 1 2 3 secret_token_that_is_long\n")
    with pytest.raises(UaiFormatError, match=r"line 1: token 13 \(a 25-character token\) is not a number") as err:
        db.execute(f"IMPORT UAI '{bad}' AS m")
    assert "secret" not in str(err.value)
    evid = tmp_path / "e.evid"
    evid.write_text("root:x:0:0:hunter2secret\n")
    ok = tmp_path / "ok.uai"
    ok.write_text("MARKOV 1 2 1 1 0 2 1.0 2.0\n")
    with pytest.raises(UaiFormatError, match="not a UAI evidence file") as err:
        db.execute(f"IMPORT UAI '{ok}' AS m EVIDENCE '{evid}'")
    assert "hunter2" not in str(err.value)
    assert "m" not in [r[0] for r in db.execute("SHOW VARIABLES").fetchall()]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", ["/dev/urandom", "/dev/zero", "fifo", "binary"])
def test_devices_pipes_and_binary_files_are_refused_without_reading_them(db, tmp_path, path):
    if path == "fifo":
        path = str(tmp_path / "pipe")
        os.mkfifo(path)  # opening it for reading would wait for a writer forever
    elif path == "binary":
        path = str(tmp_path / "blob.uai")
        with open(path, "wb") as f:
            f.write(b"MARKOV \xff\xfe\x00\x01" * 100)
    elif not os.path.exists(path):
        pytest.skip(f"no {path} here")
    _fails_unchanged(db, f"IMPORT UAI '{path}' AS dev", UaiFormatError, "not a UAI file: not a regular file|not text")


def test_reading_a_uai_file_honours_cancel(db, tmp_path):
    big = tmp_path / "big.uai"
    with open(big, "w") as f:
        f.write("MARKOV 1 2 1 1 0 2 ")
        f.write("1 " * (20 << 20))  # 40 MB: several chunks
    token = CancelToken()
    token.cancel()
    before = state(db)
    with pytest.raises(Cancelled):
        db.execute(f"IMPORT UAI '{big}' AS big", cancel=token)
    assert state(db) == before


def test_a_uai_file_larger_than_memory_is_refused_before_reading(db, tmp_path, monkeypatch):
    f = tmp_path / "net.uai"
    f.write_text("MARKOV 1 2 1 1 0 2 1.0 2.0\n" + " " * 4096)
    monkeypatch.setattr(pdbq.memory, "available_bytes", lambda: 1024)
    _fails_unchanged(db, f"IMPORT UAI '{f}' AS net", InferenceError, r"reading the UAI file '.*net.uai'.* needs")


# ------------------------------------------------------------------------------------ memory


@pytest.mark.timeout(120)
def test_a_rule_over_a_huge_categorical_domain_lists_no_values(db, monkeypatch):
    # the head literal is checked by value: 2^31 values are never built as strings
    db.execute("CREATE VARIABLE g(person TEXT) DOMAIN CATEGORICAL(2147483647) FROM (SELECT person FROM people)")
    db.execute("CREATE RULE gr WEIGHT 1 AS g(p) = 2147483646 :- people(p)")
    _fails_unchanged(db, "CREATE RULE bad WEIGHT 1 AS g(p) = 2147483647 :- people(p)", CatalogError,
                     r"outside its CATEGORICAL\(2147483647\) domain")
    monkeypatch.setattr(pdbq.memory, "available_bytes", lambda: 1 << 30)
    for call, method in (("DIST", "GIBBS WITH (steps = 10)"), ("MAP", "ANNEAL WITH (steps = 10)")):
        _fails_unchanged(db, f"SELECT x.person, {call}(x) FROM g x WHERE x.person = 'Anna' USING {method}",
                         InferenceError, r"the 2,147,483,647 values of 1 variables .* needs 64.0 GiB")


CHAIN = """
CREATE TABLE t AS SELECT * FROM range({n}) r(i);
CREATE TABLE links AS SELECT i AS a, i + 1 AS b FROM t WHERE i + 1 < {n};
CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t);
CREATE RULE tie WEIGHT 0.8 FUNCTION EQUAL AS x(a) = x(b) :- links(a, b);
CREATE RULE pull WEIGHT 0.3 FUNCTION ISTRUE AS x(i) :- t(i), i % 3 = 0;
"""


@pytest.mark.parametrize("where, options, available, pattern", [
    # the audit's chains × tempering; memory left decides which check speaks first
    ("WHERE v.i = 0", "chains = 1024, tempering = 4", 100 << 10, r"the states of 1,024 chains over 200 variables .* lower chains"),
    ("", "chains = 1024", 10 << 20, r"the estimates of 1,024 chains for 200 variables .* lower chains"),
    ("WHERE v.i = 0", "chains = 16, tempering = 256", 1 << 20,
     r"16 chains × 256 tempered copies of 200 variables .* lower chains or tempering"),
])
def test_chain_copies_beyond_the_memory_left_are_refused_naming_the_option(monkeypatch, where, options, available, pattern):
    with pdbq.connect() as db:
        db.execute(CHAIN.format(n=200))
        monkeypatch.setattr(pdbq.memory, "available_bytes", lambda: available)
        before = state(db)
        with pytest.raises(InferenceError, match=pattern):
            db.execute(f"SELECT PROB(v) FROM x v {where} USING GIBBS WITH (steps = 10, {options})")
        assert state(db) == before


def test_a_cross_join_rule_beyond_the_memory_left_is_refused_before_it_is_materialized(monkeypatch):
    with pdbq.connect() as db:
        db.execute("CREATE TABLE p AS SELECT range AS i FROM range(100)")
        db.execute("CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM p)")
        db.execute("CREATE RULE big WEIGHT 0.1 FUNCTION AND AS x(a) :- x(b), x(c), p(a), p(b), p(c)")
        monkeypatch.setattr(pdbq.memory, "available_bytes", lambda: 10 << 20)
        before = state(db)
        with pytest.raises(GroundingError, match=r"rule 'big': its join yields more than [\d,]+ groundings, which need "
                                                 r"more than .* of memory"):
            db.execute("SELECT PROB(v) FROM x v WHERE v.i = 0 USING GIBBS WITH (steps = 10)")
        assert state(db) == before
        # the factor store holds no part of the refused grounding
        rows = db.execute("SELECT sum(estimated_size) FROM duckdb_tables() WHERE table_name LIKE 'pdbq_fs%big%'").fetchall()
        assert not rows[0][0]


# ------------------------------------------------------------------------------------ fuzzer findings


@pytest.mark.parametrize("text, error, pattern", [
    ("SELECT PROB(v) FROM smokes v GIVEN cancer(9223372036854775808) = FALSE", EvidenceError, "'cancer': a key cannot be"),
    ("SELECT PROB(v) FROM nb v GIVEN nb(9223372036854775808) = TRUE", EvidenceError, "'nb': a key cannot be"),
    ("SELECT PROB(v) FROM nb v GIVEN (SELECT ELECT i, TRUE FROM nums) AS nb", EvidenceError, r"GIVEN \(...\) AS nb: the query fails"),
    ("LEARN WEIGHTS WITH (sweeps = 4611686018427387904)", OptionError, "option 'sweeps' .* updates per epoch"),
])
def test_fuzzer_findings_are_pdbq_errors(db, text, error, pattern):
    _fails_unchanged(db, text, error, pattern)


@pytest.mark.parametrize("body", ["MARKOV nan 2 2", "MARKOV inf", "MARKOV 1 2 1 1 0 nan 1 2"])
def test_a_uai_count_that_is_not_a_number_is_a_format_error(db, tmp_path, body):
    f = tmp_path / "n.uai"
    f.write_text(body)
    _fails_unchanged(db, f"IMPORT UAI '{f}' AS n", UaiFormatError, "must be a non-negative integer")


def test_a_cluster_query_whose_select_duckdb_rejects_is_a_pdbq_error(db):
    db.execute("CREATE TABLE recs(id INT); INSERT INTO recs VALUES (1), (2)")
    db.execute("CREATE VARIABLE ent(id INT) DOMAIN CLUSTER FROM (SELECT id FROM recs)")
    _fails_unchanged(db, "SELECT v.id, MAP(v) FROM ent v WHERE v.id < 'Anna'", InferenceError,
                     "the query's SELECT could not run over its estimates: Conversion Error")


@pytest.mark.timeout(300)
def test_a_long_grounding_join_is_interrupted_by_cancel():
    import threading

    with pdbq.connect() as db:
        db.execute("CREATE TABLE p AS SELECT range AS i FROM range(3000)")
        db.execute("CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM p)")
        # 2.7e10 body rows summed into 9e6 factors: minutes of DuckDB work without the interrupt
        db.execute("CREATE RULE big WEIGHT 0.1 FUNCTION EQUAL AS x(a) = x(b) :- p(a), p(b), p(c), a + b + c > 0")
        before = state(db)
        token = CancelToken()
        timer = threading.Timer(2.0, token.cancel)
        timer.start()
        try:
            with pytest.raises(Cancelled, match="statement cancelled while"):
                db.execute("SELECT PROB(v) FROM x v WHERE v.i = 0 USING GIBBS WITH (steps = 10)", cancel=token)
        finally:
            timer.cancel()
        assert state(db) == before
        assert db.execute("SELECT count(*) FROM p").fetchall() == [(3000,)]  # the connection still works
