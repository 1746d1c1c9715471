-- pdbq catalog: the definitions of random-variable relations and rules, stored in the same
-- database as the data so that a model survives closing and reopening the file.
-- schema_version: 1
-- (pdbq/catalog/store.py reads the line above; bump it, and teach the code to migrate, whenever
--  these tables change. A file whose version is newer than the library's is refused unopened.)
--
-- No PRIMARY KEY constraints: DuckDB's indexes reject deleting and re-inserting one key inside a
-- single transaction (what CREATE OR REPLACE does), so uniqueness is enforced by the catalog code.

CREATE TABLE IF NOT EXISTS pdbq_meta (
    key   VARCHAR NOT NULL,  -- 'schema_version' | 'catalog_version'
    value VARCHAR NOT NULL
);

CREATE TABLE IF NOT EXISTS pdbq_variables (
    name        VARCHAR   NOT NULL,  -- lower-cased; also the name of a VIEW over the key rows
    key_names   VARCHAR[] NOT NULL,  -- declared key column names
    key_types   VARCHAR[] NOT NULL,  -- their canonical DuckDB types (TEXT is stored as VARCHAR)
    domain      VARCHAR   NOT NULL,  -- BOOLEAN | ('a', 'b', ...) | CATEGORICAL(k)
    cardinality INTEGER   NOT NULL,  -- number of values of each variable (the largest, see below)
    per_row_cardinality BOOLEAN NOT NULL,  -- importers: the FROM query's last column is each row's own
    source      VARCHAR   NOT NULL,  -- the FROM query
    evidence    VARCHAR,             -- the EVIDENCE query, or NULL
    definition  VARCHAR   NOT NULL,  -- the statement as written: re-parsed to rebuild the node
    version     BIGINT    NOT NULL   -- the catalog version this definition was created at
);

CREATE TABLE IF NOT EXISTS pdbq_rules (
    name        VARCHAR   NOT NULL,  -- lower-cased
    rule        VARCHAR   NOT NULL,  -- head :- body atoms, conditions (normalised text)
    weight      VARCHAR   NOT NULL,  -- 0.8 | ? | ?(sym, ...) | = expr
    semantics   VARCHAR   NOT NULL,  -- LINEAR | LOGICAL | RATIO
    function    VARCHAR   NOT NULL,  -- VOTE | IMPLY | AND | OR | EQUAL | ISTRUE | ...
    relations   VARCHAR[] NOT NULL,  -- every relation the rule's atoms name (DROP checks)
    definition  VARCHAR   NOT NULL,
    version     BIGINT    NOT NULL
);
