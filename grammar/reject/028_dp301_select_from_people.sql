-- expect: DP301
-- caret: *
SELECT * FROM people
