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

-- Learned weights (LEARN WEIGHTS, docs/learning.md), versioned: each successful run adds one
-- pdbq_weight_versions row and the values it learned; queries use the latest value of each
-- weight whose rule definition is unchanged (rule_hash = the factor store's def_hash). Created
-- by the first LEARN WEIGHTS (CREATE TABLE IF NOT EXISTS: older catalogs gain them then).
CREATE TABLE IF NOT EXISTS pdbq_weight_versions (
    version     BIGINT    NOT NULL,  -- 1, 2, ...
    method      VARCHAR   NOT NULL,  -- SGD | SAMPLERANK
    rules       VARCHAR[] NOT NULL,  -- the rules whose weights were learned
    options     VARCHAR   NOT NULL,  -- the WITH options, as written (JSON object)
    epochs      INTEGER   NOT NULL,  -- epochs run
    seconds     DOUBLE    NOT NULL,
    interrupted BOOLEAN   NOT NULL,  -- Ctrl-C / cancel / time_limit: the last full epoch's weights
    holdout     BIGINT    NOT NULL,  -- held-out evidence variables (0: no holdout)
    accuracy    DOUBLE,              -- on the holdout (NULL without one)
    log_loss    DOUBLE,
    ece         DOUBLE,              -- expected calibration error over the 10 buckets
    created     TIMESTAMP NOT NULL
);

CREATE TABLE IF NOT EXISTS pdbq_learned_weights (
    version    BIGINT  NOT NULL,
    rule       VARCHAR NOT NULL,
    rule_hash  VARCHAR NOT NULL,     -- definition hash of the rule the value belongs to
    tie        VARCHAR,              -- ?(cols): the tying value as JSON; NULL for ?
    value      DOUBLE  NOT NULL,
    stderr     DOUBLE,               -- asymptotic standard error (NULL when unknown)
    groundings BIGINT  NOT NULL      -- factors (or head groups) sharing the weight
);

CREATE TABLE IF NOT EXISTS pdbq_calibration (
    version     BIGINT  NOT NULL,
    bucket      INTEGER NOT NULL,    -- 0 .. 9: predicted probability in [bucket/10, (bucket+1)/10)
    lower       DOUBLE  NOT NULL,
    upper       DOUBLE  NOT NULL,
    predicted   BIGINT  NOT NULL,    -- held-out (variable, value) pairs in the bucket
    true_count  BIGINT  NOT NULL,    -- of which the value was observed
    false_count BIGINT  NOT NULL,
    mean_probability  DOUBLE,        -- mean predicted probability in the bucket (NULL if empty)
    observed_fraction DOUBLE         -- true_count / predicted (NULL if empty)
);
