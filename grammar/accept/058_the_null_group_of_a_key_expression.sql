SELECT CASE WHEN state = 'CA' THEN 'west' END AS region, COUNT(*) AS n FROM people GROUP BY region
