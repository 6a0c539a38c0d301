SELECT CASE WHEN age < 18 THEN 'child' WHEN age < 65 THEN 'adult' ELSE 'senior' END AS band, COUNT(*) AS n, AVG(income) AS mean FROM people GROUP BY band ORDER BY band
