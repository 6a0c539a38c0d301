SELECT CASE WHEN state IN ('CA', 'NY') THEN 'coast' ELSE 'other' END AS region, COUNT(*) FROM people GROUP BY region
