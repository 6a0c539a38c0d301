-- expect: DP203
-- caret: ssn
SELECT COUNT(*) FROM (SELECT ssn AS s, age FROM people) t WHERE age > 3
