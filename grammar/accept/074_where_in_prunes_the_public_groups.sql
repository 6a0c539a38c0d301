SELECT state, COUNT(*) AS n FROM people WHERE state IN ('CA', 'NY') AND age > 20 GROUP BY state
