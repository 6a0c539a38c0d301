-- expect: DP102
SELECT COUNT(*) FROM (SELECT age, COUNT(*) AS c FROM people GROUP BY age) t
