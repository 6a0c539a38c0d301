-- expect: DP304
-- caret: YEAR(joined)
SELECT YEAR(joined) AS y, COUNT(*) FROM people GROUP BY YEAR(joined)
