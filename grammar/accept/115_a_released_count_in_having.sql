SELECT state, COUNT(*) AS n FROM people GROUP BY state HAVING COUNT(*) > (SELECT COUNT(*) FROM people WHERE age > 50) / 3
