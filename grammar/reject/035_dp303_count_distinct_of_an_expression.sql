-- expect: DP303
-- caret: age + 1
SELECT COUNT(DISTINCT age + 1) FROM people
