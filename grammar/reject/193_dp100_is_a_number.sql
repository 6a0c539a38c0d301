-- expect: DP100
-- caret: 4
-- sqlglot reads IS 4, DuckDB's parser does not (the slow fuzz test found its ParserException from a key read)
SELECT region, COUNT(*) AS n, SUM(cost) AS total FROM visits v JOIN clinics c ON v.clinic = c.clinic WHERE doctors IS 4 GROUP BY region
