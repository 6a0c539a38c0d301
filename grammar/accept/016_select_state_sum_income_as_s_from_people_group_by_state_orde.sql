SELECT state, SUM(income) AS s FROM people GROUP BY state ORDER BY AVG(age) LIMIT 2 OFFSET 1
