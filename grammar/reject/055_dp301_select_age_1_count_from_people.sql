-- expect: DP301
-- caret: age
SELECT age + 1, COUNT(*) FROM people
