SELECT FLOOR(age / 10) * 10 AS decade, COUNT(*) AS n, AVG(income) AS mean FROM people GROUP BY decade ORDER BY decade
