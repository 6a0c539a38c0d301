SELECT state, COUNT(*) AS n FROM people GROUP BY state ORDER BY length(state) DESC, CAST(state AS VARCHAR)
