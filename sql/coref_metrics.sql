-- Coreference evaluation as DuckDB table macros (registered by pdbq.coref.metrics.register_sql).
-- pred: a table or view with columns (id, cluster), gold: a table or view with (id, entity).
-- Both name the same ids: an id in one and not the other is an error (raised by error()).
-- B³ (Bagga & Baldwin 1998): per mention, precision |C(m) ∩ G(m)| / |C(m)| and recall
-- |C(m) ∩ G(m)| / |G(m)|, averaged over mentions. Pairwise: over unordered pairs of mentions
-- placed together (predicted) vs together in gold.
CREATE OR REPLACE TEMP MACRO coref_b3(pred, gold) AS TABLE
WITH p AS (SELECT id, cluster FROM query_table(pred)),
     g AS (SELECT id, entity FROM query_table(gold)),
     unmatched AS (SELECT count(*) AS n FROM p FULL OUTER JOIN g USING (id) WHERE p.cluster IS NULL AND p.id IS NULL OR g.entity IS NULL AND g.id IS NULL),
     j AS (SELECT p.cluster, g.entity FROM p JOIN g USING (id)),
     cg AS (SELECT cluster, entity, count(*)::DOUBLE AS n FROM j GROUP BY ALL),
     c AS (SELECT cluster, count(*)::DOUBLE AS n FROM j GROUP BY ALL),
     e AS (SELECT entity, count(*)::DOUBLE AS n FROM j GROUP BY ALL),
     s AS (SELECT sum(cg.n * cg.n / c.n) / sum(cg.n) AS precision,
                  sum(cg.n * cg.n / e.n) / sum(cg.n) AS recall
           FROM cg JOIN c USING (cluster) JOIN e USING (entity))
SELECT CASE WHEN (SELECT n FROM unmatched) > 0
            THEN error('coref_b3: ' || (SELECT n FROM unmatched) || ' id(s) appear in only one of pred and gold')
            ELSE precision END AS precision,
       recall,
       2 * precision * recall / (precision + recall) AS f1
FROM s;

CREATE OR REPLACE TEMP MACRO coref_pairwise(pred, gold) AS TABLE
WITH p AS (SELECT id, cluster FROM query_table(pred)),
     g AS (SELECT id, entity FROM query_table(gold)),
     unmatched AS (SELECT count(*) AS n FROM p FULL OUTER JOIN g USING (id) WHERE p.cluster IS NULL AND p.id IS NULL OR g.entity IS NULL AND g.id IS NULL),
     j AS (SELECT p.cluster, g.entity FROM p JOIN g USING (id)),
     tp AS (SELECT sum(n * (n - 1) / 2)::DOUBLE AS v FROM (SELECT count(*)::DOUBLE AS n FROM j GROUP BY cluster, entity)),
     pp AS (SELECT sum(n * (n - 1) / 2)::DOUBLE AS v FROM (SELECT count(*)::DOUBLE AS n FROM j GROUP BY cluster)),
     gp AS (SELECT sum(n * (n - 1) / 2)::DOUBLE AS v FROM (SELECT count(*)::DOUBLE AS n FROM j GROUP BY entity)),
     s AS (SELECT CASE WHEN pp.v > 0 THEN tp.v / pp.v ELSE 1.0 END AS precision,
                  CASE WHEN gp.v > 0 THEN tp.v / gp.v ELSE 1.0 END AS recall
           FROM tp, pp, gp)
SELECT CASE WHEN (SELECT n FROM unmatched) > 0
            THEN error('coref_pairwise: ' || (SELECT n FROM unmatched) || ' id(s) appear in only one of pred and gold')
            ELSE precision END AS precision,
       recall,
       CASE WHEN precision + recall > 0 THEN 2 * precision * recall / (precision + recall) ELSE 0.0 END AS f1
FROM s;
