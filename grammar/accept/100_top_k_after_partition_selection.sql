SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 1e-6, top_k = 'exponential') zip, COUNT(*) AS n FROM people GROUP BY zip ORDER BY n DESC LIMIT 3
