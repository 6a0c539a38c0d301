SELECT IF(income > 500, 'high', 'low') AS level, CASE WHEN age >= 65 THEN 'senior' END AS senior, COUNT(*) AS n FROM people GROUP BY 1, 2
