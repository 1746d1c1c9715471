"""pdbq quickstart: define a small probabilistic model over ordinary tables and look at it.

    python examples/quickstart.py                 # in memory
    python examples/quickstart.py movies.duckdb   # in a DuckDB file: run it twice, the model persists

Tables hold what is known; CREATE VARIABLE declares one random variable per key row; CREATE RULE
adds weighted factors between them. pdbq validates every definition against the data when it is
created and stores it in the database itself.
"""

from __future__ import annotations

import sys

import pdbq

DATA = """
CREATE TABLE movies AS SELECT * FROM (VALUES ('Up'), ('Heat'), ('Twilight'), ('Avengers')) t(title);
CREATE TABLE people AS SELECT * FROM (VALUES ('ann'), ('bart'), ('carol'), ('bot7')) t(name);
CREATE TABLE tweets AS SELECT * FROM (VALUES
    ('ann', 'Up'), ('bart', 'Up'), ('carol', 'Up'), ('ann', 'Heat'),
    ('bart', 'Twilight'), ('bot7', 'Twilight'), ('carol', 'Avengers')) t(person, movie);
CREATE TABLE fan_labels AS SELECT * FROM (VALUES ('ann', TRUE)) t(name, fan);
"""

MODEL = """
-- random variables: is each movie popular? is each person a fan? (ann is known to be one)
CREATE VARIABLE is_popular(title TEXT) DOMAIN BOOLEAN FROM (SELECT title FROM movies);
CREATE VARIABLE is_fan(name TEXT) DOMAIN BOOLEAN
    FROM (SELECT name FROM people)
    EVIDENCE (SELECT name, fan FROM fan_labels);

-- a movie is popular when fans tweet about it (bots do not count); RATIO: diminishing returns
CREATE RULE fans_vote WEIGHT 0.9 SEMANTICS RATIO
    AS is_popular(^m) :- tweets(p, m), is_fan(p), p <> 'bot7';
-- most movies are not popular
CREATE RULE popular_prior WEIGHT -0.5 AS is_popular(m) :- movies(m);
"""


def main(path: str = ":memory:") -> None:
    with pdbq.connect(path) as db:
        if "is_popular" in db.catalog.variables():
            print(f"The model in {path} is already defined (catalog version {db.catalog.version()}).\n")
        else:
            db.execute(DATA + MODEL)
            print(f"Defined the model (catalog version {db.catalog.version()}).\n")

        print("SHOW VARIABLES;")
        print(db.execute("SHOW VARIABLES"), "\n")
        print("SHOW RULES;")
        print(db.execute("SHOW RULES"), "\n")

        # every variable relation is also a view: plain SQL sees one row per random variable
        print("SELECT * FROM is_popular;")
        print(db.execute("SELECT * FROM is_popular ORDER BY title"), "\n")

        # definitions are checked against the data when they are created
        bad = "CREATE RULE typo WEIGHT 1 AS is_popular(^m) :- tweet(p, m)"
        print(bad + ";")
        try:
            db.execute(bad)
        except pdbq.CatalogError as e:
            print(f"CatalogError: {e}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
