-- pdbq factor store (issue 3). Read by pdbq/grounding/store.py; every statement is idempotent.
-- Per-relation and per-rule tables are created by the code with the names documented in
-- docs/grounding.md: pdbq_fs_vars__<relation>(vid, keys..., [cardinality]) and
-- pdbq_fs_factors__<rule>(v0 .. v{k-1}, [w], [t_<sym>...], [h_<sym>...]).

-- One row per variable relation with a built vid map: global vids base .. base + n - 1.
CREATE TABLE IF NOT EXISTS pdbq_fs_relations (
    relation     VARCHAR PRIMARY KEY,
    base         BIGINT NOT NULL,      -- first global vid of the relation
    n            BIGINT NOT NULL,      -- number of variables (distinct non-NULL keys)
    cardinality  INTEGER NOT NULL,     -- domain size (the maximum when per_row)
    per_row      BOOLEAN NOT NULL,     -- cardinality column in the map table
    def_hash     VARCHAR NOT NULL,     -- hash of the CREATE VARIABLE definition
    source_fp    VARCHAR NOT NULL,     -- fingerprint of the FROM query's result
    evidence_fp  VARCHAR NOT NULL,     -- fingerprint of the EVIDENCE query's result ('' if none)
    map_version  BIGINT NOT NULL,      -- bumped whenever the vid <-> key map changes
    null_keys    BIGINT NOT NULL,      -- FROM rows skipped because a key was NULL
    ev_warnings  VARCHAR[] NOT NULL    -- warnings from the last evidence load (repeated on reuse)
);

-- Stored evidence (from EVIDENCE queries), internal values: BOOLEAN 0/1, VALUES index, CATEGORICAL k.
CREATE TABLE IF NOT EXISTS pdbq_fs_evidence (
    relation VARCHAR NOT NULL,
    vid      INTEGER NOT NULL,
    value    INTEGER NOT NULL
);

-- One row per rule with stored groundings.
CREATE TABLE IF NOT EXISTS pdbq_fs_rules (
    rule         VARCHAR PRIMARY KEY,
    position     INTEGER NOT NULL,     -- order of the rule's factors in a full graph
    def_hash     VARCHAR NOT NULL,     -- hash of the CREATE RULE definition
    inputs_fp    VARCHAR NOT NULL,     -- fingerprint of observed inputs + map versions
    complete     BOOLEAN NOT NULL,     -- every grounding is stored (else: query-driven part)
    function     TINYINT NOT NULL,     -- FactorFunction code
    semantics    TINYINT NOT NULL,     -- Semantics code (LINEAR: no head groups)
    arity        INTEGER NOT NULL,
    relations    VARCHAR[] NOT NULL,   -- variable relation of each argument position
    literals     INTEGER[] NOT NULL,   -- literal of each argument position (-1 raw, k: [x = k])
    weight_kind  VARCHAR NOT NULL,     -- constant | learnable | tied | expression
    n_factors    BIGINT NOT NULL
);

-- Weights: constant and learnable rules have one row (wid 0, tie NULL); tied rules one row per
-- distinct tying value (tie: JSON object symbol -> value); expression weights live per factor
-- in the factor table's column w. Rows survive re-grounding so learned values are kept.
CREATE TABLE IF NOT EXISTS pdbq_fs_weights (
    rule      VARCHAR NOT NULL,
    wid       INTEGER NOT NULL,
    value     DOUBLE NOT NULL,
    learnable BOOLEAN NOT NULL,
    tie       VARCHAR
);

-- Query-driven grounding: (rule, vid) pairs whose factors of that rule are all stored.
CREATE TABLE IF NOT EXISTS pdbq_fs_expanded (
    rule VARCHAR NOT NULL,
    vid  INTEGER NOT NULL
);

-- Imported models (pdbq.io, e.g. UAI files): one row per variable relation whose factors were
-- read from a file rather than grounded from rules. The factors live in `tables[0]`
-- (pdbq_fs_imported__<relation>(fid, vids INTEGER[], log_table DOUBLE[]); vids are the relation's
-- keys `id`, global vid = base + id), the variables (id, cardinality) in `tables[1]`, evidence in
-- `tables[2]`. DROP VARIABLE <relation> drops every table listed here (pdbq/catalog/store.py).
CREATE TABLE IF NOT EXISTS pdbq_fs_imports (
    relation   VARCHAR NOT NULL,
    source     VARCHAR NOT NULL,     -- the relation's FROM query when imported (live while unchanged)
    n_vars     BIGINT NOT NULL,      -- ids 0 .. n_vars - 1
    n_factors  BIGINT NOT NULL,
    n_entries  BIGINT NOT NULL,      -- log-table entries over all factors
    kind       VARCHAR NOT NULL,     -- 'uai'
    origin     VARCHAR NOT NULL,     -- the file it came from
    tables     VARCHAR[] NOT NULL    -- the tables owned by the import (dropped with the relation)
);
