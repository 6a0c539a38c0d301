WITH adults AS (SELECT age, income AS inc, state FROM people WHERE age >= 18)
SELECT state, COUNT(*), AVG(inc) FROM adults WHERE inc > 10 GROUP BY state
