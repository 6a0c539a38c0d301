-- expect: DP302
-- caret: COUNT_IF(age)
SELECT COUNT_IF(age) FROM people
