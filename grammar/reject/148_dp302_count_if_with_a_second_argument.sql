-- expect: DP302
-- caret: COUNT_IF(age > 30, TRUE)
SELECT COUNT_IF(age > 30, TRUE) FROM people
