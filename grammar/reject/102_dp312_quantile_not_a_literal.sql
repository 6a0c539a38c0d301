-- expect: DP312
-- caret: age / 100
SELECT PERCENTILE_CONT(income, age / 100) FROM people
