SELECT state, COUNT(*) FROM people GROUP BY state HAVING state <> 'TX'
