SELECT COUNT(*) * 2 AS twice, ROUND(AVG(income), 1) AS mean FROM people
