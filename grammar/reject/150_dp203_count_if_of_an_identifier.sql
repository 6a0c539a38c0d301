-- expect: DP203
-- caret: ssn
SELECT COUNT_IF(ssn = 'ssn-1') FROM people
