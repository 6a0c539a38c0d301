SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(top_k = 'noisy_values') state, sex, COUNT(*) AS n FROM people GROUP BY state, sex ORDER BY n DESC LIMIT 2
