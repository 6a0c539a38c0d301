-- expect: DP301
-- caret: age
SELECT age, COUNT(*) FROM people GROUP BY sex
