-- expect: DP100
-- a column list holding a type: sqlglot reads a column definition, DuckDB a syntax error
WITH t (s st) AS (SELECT sex, state FROM people)
SELECT s, COUNT(*) AS n FROM t GROUP BY s
