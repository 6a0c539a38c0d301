-- expect: DP301
-- caret: age
SELECT age FROM people
