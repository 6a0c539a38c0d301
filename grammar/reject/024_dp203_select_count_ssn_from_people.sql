-- expect: DP203
-- caret: ssn
SELECT COUNT(ssn) FROM people
