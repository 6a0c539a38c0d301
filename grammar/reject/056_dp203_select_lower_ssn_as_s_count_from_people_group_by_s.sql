-- expect: DP203
-- caret: ssn
SELECT lower(ssn) AS s, COUNT(*) FROM people GROUP BY s
