-- expect: DP203
-- caret: ssn
SELECT COUNT(s) FROM (SELECT ssn AS s FROM people) t
