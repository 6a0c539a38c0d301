-- expect: DP307
-- caret: 3
SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY 3
