SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 2) s, COUNT(*) AS n, SUM(income) AS total
FROM (SELECT sex AS s, income FROM people WHERE income > (SELECT AVG(income) FROM people WHERE age > 30)) AS p
GROUP BY s ORDER BY s
