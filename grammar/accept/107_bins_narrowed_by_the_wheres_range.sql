SELECT FLOOR(age / 10) * 10 AS decade, COUNT(*) AS n, SUM(income) AS total FROM people WHERE age >= 25 AND age < 60 GROUP BY FLOOR(age / 10) * 10
