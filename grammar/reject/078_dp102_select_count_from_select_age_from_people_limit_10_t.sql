-- expect: DP102
-- caret: 10
SELECT COUNT(*) FROM (SELECT age FROM people LIMIT 10) t
