-- expect: DP301
-- caret: age
SELECT state, COUNT(*) FROM people GROUP BY state ORDER BY age
