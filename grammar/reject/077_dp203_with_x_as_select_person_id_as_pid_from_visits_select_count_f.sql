-- expect: DP203
-- caret: person_id
WITH x AS (SELECT person_id AS pid FROM visits) SELECT COUNT(*) FROM x WHERE pid = 4
