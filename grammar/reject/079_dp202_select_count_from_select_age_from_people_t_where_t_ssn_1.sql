-- expect: DP202
-- caret: t.ssn
SELECT COUNT(*) FROM (SELECT age FROM people) t WHERE t.ssn = 1
