-- expect: DP312
-- caret: 1.5
SELECT QUANTILE_CONT(age, 1.5) FROM people
