-- expect: DP203
-- caret: ssn
SELECT COUNT(*) FROM people GROUP BY ssn
