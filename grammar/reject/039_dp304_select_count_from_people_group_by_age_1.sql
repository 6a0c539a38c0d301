-- expect: DP304
-- caret: age + 1
SELECT COUNT(*) FROM people GROUP BY age + 1
