-- pdbq catalog: entity-resolution pair models (Fellegi–Sunter m/u per comparison level and the
-- match prior) stored by `pdbq.dedupe(..., model_name=...)` / `pdbq dedupe --model NAME`,
-- versioned like learned weights: each stored fit adds a version of its name, earlier versions
-- are kept. Read by pdbq/catalog/pair_models.py; created by the first store (CREATE TABLE IF NOT
-- EXISTS: any DuckDB file, with or without a pdbq catalog, gains them then).

CREATE TABLE IF NOT EXISTS pdbq_pair_models (
    name            VARCHAR   NOT NULL,  -- lower-cased
    version         BIGINT    NOT NULL,  -- 1, 2, ... per name
    source          VARCHAR   NOT NULL,  -- em | labels | labels-pairs: how m and u were fitted
    fields          VARCHAR[] NOT NULL,  -- the compared fields, in scoring order
    prior           DOUBLE    NOT NULL,  -- λ: P(two records drawn at random are one entity)
    model           VARCHAR   NOT NULL,  -- the whole model as JSON (levels, thresholds, m, u, tf)
    records         BIGINT    NOT NULL,  -- records of the table it was fitted on
    candidate_pairs BIGINT    NOT NULL,
    created         TIMESTAMP NOT NULL
);

CREATE TABLE IF NOT EXISTS pdbq_pair_model_levels (
    name        VARCHAR NOT NULL,
    version     BIGINT  NOT NULL,
    field       VARCHAR NOT NULL,
    kind        VARCHAR NOT NULL,        -- the field's comparison kind (string, date, ...)
    level       INTEGER NOT NULL,        -- 0 = exact, then decreasing agreement
    level_name  VARCHAR NOT NULL,
    m           DOUBLE  NOT NULL,        -- P(level | one entity)
    u           DOUBLE  NOT NULL,        -- P(level | two entities)
    weight_bits DOUBLE  NOT NULL,        -- log2(m / u)
    tf          BOOLEAN NOT NULL         -- an exact match weighed by the value's term frequency
);
