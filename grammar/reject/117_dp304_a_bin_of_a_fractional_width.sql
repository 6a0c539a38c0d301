-- expect: DP304
-- caret: age / 2.5
SELECT COUNT(*) FROM people GROUP BY FLOOR(age / 2.5)
