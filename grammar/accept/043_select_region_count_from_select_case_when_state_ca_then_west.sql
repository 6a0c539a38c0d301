SELECT region, COUNT(*) FROM (SELECT CASE WHEN state = 'CA' THEN 'west' ELSE 'east' END AS region FROM people) t GROUP BY region
