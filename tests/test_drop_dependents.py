"""DROP TABLE / DROP VIEW of a relation the model reads: refused with a CatalogError naming the rules
and variable relations that read it (directly or through views), or with CASCADE dropped together
with them, in one transaction; the same through the Python API, the shell and pdbq's UDF door.

The property test draws a random model (tables, views over them, variables and rules reading
either) and checks the refusal and the cascade against a reference dependency closure computed
here from what was drawn."""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pdbq
from pdbq.errors import CatalogError
from pdbq.shell.repl import Shell

SENSORS = """
CREATE TABLE sensors AS SELECT * FROM (VALUES (1, 'a'), (2, 'a'), (3, 'b')) t(x, s);
CREATE TABLE sites AS SELECT DISTINCT s FROM sensors;
CREATE TABLE readings AS SELECT * FROM sensors;
CREATE VARIABLE faulty(x INT) DOMAIN BOOLEAN FROM (SELECT x FROM sensors);
CREATE VARIABLE overheat(s TEXT) DOMAIN BOOLEAN FROM (SELECT s FROM sites);
CREATE RULE fault_prior AS 0.05::faulty(x) :- sensors(x, s);
CREATE RULE heat AS 0.3::overheat(s) :- sites(s);
CREATE RULE spread WEIGHT 1.0 AS faulty(x) :- overheat(s), readings(x, s);
"""


def _catalog(db) -> tuple[set, set]:
    return ({r[0] for r in db.execute("SHOW RULES").fetchall()}, {r[0] for r in db.execute("SHOW VARIABLES").fetchall()})


def test_drop_table_read_by_the_model_is_refused_naming_its_readers() -> None:
    with pdbq.connect() as db:
        db.execute(SENSORS)
        before = _catalog(db)
        with pytest.raises(CatalogError, match=r"cannot drop table sensors: rule fault_prior and variable relation "
                                               r"faulty read it; .* DROP TABLE sensors CASCADE"):
            db.execute("DROP TABLE sensors")
        assert db.execute("SELECT count(*) FROM sensors").fetchone() == (3,) and _catalog(db) == before
        with pytest.raises(CatalogError, match="'faulty' is a variable relation, not a view: use DROP VARIABLE faulty"):
            db.execute("DROP VIEW faulty")
        db.execute("DROP TABLE IF EXISTS not_there")  # DuckDB's own behaviour stays
        db.execute("DROP TABLE sensors CASCADE")
        # the rules reading it, the variable reading it, and the rule using that variable are gone
        assert _catalog(db) == ({"heat"}, {"overheat"})
        assert db.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'sensors'").fetchone() == (0,)
        assert db.execute("SELECT PROB(o) FROM overheat o USING EXACT").fetchall() == [(pytest.approx(0.3),)] * 2


def test_a_failing_drop_after_the_cascade_check_leaves_everything() -> None:
    with pdbq.connect() as db:
        db.execute(SENSORS)
        db.execute("CREATE INDEX on_x ON sensors(x)")
        before = _catalog(db)
        try:  # whatever DuckDB says of the index, the catalog and the table go or stay together
            db.execute("DROP TABLE sensors CASCADE")
        except pdbq.PdbqError:
            assert _catalog(db) == before
        else:
            assert _catalog(db) == ({"heat"}, {"overheat"})


def test_the_shell_and_the_udf_door_refuse_it_too(tmp_path) -> None:
    with pdbq.connect() as db:
        db.execute(SENSORS)
        shell = Shell(db, out=io.StringIO(), err=io.StringIO(), progress=False)
        shell.run_text("DROP TABLE sites;")
        assert shell.failed and "rule heat and variable relation overheat read it" in shell.err.getvalue()
        assert _catalog(db)[0] == {"fault_prior", "heat", "spread"}
    from pdbq.udf.doors import connect  # noqa: PLC0415

    with connect(tmp_path / "m.duckdb") as db:
        db.execute(SENSORS)
        with pytest.raises(CatalogError, match="cannot drop table sites"):
            db.execute("DROP TABLE sites")
        assert db.duckdb.execute("SELECT round(pdbq_prob('overheat', 'a'), 6) AS p").fetchall()[0][0] > 0


# ------------------------------------------------------------------------ property: random models


@st.composite
def models(draw):
    tables = [f"t{i}" for i in range(draw(st.integers(1, 4)))]
    views = {}
    for i in range(draw(st.integers(0, 3))):  # each view reads one earlier table or view
        views[f"w{i}"] = draw(st.sampled_from(tables + list(views)))
    relations = tables + list(views)
    variables = {f"v{i}": draw(st.sampled_from(relations)) for i in range(draw(st.integers(1, 3)))}
    rules = {}
    for i in range(draw(st.integers(0, 4))):
        head = draw(st.sampled_from(sorted(variables)))
        body = draw(st.lists(st.sampled_from(relations), min_size=1, max_size=2, unique=True))
        rules[f"r{i}"] = (head, body)
    target = draw(st.sampled_from(relations))
    return tables, views, variables, rules, target, draw(st.booleans())


def _reference(views, variables, rules, target):
    reached = {target}
    while True:
        more = {v for v, read in views.items() if read in reached} - reached
        if not more:
            break
        reached |= more
    readers = {v for v, read in variables.items() if read in reached}
    direct = {r for r, (_, body) in rules.items() if reached & set(body)}
    return direct, readers, direct | {r for r, (head, _) in rules.items() if head in readers}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(models())
def test_drop_matches_the_dependency_closure(model) -> None:
    tables, views, variables, rules, target, cascade = model
    script = [f"CREATE TABLE {t} AS SELECT range AS k FROM range(3);" for t in tables]
    script += [f"CREATE VIEW {v} AS SELECT k FROM {read};" for v, read in views.items()]
    script += [f"CREATE VARIABLE {v}(k BIGINT) DOMAIN BOOLEAN FROM (SELECT k FROM {read});" for v, read in variables.items()]
    script += [f"CREATE RULE {r} WEIGHT 0.5 AS {head}(k) :- {', '.join(f'{b}(k)' for b in body)};"
               for r, (head, body) in rules.items()]
    direct, readers, cascaded = _reference(views, variables, rules, target)
    kind = "TABLE" if target in tables else "VIEW"
    with pdbq.connect() as db:
        db.execute("\n".join(script))
        before = _catalog(db)
        statement = f"DROP {kind} {target}{' CASCADE' if cascade else ''}"
        if (direct or readers) and not cascade:
            with pytest.raises(CatalogError) as caught:
                db.execute(statement)
            for name in direct | readers:
                assert f" {name}" in str(caught.value), (statement, str(caught.value))
            assert _catalog(db) == before
        else:
            db.execute(statement)
            assert _catalog(db) == (before[0] - cascaded, before[1] - readers), statement
