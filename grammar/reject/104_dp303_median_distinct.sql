-- expect: DP303
-- caret: MEDIAN(DISTINCT age)
SELECT MEDIAN(DISTINCT age) FROM people
