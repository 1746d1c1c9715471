-- The Markov-logic classic (Richardson & Domingos, "Markov logic networks", 2006):
-- smoking causes cancer, and friends have similar smoking habits.
-- Run with:  pdbq -f examples/smokers.sql

CREATE TABLE people(person TEXT);
INSERT INTO people VALUES ('Anna'), ('Bob'), ('Chris'), ('Daniel'), ('Edward'), ('Frank'), ('Gary'), ('Helen');

-- two groups of friends (symmetric pairs), joined by Daniel - Edward
CREATE TABLE friends(a TEXT, b TEXT);
INSERT INTO friends
SELECT a, b FROM (VALUES ('Anna', 'Bob'), ('Bob', 'Chris'), ('Anna', 'Chris'), ('Chris', 'Daniel'),
                         ('Daniel', 'Edward'), ('Edward', 'Frank'), ('Frank', 'Gary'), ('Gary', 'Helen'),
                         ('Edward', 'Gary')) f(a, b)
UNION ALL
SELECT b, a FROM (VALUES ('Anna', 'Bob'), ('Bob', 'Chris'), ('Anna', 'Chris'), ('Chris', 'Daniel'),
                         ('Daniel', 'Edward'), ('Edward', 'Frank'), ('Frank', 'Gary'), ('Gary', 'Helen'),
                         ('Edward', 'Gary')) f(a, b);

-- what we observed
CREATE TABLE smoking(person TEXT, smokes BOOLEAN);
INSERT INTO smoking VALUES ('Anna', TRUE), ('Edward', TRUE), ('Helen', FALSE);
CREATE TABLE diagnoses(person TEXT, cancer BOOLEAN);
INSERT INTO diagnoses VALUES ('Frank', TRUE);

CREATE VARIABLE smokes(person TEXT) DOMAIN BOOLEAN
    FROM (SELECT person FROM people)
    EVIDENCE (SELECT person, smokes FROM smoking);
CREATE VARIABLE cancer(person TEXT) DOMAIN BOOLEAN
    FROM (SELECT person FROM people)
    EVIDENCE (SELECT person, cancer FROM diagnoses);

-- 1.5  Smokes(x) => Cancer(x): an MLN clause (IMPLY_MLN: 1 when satisfied, 0 when violated)
CREATE RULE smoking_causes_cancer WEIGHT 1.5 FUNCTION IMPLY_MLN
    AS cancer(x) :- smokes(x);
-- 1.1  Friends(a, b) => (Smokes(a) <=> Smokes(b)); EQUAL is +1 when equal, -1 otherwise, so this
--      is the MLN formula at twice the weight, counted once per direction of each friendship
CREATE RULE friends_smoke_alike WEIGHT 0.55 FUNCTION EQUAL
    AS smokes(a) = smokes(b) :- friends(a, b);
-- most people neither smoke nor have cancer
CREATE RULE few_smoke WEIGHT -0.4 FUNCTION ISTRUE AS smokes(x) :- people(x);
CREATE RULE cancer_is_rare WEIGHT -0.6 FUNCTION ISTRUE AS cancer(x) :- people(x);

SHOW RULES;

-- 1. who smokes? (the evidence rows come back as 1.0 / 0.0)
SELECT s.person, round(PROB(s), 3) AS p_smokes, round(STDERR(s), 4) AS se
FROM smokes AS s
ORDER BY p_smokes DESC, s.person
USING GIBBS WITH (seed = 1, tolerance = 0.01, time_limit = 60);  -- the tolerance ends it; 60 s leaves room for a first run's kernel compilation

-- 2. who has cancer? exact inference (the model is small)
SELECT c.person, round(PROB(c), 3) AS p_cancer
FROM cancer AS c
ORDER BY p_cancer DESC, c.person
USING EXACT;

-- 3. Bob's habits, if we learn that Bob has cancer
SELECT s.person, round(PROB(s), 3) AS p_smokes
FROM smokes AS s
WHERE s.person = 'Bob'
GIVEN cancer('Bob') = TRUE
USING EXACT;

-- 4. the most probable world for the smokers
SELECT s.person, MAP(s) AS smokes
FROM smokes AS s
ORDER BY s.person
USING EXACT;
