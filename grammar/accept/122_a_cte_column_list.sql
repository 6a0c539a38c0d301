-- a CTE's and a subquery's column list name their items, as AS would (DuckDB names the outputs so)
WITH t (s, st) AS (SELECT sex, state FROM people)
SELECT S, st, COUNT(*) AS n FROM t GROUP BY S, st
