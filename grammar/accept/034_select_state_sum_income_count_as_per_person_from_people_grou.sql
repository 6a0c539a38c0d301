SELECT state, SUM(income) / COUNT(*) AS per_person FROM people GROUP BY state
