-- expect: DP317
SELECT COUNT(*) FROM people WHERE age > (SELECT AVG(age) FROM people GROUP BY sex)
