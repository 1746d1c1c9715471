-- pdbq demo: which movies are popular, given who tweets about them and who is a fan?
-- Run with:  pdbq -f examples/movies.sql      (an in-memory database)

CREATE TABLE movies(title TEXT);
INSERT INTO movies VALUES ('Up'), ('Heat'), ('Twilight'), ('Avengers'), ('Amelie'), ('Cars');

CREATE TABLE people(name TEXT);
INSERT INTO people VALUES ('ann'), ('bart'), ('carol'), ('dave'), ('erin'), ('frank'), ('gina'), ('bot7');

-- who tweeted about which movie
CREATE TABLE tweets(person TEXT, movie TEXT);
INSERT INTO tweets VALUES
  ('ann', 'Up'), ('bart', 'Up'), ('carol', 'Up'), ('dave', 'Up'),
  ('ann', 'Heat'), ('erin', 'Heat'),
  ('bart', 'Twilight'), ('bot7', 'Twilight'), ('frank', 'Twilight'),
  ('carol', 'Avengers'), ('dave', 'Avengers'), ('erin', 'Avengers'), ('gina', 'Avengers'), ('frank', 'Avengers'),
  ('gina', 'Amelie'),
  ('bot7', 'Cars');

-- who follows whom
CREATE TABLE follows(follower TEXT, followee TEXT);
INSERT INTO follows VALUES ('bart', 'ann'), ('carol', 'ann'), ('dave', 'carol'), ('erin', 'dave'),
  ('frank', 'bart'), ('gina', 'erin'), ('ann', 'gina');

-- what we know for sure about some people
CREATE TABLE fan_labels(name TEXT, fan BOOLEAN);
INSERT INTO fan_labels VALUES ('ann', TRUE), ('frank', FALSE);

-- random variables: one per movie, one per person
CREATE VARIABLE is_popular(title TEXT) DOMAIN BOOLEAN FROM (SELECT title FROM movies);
CREATE VARIABLE is_fan(name TEXT) DOMAIN BOOLEAN FROM (SELECT name FROM people)
    EVIDENCE (SELECT name, fan FROM fan_labels);

-- a movie is popular when fans tweet about it; RATIO: each extra fan counts, with diminishing returns
CREATE RULE fans_vote WEIGHT 0.9 SEMANTICS RATIO
    AS is_popular(^m) :- tweets(p, m), is_fan(p), p <> 'bot7';
-- fans follow fans; LOGICAL: one fan followee is as good as many
CREATE RULE fans_follow WEIGHT 0.7 SEMANTICS LOGICAL
    AS is_fan(^a) :- follows(a, b), is_fan(b);
-- most people are not fans, most movies are not popular
CREATE RULE fan_prior WEIGHT -0.4 AS is_fan(p) :- people(p);
CREATE RULE popular_prior WEIGHT -0.5 AS is_popular(m) :- movies(m);

SHOW RULES;

-- 1. every movie but the Avengers, assuming bart is a fan and the Avengers are not popular
SELECT m.title, round(PROB(m), 3) AS p, round(STDERR(m), 4) AS se
FROM is_popular AS m
WHERE m.title <> 'Avengers'
ORDER BY p DESC
GIVEN is_fan('bart') = TRUE, is_popular('Avengers') = FALSE
USING QAM WITH (tolerance = 0.01, time_limit = 5, seed = 7);  -- the tolerance ends it in well under a second

-- 2. the three most probable fans among the people we have no label for
SELECT f.name, round(PROB(f), 3) AS p, round(STDERR(f), 4) AS se
FROM is_fan AS f
WHERE f.name NOT IN (SELECT name FROM fan_labels)
ORDER BY p DESC
LIMIT 3;

-- 3. what pdbq does to answer for one movie, and why
EXPLAIN SELECT m.title, PROB(m) FROM is_popular AS m WHERE m.title = 'Up'
GIVEN is_fan('bart') = TRUE;
