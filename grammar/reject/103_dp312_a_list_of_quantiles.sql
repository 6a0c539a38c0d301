-- expect: DP312
-- caret: 0.1, 0.9
SELECT QUANTILE_CONT(income, [0.1, 0.9]) FROM people
