-- expect: DP202
-- a column list naming more columns than the CTE selects (DuckDB refuses it too)
WITH t (a, b, c) AS (SELECT sex, state FROM people)
SELECT a, COUNT(*) AS n FROM t GROUP BY a
